"""`pwab leaderboard regrade FILE... --out DIR`: re-score the trajectories stored in result files under
the current grader, and say per task what changed.

Nothing runs again: every scored call of a record is read back with the observation the agent read
(`PersonalWAB.calls`) and scored by `PersonalWAB.envs.pwab.scoring.score_attempt`, as the
environment scored it (a search or recommendation by the target's rank in its results, a review
by its MiniLM cosine to the user's real review, which needs the run's data: `--data_dir`). A
single-turn message to the user is an attempt scored (0, 0) by the rule. The re-graded file keeps
every record as it was but its attempts' scores and its failure label, its header is computed
again, and its run args name the current grader (`grader_version`) and the one it was scored by
(`regraded`). A file scored by the current grader comes out unchanged, score for score.
Records that ended in an error are kept as they are (they have no scores to change).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from PersonalWAB.calls import scored_calls
from PersonalWAB.envs.pwab.scoring import grader_version, score_attempt
from PersonalWAB.errors import DataError
from PersonalWAB.failures import failure_label, react_prefix_of
from PersonalWAB.metrics import is_errored
from PersonalWAB.outputs import CONTAINER, parse_command, write_output
from PersonalWAB.results import UNFINISHED_KEY, RunFile, build_header, dumps_json
from PersonalWAB.schema_types import Record, RunArgs, Task
from PersonalWAB.settings import setting

EXIT_OK, EXIT_REFUSED = 0, 2


@dataclass
class RegradeSettings:
    """`regrade`: re-score stored trajectories under the current grader."""

    files: list[str] = setting(list, "result files to re-grade", positional=True, nargs="+", metavar="FILE")
    out: str = setting(str, "folder of the re-graded files (each under its own name)", required=True,
                       metavar="DIR")
    data_dir: str | None = setting(None, "the runs' data: review tasks are scored against the user's real review, "
                                         "and the failure labels check the catalogue", metavar="DIR",
                                   default_text="none: files with review tasks are refused")


@dataclass
class Change:
    """One record whose scores or label the current grader gives otherwise."""

    task_id: Any
    trial: Any
    kind: str
    before: tuple[list[float], list[float], str | None]
    after: tuple[list[float], list[float], str]

    def line(self) -> str:
        (acc, res, label), (new_acc, new_res, new_label) = self.before, self.after
        parts = []
        if acc != new_acc:
            parts.append(f"action_acc {acc} -> {new_acc}")
        if res != new_res:
            parts.append(f"res_acc {[round(r, 4) for r in res]} -> {[round(r, 4) for r in new_res]}")
        if label != new_label:
            parts.append(f"failure {label} -> {new_label}")
        return f"task {self.task_id} ({self.kind}, trial {self.trial}): {'; '.join(parts)}"


def _task(record: Record, split: list[Task] | None) -> Task:
    """The record's task, whole: from the run's split (checked to be the same task) when the data is
    given, else rebuilt from the record (enough to score a search or a recommendation)."""
    summary = record["info"]["task"]
    task_id = record["task_id"]
    if split is not None:
        if not 0 <= task_id < len(split) or split[task_id]["task"] != summary["task"]:
            raise DataError(f"task {task_id}: not the task at that index of --data_dir's split (other data?)")
        return split[task_id]
    if summary["type"] == "review":
        raise DataError(f"task {task_id} is a review task: its score needs the user's real review; pass --data_dir")
    product = {"parent_asin": summary["target"]}
    return cast(Task, {**summary, "target": {"product_info": product, "review": {}}})


def regrade_record(record: Record, prefix: str, split: list[Task] | None, catalogue: Any,
                   single_turn: bool) -> Record:
    """The record with every attempt scored again, and its failure label decided again."""
    from PersonalWAB.engines.text_embedding import shared_embedder

    task = _task(record, split)
    calls = scored_calls(record, prefix)
    attempts = [score_attempt(task, call.name, call.value(), call.value() is None, shared_embedder())
                for call in calls]
    scores = [(attempt.function_acc, attempt.result_acc) for attempt in attempts]
    extra = len(record["action_acc"]) - len(scores)
    if single_turn and extra == 1 and not scores:
        scores.append((0.0, 0.0))  # the single-turn episode ended on a message to the user
    elif extra:
        raise DataError(f"task {record['task_id']} trial {record['trial']}: its trajectory holds {len(scores)} "
                        f"scored call(s) but it records {len(record['action_acc'])} attempt(s)")
    regraded = cast(Record, {**record, "action_acc": [s[0] for s in scores], "res_acc": [s[1] for s in scores],
                             "info": dict(record["info"])})
    regraded["info"]["failure"] = failure_label(regraded, prefix, catalogue)
    return regraded


def regrade_file(path: Path | str, data: Any | None) -> tuple[list[Any], list[Change], str | None]:
    """The re-graded file's content, the records that changed, and the grader the file was scored by."""
    from PersonalWAB.build import cache_review_embeddings
    from PersonalWAB.leaderboard.validate import read_valid

    parsed = cast(RunFile, read_valid(path, data).result)  # the one reader: an invalid file is refused
    run_args = parsed.run_args
    split = data.split(str(run_args.get("task_split", "test"))) if data is not None else None
    if data is not None and split is not None:
        cache_review_embeddings(data, [split[r["task_id"]] for r in parsed.records if not is_errored(r)])
    prefix = react_prefix_of(run_args)
    max_steps = run_args.get("max_steps", -1)
    single_turn = not (isinstance(max_steps, int) and max_steps > 0)
    catalogue = data.products if data is not None else None
    records, changes = [], []
    for record in parsed.records:
        if is_errored(record):
            records.append(record)
            continue
        try:
            new = regrade_record(record, prefix, split, catalogue, single_turn)
        except DataError as exc:
            raise DataError(f"{parsed.path}: {exc}") from None
        before = (record["action_acc"], record["res_acc"], record["info"].get("failure"))
        after = (new["action_acc"], new["res_acc"], new["info"]["failure"])
        if before != after:
            changes.append(Change(record["task_id"], record["trial"], record["info"]["task"]["type"], before, after))
        records.append(new)
    old_version = run_args.get("grader_version")
    new_args = cast(RunArgs, {**run_args, "grader_version": grader_version(),
                              "regraded": {"from_grader_version": old_version, "changed_records": len(changes)}})
    if parsed.header is not None:
        first: Any = build_header(new_args, records)
    elif parsed.checkpoint is not None:
        first = {"run_args": new_args, UNFINISHED_KEY: True}
    else:
        raise DataError(f"{parsed.path}: records without a header: the run's settings are unknown, so its grader "
                        "cannot be recorded; finish it with run.py --resume_from first")
    return [first, *records], changes, old_version


def main(argv: list[str] | None = None) -> int:
    """Re-grade each file into --out; list the records whose scores or labels changed."""
    from PersonalWAB.leaderboard.commands import _load_data

    args = parse_command([RegradeSettings], argv, {"out": CONTAINER},
                         description="Re-score stored trajectories under the current grader and say per task what "
                                     "changed.")[0]
    data = _load_data(args.data_dir)
    current = grader_version()
    for path in args.files:
        try:
            content, changes, old = regrade_file(path, data)
        except DataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        out = Path(args.out) / Path(path).name
        write_output(out, dumps_json(content))
        print(f"{path}: grader {old or 'unknown (not recorded)'} -> {current}: {len(changes)} of "
              f"{len(content) - 1} record(s) changed; written to {out}")
        for change in changes:
            print(f"  {change.line()}")
    return EXIT_OK
