"""Train SASRec on a data directory's user histories and measure it.

This gives every data directory (synthetic data in particular, which has no
official checkpoint) a working recommender for `get_recommendations_by_history`.

Sequences are each user's "history" and "train" behaviours in time order; the
"test" behaviours are never seen because they are the benchmark's test targets.
The split is the SASRec paper's leave-one-out: the last item of each sequence is
the test item, the one before it the validation item, the rest is trained on.
Validation picks the epoch (early stopping), so one default works both on data
where the model keeps improving for hundreds of epochs and on sparse data where
it starts memorising after a few dozen. The test item is ranked against the
whole item map after training, next to a most-popular baseline, so the
recommender's quality is stated rather than assumed.

    python -m PersonalWAB.engines.recommender.train --data_dir DIR [--out FILE --epochs N --seed S ...]
"""

from __future__ import annotations

import io
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from PersonalWAB.data.loader import BenchmarkData, load_benchmark_data
from PersonalWAB.engines.recommender.engine import SASRecRecommender, load_item_map, provenance
from PersonalWAB.engines.recommender.sasrec import SASRec, SASRecConfig
from PersonalWAB.errors import DataError
from PersonalWAB.paths import ArtifactPaths
from PersonalWAB.progress import progress_bar
from PersonalWAB.scratch import atomic_write_bytes, atomic_write_text
from PersonalWAB.outputs import FILE, parse_command
from PersonalWAB.settings import resolved, setting

TRAINING_SPLITS = ("history", "train")
TOP_K = 10
PROTOCOL = (
    "SASRec-paper leave-one-out over each user's history+train behaviours (time order; test "
    "behaviours unused): the last item is the test item, the one before it the validation item "
    "(used only to pick the epoch), the rest is trained on; the test item is ranked, given all "
    "preceding items (last 30 kept), against every item in the item map, excluding nothing (not "
    "even items already in the sequence); HR@10 = share of users whose item is in the top 10, "
    "NDCG@10 = mean over users of 1/log2(rank+1) (rank 1 = best), 0 outside the top 10; users "
    "with fewer than 2 items are skipped; "
    "popularity ranks items by how often they occur in the test inputs"
)


@dataclass(frozen=True)
class SASRecTrainConfig:
    """Training settings.

    The network shape and dropout are the release's (hidden 50, 2 blocks, 2 heads,
    dropout 0.5, maxlen 30). `epochs` is an upper bound: every `eval_every` epochs
    the validation NDCG@10 is measured, training stops after `patience` checks
    without improvement (0: never stop early) and the best-validated weights are
    kept. Checks count towards the patience only after `min_epochs`: on data where
    items recur the validation score sits at the popularity level (with noise that
    can beat it by chance) for the first 100–200 epochs
    before climbing for hundreds more, while on very sparse data it peaks within a
    few dozen epochs and then falls as the model memorises; a fixed epoch count
    suits only one of the two. Lower dropout (0.2) was no better on either.
    """

    epochs: int = setting(400, "most epochs to train (early stopping usually ends sooner)")
    batch_size: int = setting(128, "sequences per optimiser step")
    lr: float = setting(1e-3, "Adam learning rate")
    l2_emb: float = setting(0.0, "L2 penalty on the item embeddings; raise it when the model memorises sparse data")
    maxlen: int = setting(30, "most recent items of a sequence the model sees (the release's 30)")
    hidden_units: int = setting(50, "embedding and hidden size (the release's 50; a checkpoint of another size does "
                                    "not load into the engine's default shape)")
    num_blocks: int = setting(2, "self-attention blocks (the release's 2)")
    num_heads: int = setting(2, "attention heads per block (the release's 2)")
    dropout_rate: float = setting(0.5, "dropout in training (the release's 0.5)")
    eval_every: int = setting(5, "epochs between validation checks")
    patience: int = setting(20, "validation checks without improvement before stopping, counted after "
                                "--min_epochs; 0 never stops early")
    min_epochs: int = setting(200, "epochs always trained before early stopping may end training (the "
                                   "validation score can sit at the popularity level this long before it climbs)")
    seed: int = setting(42, "random seed of initialisation and batches; the same seed and threads give identical "
                            "weights")
    num_threads: int | None = setting(None, "torch threads; fix it for identical weights across machines",
                                      default_text="torch's default")

    def network(self) -> SASRecConfig:
        """The model shape these settings describe."""
        return SASRecConfig(
            hidden_units=self.hidden_units,
            num_blocks=self.num_blocks,
            num_heads=self.num_heads,
            dropout_rate=self.dropout_rate,
            maxlen=self.maxlen,
        )


def build_item_map(products: Mapping[str, Any]) -> dict[str, int]:
    """ASIN -> 1..N in sorted ASIN order, so the same catalogue always gets the same ids."""
    return {asin: item_id for item_id, asin in enumerate(sorted(products), start=1)}


def prepare_item_map(data: BenchmarkData, path: Path) -> dict[str, int]:
    """Reuse an existing item map (ids must stay stable across retraining), else build and write one."""
    if path.exists():
        return load_item_map(path)
    item_map = build_item_map(data.products)
    atomic_write_text(path, json.dumps(item_map))
    return item_map


def extend_ids(item_map: Mapping[str, int], extra_sequences: Sequence[Sequence[str]]) -> dict[str, int]:
    """Model ids of the item map plus, after its largest id, the other items of the extra
    sequences (sorted ASIN order). The item map itself stays the benchmark's catalogue, so
    the recommender still answers with benchmark products only."""
    ids = dict(item_map)
    next_id = max(item_map.values()) + 1
    for asin in sorted({asin for sequence in extra_sequences for asin in sequence} - ids.keys()):
        ids[asin] = next_id
        next_id += 1
    return ids


def user_sequences(data: BenchmarkData, item_map: Mapping[str, int]) -> list[list[str]]:
    """Known-item ASIN sequences (time order, test behaviours left out) of users with at least 2 items."""
    sequences = []
    for user_id in sorted(data.histories):
        asins = [
            behaviour["product_info"]["parent_asin"]
            for behaviour in data.histories[user_id]
            if behaviour["split"] in TRAINING_SPLITS
        ]
        known = [asin for asin in asins if asin in item_map]
        if len(known) >= 2:
            sequences.append(known)
    return sequences


@dataclass(frozen=True)
class HeldOut:
    """Next-item queries: the items before each held-out item, and the held-out item."""

    inputs: list[list[str]]
    targets: list[str]


@dataclass(frozen=True)
class Split:
    """Training sequences and the two held-out query sets of one data directory."""

    train: list[list[str]]
    validation: HeldOut
    test: HeldOut


def split_sequences(sequences: list[list[str]]) -> Split:
    """Last item -> test, second to last -> validation (when there is one), the rest -> training."""
    with_validation = [s for s in sequences if len(s) >= 3]
    return Split(
        train=[s[:-2] for s in sequences],
        validation=HeldOut([s[:-2] for s in with_validation], [s[-2] for s in with_validation]),
        test=HeldOut([s[:-1] for s in sequences], [s[-1] for s in sequences]),
    )


def training_arrays(sequences: list[list[int]], maxlen: int) -> tuple[np.ndarray, np.ndarray]:
    """Left-padded (inputs, next items) of each sequence's last `maxlen` steps (sequences of 2+ items)."""
    inputs = np.zeros((len(sequences), maxlen), dtype=np.int64)
    targets = np.zeros((len(sequences), maxlen), dtype=np.int64)
    for r, ids in enumerate(sequences):
        steps = min(len(ids) - 1, maxlen)
        inputs[r, maxlen - steps :] = ids[-steps - 1 : -1]
        targets[r, maxlen - steps :] = ids[-steps:]
    return inputs, targets


class NegativeSampler:
    """Draws, for every target position, an item absent from that row's sequence (the paper's negatives)."""

    def __init__(self, sequences: list[list[int]], item_num: int) -> None:
        if any(len(set(ids)) >= item_num for ids in sequences):
            raise DataError("a user's sequence holds every catalogue item; no negative item can be sampled")
        self._item_num = item_num
        self._stride = item_num + 1
        self._owned = np.unique([r * self._stride + i for r, ids in enumerate(sequences) for i in ids])

    def sample(self, targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Negatives shaped like `targets`, 0 where the target is padding."""
        real = targets != 0
        rows = np.arange(len(targets))[:, None]
        negatives = rng.integers(1, self._item_num + 1, size=targets.shape)
        clash = np.isin(rows * self._stride + negatives, self._owned) & real
        while clash.any():
            negatives[clash] = rng.integers(1, self._item_num + 1, size=int(clash.sum()))
            clash = np.isin(rows * self._stride + negatives, self._owned) & real
        return np.where(real, negatives, 0)


def initialise(model: SASRec) -> None:
    """Xavier-normal weight matrices, zero padding rows: the usual SASRec starting point."""
    for parameter in model.parameters():
        if parameter.dim() > 1:
            torch.nn.init.xavier_normal_(parameter)
    with torch.no_grad():
        model.item_emb.weight[0].zero_()
        model.pos_emb.weight[0].zero_()


def train_epoch(
    model: SASRec,
    optimizer: torch.optim.Optimizer,
    arrays: tuple[np.ndarray, np.ndarray],
    sampler: NegativeSampler,
    rng: np.random.Generator,
    config: SASRecTrainConfig,
) -> float:
    """One shuffled pass; returns the mean loss. Binary cross-entropy: true next item vs one negative."""
    inputs, targets = arrays
    model.train()
    negatives = sampler.sample(targets, rng)
    order = rng.permutation(len(inputs))
    losses = []
    for start in range(0, len(order), config.batch_size):
        batch = order[start : start + config.batch_size]
        seq, pos, neg = (torch.from_numpy(array[batch]) for array in (inputs, targets, negatives))
        pos_logits, neg_logits = model(None, seq, pos, neg)
        real = pos != 0
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            pos_logits[real], torch.ones_like(pos_logits[real])
        ) + torch.nn.functional.binary_cross_entropy_with_logits(neg_logits[real], torch.zeros_like(neg_logits[real]))
        if config.l2_emb:
            loss = loss + config.l2_emb * model.item_emb.weight.pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return float(np.mean(losses))


def ranking_metrics(ranked: list[list[str]], targets: list[str]) -> dict[str, float]:
    """HR@k and NDCG@k of one target per ranked list."""
    hits = ndcg = 0.0
    for recommendations, target in zip(ranked, targets):
        if target in recommendations:
            hits += 1
            ndcg += 1 / math.log2(recommendations.index(target) + 2)
    count = max(len(targets), 1)
    return {f"hr@{TOP_K}": hits / count, f"ndcg@{TOP_K}": ndcg / count}


def model_metrics(model: SASRec, item_map: Mapping[str, int], held_out: HeldOut) -> dict[str, float]:
    """Metrics of the model through the same recommender the benchmark queries."""
    ranked = SASRecRecommender.from_model(model, item_map).recommend_batch(held_out.inputs, k=TOP_K)
    return ranking_metrics(ranked, held_out.targets)


def popularity_metrics(item_map: Mapping[str, int], held_out: HeldOut) -> dict[str, float]:
    """The baseline: everyone gets the most frequent input items (ties to the lower item id)."""
    counts = Counter(asin for sequence in held_out.inputs for asin in sequence)
    popular = sorted(counts, key=lambda asin: (-counts[asin], item_map[asin]))[:TOP_K]
    return ranking_metrics([popular] * len(held_out.targets), held_out.targets)


def popularity_warning(sasrec: Mapping[str, float], popularity: Mapping[str, float]) -> str | None:
    """Why the trained model is no better than recommending the most popular items, or None
    when it beats them on held-out HR@10. A recommender that does not beat popularity makes
    every agent's recommendation score say little about its use of history."""
    key = f"hr@{TOP_K}"
    if sasrec[key] > popularity[key]:
        return None
    return (f"the trained SASRec does not beat popularity on held-out data (HR@{TOP_K} {sasrec[key]:.4f} vs "
            f"{popularity[key]:.4f}): recommendation scores on this data will carry little signal")


def save_checkpoint(model: SASRec, checkpoint_path: Path, report: dict[str, Any], item_map_path: Path | None = None,
                    behaviours_fingerprint: str = "") -> None:
    """A plain state dict (the official layout) plus `<checkpoint>.json` saying how it was made and,
    given the item map and the products and histories it was trained on, their digests
    (`engine.provenance`), so it is never used with others."""
    # Saved into memory: torch names the archive's root folder after a file it writes, which
    # for a scratch name (it holds the pid) would make equal models' files differ.
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    atomic_write_bytes(checkpoint_path, buffer.getvalue())
    if item_map_path is not None:
        report = {**report, **provenance(checkpoint_path, item_map_path, behaviours_fingerprint)}
    atomic_write_text(checkpoint_path.with_name(checkpoint_path.name + ".json"), json.dumps(report, indent=2))


@dataclass
class _Progress:
    """Best validation result so far and how many checks have passed without beating it."""

    score: float = -1.0
    epoch: int = 0
    state: dict[str, torch.Tensor] | None = None
    stale: int = 0


def _fit(
    model: SASRec,
    item_map: Mapping[str, int],
    split: Split,
    config: SASRecTrainConfig,
    log: Callable[[str], None] | None,
    ids: Mapping[str, int],
    extra_train: list[list[str]],
) -> tuple[int, int, float]:
    """Train with early stopping; leaves the best-validated weights in `model`.

    `ids` covers every item (`extend_ids`); `extra_train` are extra users' sequences,
    trained on in full. Returns (epoch kept, epochs run, validation NDCG@10 of the kept
    weights).
    """
    train_ids = [[ids[a] for a in s] for s in [*split.train, *extra_train] if len(s) >= 2]
    sampler = NegativeSampler(train_ids, model.item_num)
    arrays = training_arrays(train_ids, config.maxlen)
    rng = np.random.default_rng(config.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=(0.9, 0.98))
    best = _Progress()
    epoch = 0
    # the bar's total is the epoch cap; early stopping usually ends it sooner
    bar = progress_bar(total=config.epochs, desc="SASRec training", unit="epoch", leave=False)
    with bar:
        while epoch < config.epochs and not (config.patience and best.stale >= config.patience):
            epoch += 1
            loss = train_epoch(model, optimizer, arrays, sampler, rng, config) if train_ids else 0.0
            bar.update(1)
            bar.set_postfix_str(f"loss {loss:.4f}, best validation NDCG@{TOP_K} {max(best.score, 0.0):.4f} "
                                f"(epoch {best.epoch})", refresh=False)
            if epoch % config.eval_every and epoch != config.epochs:
                continue
            score = (model_metrics(model, item_map, split.validation)[f"ndcg@{TOP_K}"]
                     if split.validation.targets else 0.0)
            if log:
                with tqdm.external_write_mode(file=sys.stderr):
                    log(f"epoch {epoch}: loss {loss:.4f}, validation NDCG@{TOP_K} {score:.4f}")
            if score > best.score:
                best = _Progress(score, epoch, {k: v.clone() for k, v in model.state_dict().items()})
            elif epoch > config.min_epochs:
                best.stale += 1
    if best.state is not None:  # the first check always sets it (scores are >= 0)
        model.load_state_dict(best.state)
    return best.epoch, epoch, best.score


def train_sasrec(
    data: BenchmarkData,
    checkpoint_path: Path | str,
    item_map_path: Path | str,
    config: SASRecTrainConfig = SASRecTrainConfig(),
    log: Callable[[str], None] | None = None,
    extra_sequences: Sequence[Sequence[str]] = (),
) -> dict[str, Any]:
    """Train, evaluate and save; returns the report also written to `<checkpoint>.json`.
    A model that does not beat popularity on held-out HR@10 is warned about on stderr and
    in the report's `warning` (None otherwise).

    `extra_sequences` are ASIN sequences (time order) of users outside the benchmark:
    trained on in full, never evaluated. Their items outside the catalogue get model ids
    after the item map's (the release trained its recommender on more users than the
    benchmark's so fewer benchmark items start cold; its item map lists the benchmark's
    items inside a larger id space, as this one does).

    Deterministic for a seed and thread count. The caller's torch random state and
    thread count are restored afterwards, so training inside a larger program
    leaves no trace on it.
    """
    if config.epochs < 1 or config.eval_every < 1:
        raise ValueError(f"epochs and eval_every must be at least 1, got {config.epochs} and {config.eval_every}")
    if config.min_epochs < 0 or config.patience < 0:
        raise ValueError(f"min_epochs and patience must be 0 or more, got {config.min_epochs} and {config.patience}")
    checkpoint_path, item_map_path = Path(checkpoint_path), Path(item_map_path)
    item_map = prepare_item_map(data, item_map_path)
    sequences = user_sequences(data, item_map)
    if not sequences:
        raise DataError(f"{data.data_dir}: no user has two or more history/train behaviours to learn from")
    split = split_sequences(sequences)
    extra_train = [list(sequence) for sequence in extra_sequences if len(sequence) >= 2]
    ids = extend_ids(item_map, extra_train)
    threads = torch.get_num_threads()
    started = time.perf_counter()
    try:
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        with torch.random.fork_rng():
            torch.manual_seed(config.seed)
            model = SASRec(len(data.histories) + len(extra_train), max(ids.values()), config.network())
            initialise(model)
            kept, run, validation_ndcg = _fit(model, item_map, split, config, log, ids, extra_train)
            test = model_metrics(model, item_map, split.test)
    finally:
        torch.set_num_threads(threads)
    popularity = popularity_metrics(item_map, split.test)
    warning = popularity_warning(test, popularity)
    report = {
        "data_source": data.source,
        "protocol": PROTOCOL,
        "users_evaluated": len(split.test.targets),
        "candidates": len(set(item_map.values())),
        "sasrec": test,
        "popularity": popularity,
        "warning": warning,
        f"validation_ndcg@{TOP_K}": validation_ndcg,
        "epochs": kept,
        "epochs_run": run,
        "train_seconds": round(time.perf_counter() - started, 2),
        "user_num": model.user_num,
        "item_num": model.item_num,
        "extra_users": len(extra_train),
        "extra_items": len(ids) - len(item_map),
        "config": resolved(config),
        "checkpoint": str(checkpoint_path),
        "item_map": str(item_map_path),
    }
    save_checkpoint(model, checkpoint_path, report, item_map_path, data.behaviours_fingerprint)
    if warning:
        print(f"warning: {checkpoint_path}: {warning}", file=sys.stderr, flush=True)
    return report


def is_checkpoint(path: Path) -> bool:
    """Whether `path` is a checkpoint this command trained (its report beside it names it)."""
    try:
        report = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and Path(str(report.get("checkpoint"))).name == path.name


@dataclass
class TrainPaths:
    """Where `python -m PersonalWAB.engines.recommender.train` reads and writes."""

    data_dir: str = setting(str, "benchmark data folder whose histories to train on", required=True, metavar="DIR")
    out: str | None = setting(None, "checkpoint (state dict) to write; its report is written beside it (.json)",
                              metavar="FILE", aliases=("checkpoint",),
                              default_text="the data folder's artefact path, where runs look for it")
    item_map: str | None = setting(None, "item map to use, or to write when missing", metavar="FILE",
                                   default_text="the data folder's artefact path")


def main(argv: list[str] | None = None) -> int:
    args, config = parse_command([TrainPaths, SASRecTrainConfig], argv, {"out": FILE}, own=lambda _: is_checkpoint,
                                 writes=("item_map",), prog="python -m PersonalWAB.engines.recommender.train",
                                 description=__doc__.split("\n\n")[0])
    artifacts = ArtifactPaths.for_data_dir(args.data_dir)
    try:
        data = load_benchmark_data(args.data_dir)
        report = train_sasrec(
            data,
            args.out or artifacts.checkpoint,
            args.item_map or artifacts.item_map,
            config,
            log=lambda line: print(line, flush=True),
        )
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"data: {report['data_source']}")
    print(f"users evaluated: {report['users_evaluated']}, candidates: {report['candidates']}")
    for name in ("sasrec", "popularity"):
        scores = report[name]
        print(f"{name:>10}: HR@{TOP_K} {scores[f'hr@{TOP_K}']:.4f}  NDCG@{TOP_K} {scores[f'ndcg@{TOP_K}']:.4f}")
    print(f"kept epoch {report['epochs']} of {report['epochs_run']} run, {report['train_seconds']:.1f} s")
    print(f"checkpoint: {report['checkpoint']} (report beside it: {report['checkpoint']}.json)")
    return 0


if __name__ == "__main__":
    from PersonalWAB.cli import run_command

    sys.exit(run_command(main))
