"""Result files as a table of task runs, for one's own analysis: `pwab leaderboard export
FILE... --format csv|jsonl|parquet --out PATH`, or `load_dataframe(paths)` in a notebook; and one
run as a standard log (`--format inspect|eval_results`, `PersonalWAB.leaderboard.standard_logs`).

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
from PersonalWAB.failures import failure_label, react_prefix_of, recommendation_ranking
from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.leaderboard.summarize import csv_text
from PersonalWAB.metrics import has_format_error, record_cost, record_steps, record_user_cost, task_score
from PersonalWAB.leaderboard.validate import read_valid
from PersonalWAB.results import RunFile
from PersonalWAB.schema_types import Record, RunArgs
from PersonalWAB.outputs import FILE, parse_command, write_output
from PersonalWAB.settings import setting

FORMATS = ("csv", "jsonl", "parquet", "inspect", "eval_results")
ONE_FILE = ("inspect", "eval_results")  # formats of one run: one input file, written to --out
EXIT_OK, EXIT_USAGE = 0, 2


@dataclass
class ExportSettings:
    """`export`: one row per task run (task x trial) of result files, with every scored field."""

    files: list[str] = setting(list, "result files (run.py output)", positional=True, nargs="+", metavar="FILE")
    format: str = setting("csv", "table format, or a run's standard log: inspect (an Inspect log, .eval or .json by "
                                 "--out's suffix) or eval_results (Hugging Face .eval_results YAML)", choices=FORMATS)
    out: str | None = setting(None, "write the table to this file (required for parquet, inspect and eval_results)",
                              metavar="PATH", default_text="stdout")
    dataset_id: str | None = setting(None, "eval_results: the Hub benchmark dataset the scores are for", metavar="ID",
                                     default_text="required with --format eval_results")


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
        prefix = react_prefix_of(parsed.run_args)
        rows += [{**run, **record_columns(record), **derived_columns(record, prefix)} for record in parsed.records]
    return rows


def derived_columns(record: Record, prefix: str) -> dict[str, Any]:
    """What the rules read from the record's calls: its failure label (the record's own, else the rule's),
    and for a recommendation NDCG@10 and the reciprocal rank of the target (empty otherwise)."""
    ranking = recommendation_ranking(record, prefix)
    return {"failure": record["info"].get("failure") or failure_label(record, prefix),
            "ndcg_at_10": ranking["ndcg@10"] if ranking else None,
            "reciprocal_rank": ranking["rr"] if ranking else None}


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


def one_run_problem(args: ExportSettings) -> str | None:
    """Why a one-run format cannot be written as asked (None: it can)."""
    if len(args.files) != 1:
        return f"--format {args.format} writes the log of one run: give one result file (got {len(args.files)})"
    if not args.out:
        return f"--format {args.format} writes a file: give --out PATH"
    if args.format == "inspect" and Path(args.out).suffix not in (".eval", ".json"):
        return "--format inspect: --out must end in .eval (Inspect's log format) or .json"
    if args.format == "eval_results" and not args.dataset_id:
        return "--format eval_results: give --dataset_id, the Hub benchmark dataset the scores are for"
    return None


def write_one_run(args: ExportSettings) -> int:
    """The Inspect log or the .eval_results entries of the one file given."""
    from PersonalWAB.leaderboard.standard_logs import eval_results_yaml, inspect_log_bytes

    parsed = cast(RunFile, read_valid(args.files[0]).result)  # the one reader: an invalid file is refused
    out = Path(cast(str, args.out))
    write_output(out, inspect_log_bytes(parsed, out.suffix) if args.format == "inspect"
                 else eval_results_yaml(parsed, cast(str, args.dataset_id)))
    print(f"{args.files[0]}: {len(parsed.records)} record(s) written to {out} ({args.format})", file=sys.stderr)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = parse_command([ExportSettings], argv, {"out": FILE}, description="One row per task run (task x trial) of "
                         "result files, with every scored field; or one run's Inspect log or .eval_results.")[0]
    out = Path(args.out) if args.out else None
    problem = parquet_problem(out) if args.format == "parquet" else \
        one_run_problem(args) if args.format in ONE_FILE else None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.format in ONE_FILE:
        try:
            return write_one_run(args)
        except DataError as exc:
            print(f"error: {exc}", file=sys.stderr)
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
