"""`pwab leaderboard merge SHARD... --out FILE`: the result files of one run's shards (`pwab run
--shard I/N`) joined into the file the run would have written in one piece: the same records,
its header computed from them, `shard` None.

Shards are refused rather than joined when the result could be wrong: a file that is no shard
or not finished (a checkpoint: resume it first), an invalid file, shards of other settings,
data, protocol or split, two files of the same shard or of different N, tasks in two files,
an absent shard (its tasks named) or a shard file that lacks some of its tasks. Each refusal
is one line naming the files and the tasks (exit 2). Records of tasks that ended in an error
are kept, as the whole run keeps them; a resume of the merged file runs them again.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from PersonalWAB.errors import DataError
from PersonalWAB.metrics import is_errored
from PersonalWAB.results import RunFile, build_header, dumps_json, grader_mismatch
from PersonalWAB.schema_types import Header, Record, RunArgs
from PersonalWAB.outputs import FILE, claim_outputs, write_output
from PersonalWAB.settings import parse, setting
from PersonalWAB.shards import Shard, absent_parts, one_count, task_selection

EXIT_OK, EXIT_REFUSED = 0, 2
# run_args that say where and how a shard ran, not what it computed: they may differ between shards
WHERE_AND_HOW = ("shard", "shard_plan", "out", "log_dir", "resume_from", "overwrite", "resume_headerless", "verbose",
                 "quiet", "max_concurrency", "max_retries", "data_dir", "api_base", "user_api_base", "num_gpus",
                 "cost_note", "cache")
SHOWN = 8  # task ids named in one message


@dataclass
class MergeSettings:
    """`merge`: join the result files of one run's shards into the run's result file."""

    files: list[str] = setting(list, "the result files of every shard of the run (pwab run --shard I/N)",
                               positional=True, nargs="+", metavar="SHARD")
    out: str = setting(str, "the merged result file", required=True, metavar="FILE")
    overwrite: bool = setting(False, "replace an existing --out file")


@dataclass
class ShardFile:
    """One shard's result file, read and checked alone."""

    path: Path
    shard: Shard
    run_args: RunArgs
    task_ids: list[int]  # the shard's tasks (its plan)
    records: list[Record]


def _ids(task_ids: Iterable[int]) -> str:
    ids = sorted(set(task_ids))
    return ", ".join(map(str, ids[:SHOWN])) + (f" ... ({len(ids)} tasks)" if len(ids) > SHOWN else "")


def read_shard(path: Path | str) -> ShardFile:
    """A finished, valid shard file; DataError naming the file and what keeps it out otherwise."""
    from PersonalWAB.leaderboard.validate import read_valid

    report = read_valid(path)  # the one reader: an invalid shard is refused as every command refuses a file
    path = report.path
    result = cast(RunFile, report.result)
    run_args = result.run_args
    if result.checkpoint is not None:
        raise DataError(f"{path}: an unfinished shard ({len(result.records)} task(s) done when its run stopped): "
                        f"finish it with pwab run ... --resume_from {path}, then merge")
    if result.header is None or run_args.get("shard") is None:
        raise DataError(f"{path}: not a shard (its run_args name no --shard I/N); merge joins the files of pwab run "
                        "--shard")
    shard = Shard.parse(str(run_args.get("shard")))
    task_ids = run_args["shard_plan"]["task_ids"]  # validate_file checked that the plan lists them
    return ShardFile(path, shard, run_args, task_ids, result.records)


def _settings_differ(first: ShardFile, other: ShardFile) -> list[str]:
    """`key: value in A, value in B` for each setting that makes the shards' runs different runs."""
    keys = dict.fromkeys([*first.run_args, *other.run_args])
    return [f"{key}: {first.run_args.get(key)!r} in {first.path}, {other.run_args.get(key)!r} in {other.path}"
            for key in keys if key not in WHERE_AND_HOW and first.run_args.get(key) != other.run_args.get(key)]


def _check_overlap(shards: Sequence[ShardFile]) -> None:
    holder: dict[int, Path] = {}
    for item in shards:
        for task_id in item.task_ids:
            if task_id in holder:
                both = [t for t in item.task_ids if holder.get(t) == holder[task_id]]
                raise DataError(f"{holder[task_id]} ({shard_of(shards, holder[task_id])}) and {item.path} "
                                f"({item.shard}) overlap: both hold tasks {_ids(both)}; give each shard once")
        holder.update((task_id, item.path) for task_id in item.task_ids)


def shard_of(shards: Sequence[ShardFile], path: Path) -> Shard:
    return next(item.shard for item in shards if item.path == path)


def _check_plan(shards: Sequence[ShardFile]) -> list[int]:
    """The run's whole selection of tasks, each shard checked to hold its part of it (the rule of
    `PersonalWAB.shards`) and every shard present (DataError naming an absent one's tasks)."""
    first = shards[0]
    args = first.run_args
    selected = args["shard_plan"]["selected"]
    start = args.get("start_index", 0)
    selection = task_selection(start, start + selected, bool(args.get("shuffle")), cast(int, args.get("seed")))
    for item in shards:
        if item.task_ids != item.shard.take(selection):
            raise DataError(f"{item.path}: its tasks ({_ids(item.task_ids)}) are not shard {item.shard} of the "
                            f"{selected} selected tasks; the file was edited or made otherwise")
    absent = absent_parts([(str(item.path), item.shard) for item in shards])
    if absent:
        count = first.shard.count
        named = "; ".join(f"{index}/{count} (tasks {_ids(Shard(index, count).take(selection))})" for index in absent)
        raise DataError(f"missing shard(s) {named}: run them with pwab run --shard I/N and merge all {count}")
    return selection


def _check_records(item: ShardFile) -> None:
    trials = item.run_args.get("num_trials", 1)
    held = {(record["trial"], record["task_id"]) for record in item.records}
    missing = [task_id for trial in range(trials) for task_id in item.task_ids if (trial, task_id) not in held]
    if missing:
        raise DataError(f"{item.path}: shard {item.shard} has no record of tasks {_ids(missing)}: resume it with "
                        f"pwab run ... --resume_from {item.path}")


def merge_shards(paths: Sequence[Path | str]) -> tuple[list[Any], int]:
    """The merged result file's content (header, then the records by trial and task) and the
    number of errored records kept; DataError at the first reason not to merge."""
    shards = [read_shard(path) for path in paths]
    graders = grader_mismatch([(item.path, item.run_args) for item in shards])
    if graders:
        raise DataError(f"cannot merge: {graders}")
    first = shards[0]
    for other in shards[1:]:
        differing = _settings_differ(first, other)
        if differing:
            raise DataError(f"{other.path} is a shard of another run than {first.path} ({'; '.join(differing[:3])}"
                            f"{' ...' if len(differing) > 3 else ''}): merge only the shards of one run")
    one_count([(str(item.path), item.shard) for item in shards])  # before the tasks shards of other N share
    _check_overlap(shards)
    _check_plan(shards)
    for item in shards:
        _check_records(item)
    records = sorted((record for item in shards for record in item.records),
                     key=lambda record: (record["trial"], record["task_id"]))
    run_args = cast(RunArgs, {key: value for key, value in first.run_args.items() if key != "shard_plan"})
    run_args["shard"] = None
    notes = [item.run_args["cost_note"] for item in shards if "cost_note" in item.run_args]
    if notes:
        run_args["cost_note"] = notes[0]
    header: Header = build_header(run_args, records)
    return [header, *records], sum(1 for record in records if is_errored(record))


def merge(argv: list[str] | None = None) -> int:
    """`pwab leaderboard merge`: write the merged file (exit 0), or say why not (exit 2)."""
    args = parse(MergeSettings, argv, description="Join the result files of one run's shards into the run's "
                                                   "result file.")
    out = Path(args.out)
    if out.is_file() and not args.overwrite:  # a run's result file: replaced only when told
        print(f"error: --out {out}: already exists; pass --overwrite to replace it", file=sys.stderr)
        return EXIT_REFUSED
    claim_outputs(args, {"out": FILE})  # writable, and none of the shards
    try:
        content, errored = merge_shards(args.files)
        write_output(out, dumps_json(content))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"{out}: {len(content) - 1} records of {len(args.files)} shards")
    if errored:
        print(f"note: {errored} record(s) ended in an error, as in the shards; run them again with "
              f"pwab run ... --resume_from {out}")
    return EXIT_OK
