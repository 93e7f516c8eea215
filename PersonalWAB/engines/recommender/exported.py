"""SASRec scored by ONNX Runtime, so a run needs no PyTorch (about 1.5 s of start-up) and scores a
sequence about 6x faster on one core (docs/performance.md).

The trained checkpoint is exported once, where the data folder's artefacts are built
(`PersonalWAB.build`, which a run calls for what is missing), into `<checkpoint>.onnx` (its
digest recorded beside it, with a record naming the checkpoint's SHA-256 and the sequence
length). The export is kept only where its top-k lists equal PyTorch's on probe
sequences from the data (the recommend tasks' histories, and each user's history): the scores
agree to about 1e-5, so a near-tie could in principle order otherwise, and a graph that would
recommend differently on any probe is not used. `$PERSONALWAB_RECOMMENDER_BACKEND=torch` keeps
PyTorch. Nothing here imports torch: the export takes the PyTorch recommender it checks against.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from PersonalWAB.digests import digest_problem, file_sha256, record_digest
from PersonalWAB.engines.recommender.engine import SequenceRecommender
from PersonalWAB.scratch import atomic_write_text

BACKEND_ENV = "PERSONALWAB_RECOMMENDER_BACKEND"
BACKENDS = ("onnx", "torch")
PROBES = 2000  # probe sequences an export is checked on
CHECK_K = 10  # the list length the environment's recommender returns


def backend() -> str:
    """`$PERSONALWAB_RECOMMENDER_BACKEND` (onnx or torch), else onnx where ONNX Runtime is installed."""
    import importlib.util

    chosen = os.environ.get(BACKEND_ENV, "").strip()
    if chosen and chosen not in BACKENDS:
        raise ValueError(f"${BACKEND_ENV}={chosen}: expected one of {', '.join(BACKENDS)}")
    return chosen or ("onnx" if importlib.util.find_spec("onnxruntime") is not None else "torch")


def graph_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".onnx")


def _record_path(graph: Path) -> Path:
    return graph.with_name(graph.name + ".json")


def usable_graph(checkpoint: Path) -> tuple[Path, int] | None:
    """(the exported graph, its sequence length) when one of this very checkpoint is there whole."""
    graph = graph_path(checkpoint)
    if not checkpoint.is_file() or not graph.is_file():
        return None
    problem = digest_problem(graph)
    if problem:  # same-size damage would load and score otherwise
        print(f"warning: {graph}: {problem}; the PyTorch recommender answers (the next build exports it again)",
              file=sys.stderr)
        return None
    try:
        record = json.loads(_record_path(graph).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("checkpoint_sha256") != file_sha256(checkpoint):
        return None
    return graph, int(record["maxlen"])


def _session(graph: Path) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # calls from several worker threads run at once, one core each
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


class OnnxSASRec(SequenceRecommender):
    """The SASRec recommender over an exported graph, answering as the PyTorch one does."""

    def __init__(self, graph: Path, item_map: Mapping[str, int], maxlen: int):
        self._session = _session(graph)
        self._bind_items(item_map)
        self._maxlen = maxlen

    @property
    def maxlen(self) -> int:
        return self._maxlen

    def _top_columns(self, rows: list[list[int]], k: int) -> list[list[int]]:
        scores = self._session.run(None, {"sequences": self._padded(rows)})[0]
        return [stable_top_k(row, k) for row in scores]


def stable_top_k(scores: np.ndarray, k: int) -> list[int]:
    """The first `k` columns of a stable descending sort of `scores` (ties: the lower column
    first), without sorting the whole row: the columns scoring at least the k-th best score are
    found in linear time and only they are sorted (a full sort was a tenth of a run's time)."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")[:k].tolist()
    kth_best = np.partition(scores, len(scores) - k)[len(scores) - k]
    candidates = np.flatnonzero(scores >= kth_best)
    ordered: list[int] = candidates[np.argsort(-scores[candidates], kind="stable")][:k].tolist()
    return ordered


def probe_sequences(data: Any, limit: int = PROBES) -> list[list[str]]:
    """What a recommender is asked in runs: each recommend task's earlier purchases, then each
    user's whole history (deterministic order), up to `limit` sequences."""
    probes = [[b["product_info"]["parent_asin"] for b in data.behaviours_before(task["user_id"], task["timestamp"])]
              for split in sorted(data.tasks) for task in data.split(split) if task["type"] == "recommend"]
    probes += [[b["product_info"]["parent_asin"] for b in data.histories[user]] for user in sorted(data.histories)]
    return [sequence for sequence in probes if sequence][:limit]


def export_checked(recommender: Any, checkpoint: Path, item_map: Mapping[str, int], probes: list[list[str]],
                   log: Any = None) -> OnnxSASRec | None:
    """Export the PyTorch `recommender` of `checkpoint` to `<checkpoint>.onnx` and keep it when its
    top-k lists equal PyTorch's on every probe sequence; the ONNX recommender, or None."""
    import torch

    say = log or (lambda line: print(line, file=sys.stderr))
    graph = graph_path(checkpoint)

    class Scores(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = recommender._model
            self.register_buffer("candidates", recommender._candidate_ids)

        def forward(self, sequences: Any) -> Any:
            return self.model.predict(None, sequences, self.candidates)

    with tempfile.TemporaryDirectory(dir=graph.parent) as tmp:
        candidate = Path(tmp) / graph.name
        example = torch.zeros((1, recommender.maxlen), dtype=torch.int64)
        try:
            torch.onnx.export(Scores().eval(), (example,), str(candidate), input_names=["sequences"],
                              output_names=["scores"], dynamic_axes={"sequences": {0: "rows"}, "scores": {0: "rows"}},
                              opset_version=17, dynamo=False)
            exported = OnnxSASRec(candidate, item_map, recommender.maxlen)
        except Exception as exc:  # an exporter or runtime that cannot take this model: PyTorch stays
            say(f"note: SASRec stays on PyTorch ({type(exc).__name__}: {str(exc)[:200]})")
            return None
        if exported.recommend_batch(probes, CHECK_K) != recommender.recommend_batch(probes, CHECK_K):
            say(f"note: SASRec stays on PyTorch: its ONNX export orders some of {len(probes)} probe sequences' "
                f"top-{CHECK_K} otherwise")
            return None
        content = candidate.read_bytes()
        os.replace(candidate, graph)
    record_digest(graph, content)
    atomic_write_text(_record_path(graph), json.dumps({
        "checkpoint_sha256": file_sha256(checkpoint), "maxlen": recommender.maxlen,
        "checked": f"top-{CHECK_K} equal to PyTorch's on {len(probes)} probe sequences"}))
    return OnnxSASRec(graph, item_map, recommender.maxlen)
