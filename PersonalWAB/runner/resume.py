"""Resuming a run: the records `--resume_from` keeps, the tasks left to run, and the
`run.py` command line that finishes a run that stopped early."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from PersonalWAB.results import resumable_records
from PersonalWAB.runner.config import RunConfig, run_resume_keys, run_settings_fields
from PersonalWAB.schema_types import Record, RunArgs, Task
from PersonalWAB.settings import flag_name, is_boolean

# settings the resume command replaces (the file it resumes has the run's settings by then)
NOT_REPEATED = ("resume_from", "out", "overwrite", "resume_headerless")


def resumes_in_place(config: RunConfig, target: Path) -> bool:
    """Whether the run writes its result into the very file it resumes."""
    if not config.resume_from:
        return False
    return target.resolve() == Path(config.resume_from).resolve()


def kept_and_left(config: RunConfig, run_args: RunArgs, tasks: list[Task], task_ids: list[int],
                  log: Callable[[str], None]) -> tuple[list[Record], list[tuple[int, int]]]:
    """The records kept from `--resume_from` (none without it) and the (trial, task id) jobs
    left to run, in the run's order."""
    kept: list[Record] = []
    if config.resume_from:
        kept, notes = resumable_records(config.resume_from, run_args, tasks, set(task_ids), config.num_trials,
                                        run_resume_keys(), allow_headerless=config.resume_headerless)
        for note in notes:
            log(f"note: {note}")
    done_keys = {(r["trial"], r["task_id"]) for r in kept}
    jobs = [(trial, tid) for trial in range(config.num_trials) for tid in task_ids if (trial, tid) not in done_keys]
    return kept, jobs


def resume_command(config: RunConfig, output: Path) -> str:
    """The run.py command line that finishes this run: its non-default settings and --resume_from."""
    words = ["python", "run.py"]
    values = config.settings()
    for item in run_settings_fields():
        value = values[item.name]
        if item.name in NOT_REPEATED or value == item.default:
            continue
        if is_boolean(item):
            words += [f"--{flag_name(item)}", str(int(value))]
        else:
            words += [f"--{flag_name(item)}", str(value)]
    return shlex.join(words + ["--resume_from", str(output)])
