"""The recommender behind `get_recommendations_by_history`.

`SASRecRecommender` turns a list of ASINs into the top-k next-item ASINs, scoring
exactly the items of the benchmark's item map. It loads a SASRec checkpoint (the
official `pwab.pth` or one trained by `recommender.train`) and its item map once,
then answers many concurrent callers from the same read-only model. torch is
imported only when a recommender is built, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from PersonalWAB.data.loader import LFS_POINTER_PREFIX, read_json
from PersonalWAB.errors import DataError, EngineError

if TYPE_CHECKING:
    import torch

    from PersonalWAB.data.loader import BenchmarkData
    from PersonalWAB.engines.recommender.sasrec import SASRec

# Sequences scored per forward pass: bounds the (rows x candidates) score matrix.
ROWS_PER_PASS = 256
# A state dict does not record the user count and the network never uses it.
UNRECORDED_USER_NUM = 0
DEFAULT_NUM_HEADS = 2


def load_item_map(path: Path) -> dict[str, int]:
    """The ASIN -> item id map; ids start at 1 because 0 is the model's padding item."""
    item_map = read_json(path)
    if not isinstance(item_map, dict) or not item_map:
        raise DataError(f"{path}: expected a non-empty JSON object mapping ASIN -> item id")
    for asin, item_id in item_map.items():
        if isinstance(item_id, bool) or not isinstance(item_id, int) or item_id < 1:
            raise DataError(f"{path}: [{asin!r}]: expected a positive integer item id, got {item_id!r}")
    return item_map


def load_state_dict(path: Path, device: str) -> Mapping[str, torch.Tensor]:
    """The checkpoint's tensors, with a message naming the file for every way reading it can fail."""
    import torch

    from PersonalWAB.engines.recommender.sasrec import unwrap_state_dict

    try:
        with path.open("rb") as handle:
            head = handle.read(len(LFS_POINTER_PREFIX))
    except FileNotFoundError:
        raise DataError(f"{path}: SASRec checkpoint not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read the SASRec checkpoint ({exc})") from None
    if head == LFS_POINTER_PREFIX:
        raise DataError(f"{path}: is a Git LFS pointer, not the checkpoint; fetch it with `git lfs pull`")
    try:
        return unwrap_state_dict(torch.load(path, map_location=device, weights_only=True))
    except Exception as exc:  # torch.load fails with pickle, zip, EOF and runtime errors alike
        raise DataError(f"{path}: not a readable PyTorch state dict ({type(exc).__name__}: {exc})") from None


def load_model(path: Path, device: str = "cpu", num_heads: int = DEFAULT_NUM_HEADS) -> SASRec:
    """A SASRec in eval mode, shaped after the checkpoint's tensors (heads cannot be read off them)."""
    from PersonalWAB.engines.recommender.sasrec import SASRec, config_from_state_dict

    state_dict = load_state_dict(path, device)
    try:
        item_num, config = config_from_state_dict(state_dict, num_heads)
    except (KeyError, ValueError, AttributeError, TypeError) as exc:
        raise DataError(f"{path}: not a SASRec state dict ({type(exc).__name__}: {exc})") from None
    model = SASRec(UNRECORDED_USER_NUM, item_num, config)
    try:
        model.load_state_dict(state_dict)
    except RuntimeError as exc:
        raise DataError(f"{path}: does not match the SASRec layout: {exc}") from None
    return model.to(device).eval()


def checkpoint_record_path(checkpoint: Path) -> Path:
    """`<checkpoint>.json`: how a trained checkpoint was made and what it was trained on."""
    return checkpoint.with_name(checkpoint.name + ".json")


def provenance(checkpoint: Path, item_map: Path, behaviours_fingerprint: str) -> dict[str, str]:
    """What a trained checkpoint records about its inputs, so it is never used with others:
    the files it learnt from are the products and histories (`behaviours_fingerprint`); the
    tasks and profiles are not, so editing them does not make it stale."""
    from PersonalWAB.digests import file_sha256

    return {"checkpoint_sha256": file_sha256(checkpoint), "item_map_sha256": file_sha256(item_map),
            "behaviours_fingerprint": behaviours_fingerprint}


def _record(checkpoint: Path) -> dict[str, object]:
    """The checkpoint's record, {} when it has none (the official checkpoint) or none readable."""
    try:
        record = read_json(checkpoint_record_path(checkpoint))
    except DataError:
        return {}
    return record if isinstance(record, dict) else {}


def foreign_recommender(checkpoint: Path, item_map: Path, products: Mapping[str, object]) -> str | None:
    """Why this checkpoint and item map cannot serve these products (None: they can): the item
    map is missing, either file is not the one the checkpoint's record names, or the item map
    shares no ASIN with the products. Each would make every recommendation empty or
    meaningless, and every recommend task score 0 as an agent failure."""
    from PersonalWAB.digests import file_sha256

    if not item_map.is_file():
        return (f"{checkpoint}: its item map {item_map} is missing; a checkpoint is usable only with the item "
                "map it was trained with")
    record = _record(checkpoint)
    for path, key in ((checkpoint, "checkpoint_sha256"), (item_map, "item_map_sha256")):
        if key in record and record[key] != file_sha256(path):
            return (f"{path}: is not the file {checkpoint_record_path(checkpoint)} records ({key} differs); "
                    "the checkpoint and its item map were replaced or copied from another data folder")
    asins = load_item_map(item_map)
    if products and not any(asin in products for asin in asins):
        return (f"{item_map}: none of its {len(asins)} ASINs is among the {len(products)} products of this data; "
                "the recommender was built for another data folder")
    return None


def trained_on_other_data(checkpoint: Path, data: BenchmarkData) -> bool:
    """Whether the checkpoint's record names products and histories other than these (edited
    since training). A record from before it named those alone names every data file
    (`data_fingerprint`): that is compared instead."""
    record = _record(checkpoint)
    if "behaviours_fingerprint" in record:
        return record["behaviours_fingerprint"] != data.behaviours_fingerprint
    recorded = record.get("data_fingerprint")
    return recorded is not None and recorded != data.fingerprint


class SequenceRecommender:
    """Top-k next-item ASINs restricted to an item map's items: what the PyTorch recommender and
    the exported one (`PersonalWAB.engines.recommender.exported`) share. A backend binds the item
    map (`_bind_items`) and gives the best `k` candidate columns of id rows (`_top_columns`)."""

    _item_map: dict[str, int]
    _candidate_asins: tuple[str, ...]

    @property
    def maxlen(self) -> int:
        """How many of the most recent known items a sequence is cut to."""
        raise NotImplementedError

    def _bind_items(self, item_map: Mapping[str, int]) -> list[int]:
        """Keep the item map; the candidate ids, in the column order of every score row."""
        self._item_map = dict(item_map)
        # An id listed under two ASINs answers with the later one, as the release's reverse map does.
        id_to_asin = {item_id: asin for asin, item_id in item_map.items()}
        candidate_ids = sorted(id_to_asin)
        self._candidate_asins = tuple(id_to_asin[i] for i in candidate_ids)
        return candidate_ids

    @property
    def candidate_asins(self) -> tuple[str, ...]:
        """Every ASIN that can be recommended, in the column order of the scores."""
        return self._candidate_asins

    def _item_ids(self, product_sequence: Sequence[str]) -> list[int]:
        """The known items of the sequence, the last `maxlen` of them, taken exactly as the
        release takes them: whatever the argument is, it is iterated and each element looked
        up, so a bare string yields its letters (none known) and an unhashable element
        fails with Python's own message."""
        ids = [self._item_map[asin] for asin in product_sequence if asin in self._item_map]
        return ids[-self.maxlen :]

    def _padded(self, rows: list[list[int]]) -> np.ndarray:
        """Non-empty id rows left-padded with the padding item 0 to `maxlen`."""
        batch = np.zeros((len(rows), self.maxlen), dtype=np.int64)
        for r, ids in enumerate(rows):
            batch[r, self.maxlen - len(ids) :] = ids
        return batch

    def _top_columns(self, rows: list[list[int]], k: int) -> list[list[int]]:
        """The `k` best candidate columns of each non-empty id row, best first."""
        raise NotImplementedError

    def recommend_batch(self, sequences: Sequence[Sequence[str]], k: int = 10) -> list[list[str]]:
        """Top-k ASINs, best first, for each sequence; [] for a sequence with no known ASIN."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        rows = [self._item_ids(sequence) for sequence in sequences]
        scored = [i for i, ids in enumerate(rows) if ids]
        results: list[list[str]] = [[] for _ in rows]
        k = min(k, len(self._candidate_asins))
        for start in range(0, len(scored), ROWS_PER_PASS):
            chunk = scored[start : start + ROWS_PER_PASS]
            try:
                top = self._top_columns([rows[i] for i in chunk], k)
            except Exception as exc:  # the model's failure, not the caller's: the sequences are read above
                raise EngineError(f"the SASRec recommender failed: {type(exc).__name__}: {exc}") from exc
            for i, columns in zip(chunk, top):
                results[i] = [self._candidate_asins[c] for c in columns]
        return results

    def recommend(self, product_sequence: Sequence[str], k: int = 10) -> list[str]:
        """Top-k next-item ASINs after `product_sequence` (time order, most recent last)."""
        return self.recommend_batch([product_sequence], k)[0]


class SASRecRecommender(SequenceRecommender):
    """Top-k next-item ASINs from a SASRec checkpoint in PyTorch, restricted to the item map's items."""

    def __init__(
        self,
        checkpoint_path: Path | str,
        item_map_path: Path | str,
        device: str = "cpu",
        num_heads: int = DEFAULT_NUM_HEADS,
    ) -> None:
        checkpoint_path, item_map_path = Path(checkpoint_path), Path(item_map_path)
        item_map = load_item_map(item_map_path)
        model = load_model(checkpoint_path, device, num_heads)
        largest = max(item_map.values())
        if largest > model.item_num:
            raise DataError(
                f"{checkpoint_path}: has embeddings for item ids 1..{model.item_num}, but {item_map_path} "
                f"uses ids up to {largest}; the checkpoint and the item map do not belong together"
            )
        self._bind(model, item_map, device)

    @classmethod
    def from_model(cls, model: SASRec, item_map: Mapping[str, int], device: str = "cpu") -> SASRecRecommender:
        """Wrap an in-memory model (e.g. one just trained) without a round trip through files.

        The model is switched to eval mode: scores must not depend on dropout.
        """
        recommender = cls.__new__(cls)
        recommender._bind(model.eval(), item_map, device)
        return recommender

    def _bind(self, model: SASRec, item_map: Mapping[str, int], device: str) -> None:
        import torch

        self._model = model
        self._candidate_ids = torch.tensor(self._bind_items(item_map), dtype=torch.long, device=device)
        self._device = device

    @property
    def maxlen(self) -> int:
        """How many of the most recent known items a sequence is cut to."""
        return self._model.config.maxlen

    def _score_rows(self, rows: list[list[int]]) -> torch.Tensor:
        """Scores (len(rows), candidates) for non-empty id rows."""
        import torch

        with torch.no_grad():
            return self._model.predict(None, torch.from_numpy(self._padded(rows)).to(self._device),
                                       self._candidate_ids)

    def score_candidates(self, product_sequence: Sequence[str]) -> torch.Tensor | None:
        """Next-item score of every candidate (in `candidate_asins` order); None when no ASIN is known."""
        ids = self._item_ids(product_sequence)
        return self._score_rows([ids])[0] if ids else None

    def _top_columns(self, rows: list[list[int]], k: int) -> list[list[int]]:
        import torch

        columns: list[list[int]] = torch.topk(self._score_rows(rows), k, dim=1).indices.tolist()
        return columns
