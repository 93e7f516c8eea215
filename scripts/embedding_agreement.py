"""How far a faster embedding precision moves the `relevant` memory and the scores, on real texts.

    python scripts/embedding_agreement.py --data_dir data/synthetic/full --out data/agreement_full.json

Builds (or loads) the data folder's memory caches at fp32 and at `--precision` (timing each
build it makes, with the load average), then:

- for every task of both splits, whether the `--memory_length` behaviours `relevant` memory
  picks are the same list (same behaviours, same order) and the same set at both precisions;
- the offline agent with `relevant` memory over the test split at each precision: Result Acc
  with its 95% bootstrap interval over tasks, and the paired interval of the difference.

`--end_index N` compares the first N test tasks only, encoding just their users' texts at each
precision (timed) instead of building the whole caches (`full`'s fp32 cache is ~15-45 min of
both cores).

Prints a Markdown table (what docs/performance.md shows) and saves the figures as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.engines.text_embedding import EXACT, PRECISIONS  # noqa: E402
from PersonalWAB.outputs import FILE, parse_command, write_output  # noqa: E402
from PersonalWAB.settings import setting  # noqa: E402


@dataclass
class AgreementSettings:
    """What `scripts/embedding_agreement.py` compares, and where the figures go."""

    data_dir: str = setting("data/synthetic/full", "data folder whose memory texts are embedded")
    precision: str = setting("bf16", "the precision compared with fp32", choices=[p for p in PRECISIONS if p != EXACT])
    memory_length: int = setting(10, "behaviours in the memory compared (the release's 10)")
    end_index: int = setting(-1, "compare the first N test tasks only (their users' texts are encoded, not the "
                                 "whole caches); -1: every task of both splits")
    search_backend: str = setting("lucene", "search engine of the two runs")
    max_concurrency: int = setting(2, "tasks run at once in the two runs")
    out: str | None = setting(None, "JSON file for the figures", default_text="data/agreement_<data folder>.json")


def default_out(settings: AgreementSettings) -> None:
    """`--out` by default: named after the data folder, so it is claimed before any work."""
    settings.out = settings.out or f"data/agreement_{Path(settings.data_dir).name}.json"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def compared_tasks(data: Any, end_index: int) -> dict[str, list[Any]]:
    """The tasks compared, per split."""
    if end_index < 0:
        return {split: data.tasks.get(split, []) for split in ("train", "test")}
    return {"test": data.tasks["test"][:end_index]}


def encode(data: Any, protocol: Any, precision: str, tasks: dict[str, list[Any]], whole: bool) -> dict[str, Any]:
    """The memory vectors at `precision`: the whole caches, built when missing, or the tasks'
    users' texts; seconds, texts encoded and the load average around it when it encoded any."""
    from PersonalWAB.memory.embeddings import shared_behaviour_embeddings

    embeddings = shared_behaviour_embeddings(data, protocol, precision=precision)
    before = load_average()
    start = time.perf_counter()
    if whole:
        encoded = bool(embeddings.ensure(log=print))  # the caches it built
    else:
        chosen = [task for split in tasks.values() for task in split]
        encoded = embeddings.prepare_users({t["user_id"] for t in chosen}, [t["task"] for t in chosen], log=print) > 0
    seconds = time.perf_counter() - start
    return {"what": "the whole caches" if whole else "the tasks' users' texts", "encoded_now": encoded,
            "seconds": round(seconds, 1) if encoded else None,
            "load_average_before_after": [before, load_average()] if encoded else None}


def memory_identity(data: Any, protocol: Any, precision: str, length: int,
                    tasks_of: dict[str, list[Any]]) -> dict[str, Any]:
    """Per split: tasks whose top-`length` relevant memory is the same list, and the same set."""
    import numpy as np

    from PersonalWAB.memory.base import past_behaviours
    from PersonalWAB.memory.embeddings import shared_behaviour_embeddings

    exact = shared_behaviour_embeddings(data, protocol, precision=EXACT)
    fast = shared_behaviour_embeddings(data, protocol, precision=precision)
    figures: dict[str, Any] = {}
    differences, gaps = [], []
    for split, tasks in tasks_of.items():
        same_list = same_set = 0
        for task in tasks:
            count = len(past_behaviours(data, task))
            if count == 0:
                same_list, same_set = same_list + 1, same_set + 1
                continue
            scores = [e.scores(task["user_id"], task["task"], count) for e in (exact, fast)]
            ranked = [np.argsort(-s, kind="stable")[:length] for s in scores]
            same_list += bool(np.array_equal(*ranked))
            same_set += set(ranked[0].tolist()) == set(ranked[1].tolist())
            differences.append(float(np.abs(scores[0] - scores[1]).max()))
            top = np.sort(scores[0])[::-1][:length + 1]
            gaps.append(float(np.diff(-top).min()) if len(top) > 1 else 1.0)
        figures[split] = {"tasks": len(tasks), "same_list": same_list, "same_set": same_set,
                          "same_list_share": round(same_list / max(1, len(tasks)), 4)}
    # why lists differ: how close a task's neighbouring fp32 scores are, against how far the
    # precisions' scores are apart
    figures["score_difference"] = {"median": float(np.median(differences)), "max": float(np.max(differences))}
    figures["tasks_whose_closest_top_scores_are_apart_by_more_than"] = {
        f"{gap:.0e}": round(float(np.mean(np.array(gaps) > gap)), 4) for gap in (1e-5, 1e-4, 1e-3)}
    return figures


def result_acc(settings: AgreementSettings, precision: str, out_dir: Path) -> tuple[dict[str, Any], list[float]]:
    """The offline agent with relevant memory over the test split: overall Result Acc, its
    interval, and each task's best Result Acc (in task order)."""
    from PersonalWAB.metrics import bootstrap_interval, task_score
    from PersonalWAB.results import load_result_file
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    config = RunConfig(data_dir=settings.data_dir, agent_memory="relevant", memory_length=settings.memory_length,
                       embedding_precision=precision, search_backend=settings.search_backend,
                       end_index=settings.end_index,
                       max_concurrency=settings.max_concurrency, out=str(out_dir / f"relevant_{precision}.json"),
                       quiet=True)
    header, path, _ = run(config, log=lambda _: None)
    _, records = load_result_file(path)
    records.sort(key=lambda record: record["task_id"])
    scores = [task_score(r["action_acc"], r["res_acc"])[1] for r in records]
    low, high = bootstrap_interval(scores)
    overall = header["results"]["overall"]
    return {"tasks": len(scores), "result_acc": round(overall["avg_res_acc"], 4),
            "interval_95": [round(low, 4), round(high, 4)]}, scores


def markdown(figures: dict[str, Any]) -> str:
    """The agreement table of docs/performance.md."""
    precision, length = figures["precision"], figures["memory_length"]
    identity = figures["memory_identity"]
    exact, fast = figures["runs"][EXACT], figures["runs"][precision]
    low, high = figures["runs"]["difference_interval_95"]
    lines = [f"| data | top-{length} memory: same list / same set ({figures['tasks_compared']}) | Result Acc {EXACT} "
             f"[95% interval] | Result Acc {precision} [95% interval] | difference [95% paired interval] |",
             "|---|---|---|---|---|"]
    splits = [identity[split] for split in ("train", "test") if split in identity]
    tasks = sum(split["tasks"] for split in splits)
    same_list = sum(split["same_list"] for split in splits)
    same_set = sum(split["same_set"] for split in splits)
    lines.append(f"| {Path(figures['data_dir']).name} | {same_list}/{tasks} ({100 * same_list / tasks:.1f}%) / "
                 f"{same_set}/{tasks} ({100 * same_set / tasks:.1f}%) | {exact['result_acc']:.3f} "
                 f"[{exact['interval_95'][0]:.3f}, {exact['interval_95'][1]:.3f}] | {fast['result_acc']:.3f} "
                 f"[{fast['interval_95'][0]:.3f}, {fast['interval_95'][1]:.3f}] | "
                 f"{fast['result_acc'] - exact['result_acc']:+.4f} [{low:+.4f}, {high:+.4f}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    [settings] = parse_command([AgreementSettings], argv, {"out": FILE}, fill=default_out,
                               prog="scripts/embedding_agreement.py", description=__doc__)
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.metrics import paired_bootstrap_interval
    from PersonalWAB.protocol import load_protocol

    data = load_benchmark_data(settings.data_dir)
    protocol = load_protocol()
    build_artifacts(data, (settings.search_backend,), recommender=True, review_embeddings=True)
    tasks = compared_tasks(data, settings.end_index)
    whole = settings.end_index < 0
    figures: dict[str, Any] = {
        "data_dir": str(data.data_dir), "precision": settings.precision, "memory_length": settings.memory_length,
        "cpus": os.cpu_count(),
        "tasks_compared": "train + test tasks" if whole else f"the first {settings.end_index} test tasks",
        "encodings": {p: encode(data, protocol, p, tasks, whole) for p in (EXACT, settings.precision)}}
    figures["memory_identity"] = memory_identity(data, protocol, settings.precision, settings.memory_length, tasks)
    with tempfile.TemporaryDirectory() as tmp:
        exact, exact_scores = result_acc(settings, EXACT, Path(tmp))
        fast, fast_scores = result_acc(settings, settings.precision, Path(tmp))
    low, high = paired_bootstrap_interval(exact_scores, fast_scores)
    figures["runs"] = {EXACT: exact, settings.precision: fast,
                       "difference_interval_95": [round(low, 4), round(high, 4)],
                       "within_exact_interval":
                           exact["interval_95"][0] <= fast["result_acc"] <= exact["interval_95"][1]}
    figures["load_average_at_end"] = load_average()
    out = Path(str(settings.out))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_output(out, json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    print(markdown(figures))
    print(f"saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
