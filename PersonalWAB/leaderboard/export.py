"""Result files as a table of task runs, for one's own analysis: `pwab leaderboard export
FILE... --format csv|jsonl|parquet --out PATH`, or `load_dataframe(paths)` in a notebook.

One row per record (task x trial) with every scored field the leaderboard computes from it
(Function Acc and Result Acc as the header scores them, solved, attempts, steps, costs, the
error that ended it) beside what names the run (file, whether the run finished, run name,
tags, agent, model, memory, track, data). Errored records are kept, with their error: filtering is the analyst's choice.
Lists (per-attempt scores, actions) are JSON text in CSV and native lists elsewhere.

pandas and pyarrow are imported only by the functions that need them; parquet needs pyarrow
and says so when it is missing.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from PersonalWAB.errors import DataError
from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.leaderboard.summarize import csv_text
from PersonalWAB.metrics import has_format_error, record_cost, record_steps, record_user_cost, task_score
from PersonalWAB.leaderboard.validate import read_valid
from PersonalWAB.results import RunFile
from PersonalWAB.schema_types import Record, RunArgs
from PersonalWAB.outputs import FILE, parse_command, write_output
from PersonalWAB.settings import setting

FORMATS = ("csv", "jsonl", "parquet")
EXIT_OK, EXIT_USAGE = 0, 2


@dataclass
class ExportSettings:
    """`export`: one row per task run (task x trial) of result files, with every scored field."""

    files: list[str] = setting(None, "result files (run.py output)", positional=True, nargs="+", metavar="FILE")
    format: str = setting("csv", "table format", choices=FORMATS)
    out: str | None = setting(None, "write the table to this file (required for parquet)", metavar="PATH",
                              default_text="stdout")


def run_columns(path: Path, run_args: RunArgs, finished: bool) -> dict[str, Any]:
    """What names the run a row belongs to, and whether the run finished (`run_finished` false: a
    checkpoint of a run that was interrupted, stopped at its budget or killed, or records without
    a header: its rows are not the whole run)."""
    max_steps = run_args.get("max_steps", -1)
    return {
        "file": str(path),
        "run_finished": finished,
        "run_name": str(run_args.get("run_name") or ""),
        "tags": ";".join(map(str, run_args.get("tag") or [])),
        "agent": run_args.get("agent_strategy", ""),
        "model": run_args.get("model") or "",
        "memory": run_args.get("agent_memory", ""),
        "track": "" if not run_args else "multi-turn" if isinstance(max_steps, int) and max_steps > 0
        else "single-turn",
        "data_source": run_args.get("data_source", ""),
        "task_split": run_args.get("task_split", ""),
    }


def record_columns(record: Record) -> dict[str, Any]:
    """Every scored field of one task run."""
    info = record["info"]
    task = info["task"]
    function_acc, result_acc = task_score(record["action_acc"], record["res_acc"])
    return {
        "task_id": record["task_id"], "trial": record["trial"], "type": task["type"], "user_id": task["user_id"],
        "target": task["target"], "instruction": task["task"],
        "function_acc": function_acc, "result_acc": result_acc, "solved": is_solved(record),
        "attempts": len(record["action_acc"]), "action_acc": list(record["action_acc"]),
        "res_acc": list(record["res_acc"]), "steps": record_steps(record),
        "actions": [a.get("name") for a in info.get("actions", []) if isinstance(a, dict)],
        "cost": record_cost(record), "user_cost": record_user_cost(record),
        "format_error": has_format_error(record), "error": info.get("error") or "",
    }


def export_rows(paths: list[Path | str]) -> list[dict[str, Any]]:
    """The rows of every file, in file then record order (DataError for a file that cannot be read or is
    invalid)."""
    rows = []
    for path in paths:
        parsed = cast(RunFile, read_valid(path).result)  # the one reader: an invalid file is refused
        run = run_columns(parsed.path, parsed.run_args, parsed.header is not None)
        rows += [{**run, **record_columns(record)} for record in parsed.records]
    return rows


def load_dataframe(paths: list[Path | str] | Path | str) -> Any:
    """The rows of result files as a pandas DataFrame (pandas imported here, not before)."""
    import pandas as pd  # type: ignore[import-untyped]

    return pd.DataFrame(export_rows([paths] if isinstance(paths, (str, Path)) else list(paths)))


def csv_table(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV: lists as JSON, text cells escaped against formula injection."""
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: json.dumps(value) if isinstance(value, list) else
                         csv_text(value) if isinstance(value, str) else value for key, value in row.items()})
    return buffer.getvalue()


def jsonl_table(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return bytes(buffer.getvalue().to_pybytes())


def parquet_problem(out: Path | None) -> str | None:
    """Why parquet cannot be written: no --out, or no pyarrow."""
    if out is None:
        return "--format parquet writes a file: give --out PATH"
    import importlib.util

    if importlib.util.find_spec("pyarrow") is None:
        return "--format parquet needs the pyarrow package: pip install pyarrow, or use --format csv or jsonl"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_command([ExportSettings], argv, {"out": FILE}, description="One row per task run (task x trial) of "
                         "result files, with every scored field.")[0]
    out = Path(args.out) if args.out else None
    problem = parquet_problem(out) if args.format == "parquet" else None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        rows = export_rows([*args.files])
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if out is None:
        sys.stdout.write(csv_table(rows) if args.format == "csv" else jsonl_table(rows))
        return EXIT_OK
    write_output(out, parquet_bytes(rows) if args.format == "parquet" else
                 csv_table(rows) if args.format == "csv" else jsonl_table(rows))
    print(f"{len(rows)} rows ({len(args.files)} file(s)) written to {out}", file=sys.stderr)
    return EXIT_OK
