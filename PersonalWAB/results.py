"""Result files in the leaderboard format: statistics, checkpointing and resume.

A finished file is a JSON list whose first element is the header
(`run_args`, `total cost` (the agent's, as in the release), per-type `results`, and
`total user cost`) followed by one record per task run. While a run is going the same path holds the records alone (no header),
rewritten atomically, so a killed run leaves a readable file to resume from.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.errors import DataError

HEADER_KEYS = ("run_args", "total cost", "results")
RECORD_KEYS = ("task_id", "action_acc", "res_acc", "info", "traj", "trial")


def task_score(action_acc: list[float], res_acc: list[float]) -> tuple[float, float]:
    """Best attempt among those that called the right function; none -> (0, 0)."""
    valid = [res for act, res in zip(action_acc, res_acc) if act == 1]
    return (1.0, max(valid)) if valid else (0.0, 0.0)


def record_steps(record: dict[str, Any]) -> int:
    """Agent model calls of a task run (one usage entry per call)."""
    return len(record["info"]["usage"]["completion_tokens"])


def record_cost(record: dict[str, Any]) -> float:
    """The agent's cost of a task run (the header's `total cost`, as in the release)."""
    return float(record["info"]["usage"].get("total_price", 0.0))


def record_user_cost(record: dict[str, Any]) -> float:
    """The simulated user's cost of a task run (the header's `total user cost`)."""
    return float(record["info"].get("user_cost") or 0.0)


def compute_statistics(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per task type and overall: count, Avg Steps, Function Acc, Result Acc."""
    groups: dict[str, list[dict[str, Any]]] = {kind: [] for kind in TASK_TYPES}
    for record in records:
        groups.setdefault(record["info"]["task"]["type"], []).append(record)
    groups["overall"] = list(records)
    stats: dict[str, dict[str, float]] = {}
    for name, members in groups.items():
        scores = [task_score(r["action_acc"], r["res_acc"]) for r in members]
        count = len(members)
        stats[name] = {
            "total_count": count,
            "avg_interaction_times": sum(record_steps(r) for r in members) / count if count else 0.0,
            "avg_action_acc": sum(s[0] for s in scores) / count if count else 0.0,
            "avg_res_acc": sum(s[1] for s in scores) / count if count else 0.0,
        }
    return stats


def build_header(run_args: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "run_args": run_args,
        "total cost": sum(record_cost(r) for r in records),
        "results": compute_statistics(records),
        "total user cost": sum(record_user_cost(r) for r in records),
    }


def _check_record(record: Any, path: Path, index: int) -> None:
    if not isinstance(record, dict):
        raise DataError(f"{path}: element {index} is not a task record (expected an object)")
    for key in RECORD_KEYS:
        if key not in record:
            raise DataError(f"{path}: element {index} (task {record.get('task_id')!r}): missing key {key!r}")
    info = record["info"]
    if not isinstance(info, dict) or "task" not in info or "usage" not in info:
        raise DataError(f"{path}: element {index} (task {record['task_id']!r}): info lacks 'task' or 'usage'")


def load_result_file(path: Path | str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Header (None for an interrupted run) and task records of a result file."""
    path = Path(path)
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: result file not found") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON, possibly truncated ({exc})") from None
    if not isinstance(content, list):
        raise DataError(f"{path}: a result file is a JSON list, got {type(content).__name__}")
    header = None
    if content and isinstance(content[0], dict) and "run_args" in content[0]:
        header, content = content[0], content[1:]
        for key in HEADER_KEYS:
            if key not in header:
                raise DataError(f"{path}: header lacks {key!r}")
    for index, record in enumerate(content, start=1 if header else 0):
        _check_record(record, path, index)
    return header, content


def json_text(content: Any) -> str:
    """JSON as UTF-8 can hold it: non-ASCII text kept as it is, unless some string has a lone
    surrogate (which UTF-8 cannot encode), then everything escaped, so no record is ever lost."""
    text = json.dumps(content, indent=2, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(content, indent=2)
    return text


def _atomic_write_json(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(json_text(content))
    os.replace(tmp, path)


class ResultWriter:
    """Collects task records from worker threads and checkpoints them to disk.

    Checkpoints are throttled (at most one rewrite per `flush_interval_s`) so a
    long run does not spend its time rewriting the file after every task.
    """

    def __init__(self, path: Path, run_args: dict[str, Any], records: list[dict[str, Any]] | None = None,
                 flush_interval_s: float = 1.0):
        self.path = Path(path)
        self.run_args = run_args
        self.records: list[dict[str, Any]] = list(records or [])
        self.flush_interval_s = flush_interval_s
        self._lock = threading.Lock()
        self._last_flush = 0.0

    def add(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.records.append(record)
            if time.monotonic() - self._last_flush >= self.flush_interval_s:
                self._flush_locked()

    def flush(self) -> None:
        """Checkpoint the records now (no header: the run is not finished)."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        _atomic_write_json(self.path, self.records)
        self._last_flush = time.monotonic()

    def finalize(self) -> dict[str, Any]:
        """Write header + records (sorted by trial, task id); return the header."""
        with self._lock:
            self.records.sort(key=lambda r: (r["trial"], r["task_id"]))
            header = build_header(self.run_args, self.records)
            _atomic_write_json(self.path, [header, *self.records])
            return header


def format_statistics_table(stats: dict[str, dict[str, float]], title: str = "") -> str:
    """The per-type table printed at the end of a run."""
    lines = [title] if title else []
    lines.append(f"{'type':<10} {'tasks':>6} {'Function Acc':>13} {'Result Acc':>11} {'Avg Steps':>10}")
    for name in (*TASK_TYPES, "overall"):
        row = stats.get(name)
        if row is None:
            continue
        lines.append(
            f"{name:<10} {row['total_count']:>6} {row['avg_action_acc']:>13.3f} "
            f"{row['avg_res_acc']:>11.3f} {row['avg_interaction_times']:>10.2f}"
        )
    return "\n".join(lines)
