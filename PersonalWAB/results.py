"""Result files in the leaderboard format: reading, checkpointing, the header and resume.

A finished file is a JSON list whose first element is the header
(`run_args`, `total cost` (the agent's, as in the release), per-type `results`, and
`total user cost`; with several trials also their spread, `trials`) followed by one
record per task run. While a run is going the same path
holds a checkpoint, rewritten atomically: `{"run_args": ..., "unfinished": true}` followed by
the records finished so far, so a killed run leaves a readable file that says which run it
belongs to. Files of older versions (and of the original release) hold the records alone;
they still load and resume, with only their tasks checked.

`--resume_from` keeps a file's finished records only when the file belongs to
the run being resumed: the settings the runner marks as resume keys must be equal (the protocol's
texts by their digest) and every record must be the task it claims to be. A record that
`leaderboard validate` would refuse (`record_faults`: scores outside [0, 1], a function
accuracy other than 0 or 1, a cost that is no finite non-negative number, ...) is left out
with a note (its task runs again), so the header written at the end, computed from the kept
records, is one validate accepts. A file of records without the run's settings is refused
unless `allow_headerless`.

A running `ResultWriter` holds `RunLock`s on its file and on the file being resumed, so
two live runs never share one; a write that fails (a full disk) leaves the file's last
whole checkpoint and raises `CheckpointWriteError`.

The numbers of the header are computed by `PersonalWAB.metrics` from the records.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

import orjson

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.errors import DataError
from PersonalWAB.gc_pause import gc_paused
from PersonalWAB.metrics import (compute_statistics, is_errored, record_cost, record_user_cost, solved_threshold_of,
                                 trial_statistics)
from PersonalWAB.protocol.spec import RELEASE_PROTOCOL_DIGEST, RELEASE_SHORT
from PersonalWAB.response_cache import cache_totals
from PersonalWAB.schema_types import Header, ProtocolRecord, Record, RunArgs, Task, TaskSummary, required_keys
from PersonalWAB.scratch import RunLock, atomic_write_text

HEADER_KEYS = required_keys(Header)
RECORD_KEYS = required_keys(Record)
TASK_INFO_KEYS = required_keys(TaskSummary)
USAGE_LISTS = ("completion_tokens", "prompt_tokens", "total_tokens")
UNFINISHED_KEY = "unfinished"
TRIALS_KEY: Final = "trials"  # the header's spread across trials (`PersonalWAB.metrics.trial_statistics`)
AUDIT_KEY: Final = "audit"  # the run's privileged inputs (`PersonalWAB.audit.run.run_summary`)
TEXTS_KEYS = ("protocol", "protocol_texts_digest")  # compared together: one message names both runs' texts


def task_summary(task: Task) -> TaskSummary:
    """What a record says about its task (`info.task`): enough to recognise it in the split."""
    return {
        "user_id": task["user_id"],
        "task": task["task"],
        "type": task["type"],
        "timestamp": task["timestamp"],
        "target": task["target"]["product_info"]["parent_asin"],
    }


def custom_reasons(record: ProtocolRecord, texts_digest: Any) -> list[str]:
    """Why a run's `protocol` record (`run_args.protocol`) and its `protocol_texts_digest` make it
    custom ([] for a standard run). Texts named the pinned release's count as the release's only
    with the digest the project pins for them: a label written by hand names unknown texts."""
    name = record.get("texts")
    if name != f"release@{RELEASE_SHORT}":
        texts = [f"{name} texts"]
    elif texts_digest != RELEASE_PROTOCOL_DIGEST:
        texts = [f"unknown texts (named {name}, but protocol_texts_digest {texts_digest!r} is not the pinned release's "
                 f"{RELEASE_PROTOCOL_DIGEST})"]
    else:
        texts = []
    return texts + list(record.get("departures") or [])


def build_header(run_args: RunArgs, records: list[Record]) -> Header:
    """The leaderboard header; with `num_trials` >= 2 it adds the spread across trials
    (`trials`, see PersonalWAB.metrics), and always the run's audit (`audit`: its privileged
    inputs, `PersonalWAB.audit.run`), beside the original fields, which stay as they are."""
    header: Header = {
        "run_args": run_args,
        "total cost": sum(record_cost(r) for r in records),
        "results": compute_statistics(records),
        "total user cost": sum(record_user_cost(r) for r in records),
    }
    cached = cache_totals(records)
    if cached is not None:
        header["cache"] = cached
    trials = trial_statistics(records, run_args.get("num_trials", 1), solved_threshold_of(run_args))
    if trials is not None:
        header[TRIALS_KEY] = trials
    from PersonalWAB.audit.run import run_summary

    header[AUDIT_KEY] = run_summary(run_args, records)
    return header


def _check_record(record: Any, path: Path, index: int) -> None:
    if not isinstance(record, dict):
        raise DataError(f"{path}: element {index} is not a task record (expected an object)")
    for key in RECORD_KEYS:
        if key not in record:
            raise DataError(f"{path}: element {index} (task {record.get('task_id')!r}): missing key {key!r}")
    info = record["info"]
    if not isinstance(info, dict) or "task" not in info or "usage" not in info:
        raise DataError(f"{path}: element {index} (task {record['task_id']!r}): info lacks 'task' or 'usage'")


@dataclass
class RunFile:
    """A result file's parts: the first element of a finished run's file (`header`) or of an
    unfinished run's checkpoint (`checkpoint`), then the task records. Files of the original
    release hold records alone (both None)."""

    path: Path
    header: Header | None
    checkpoint: dict[str, Any] | None
    records: list[Record]

    @property
    def first_element(self) -> int:
        """The position of the first record in the file's JSON list."""
        return 0 if self.header is None and self.checkpoint is None else 1

    @property
    def run_args(self) -> RunArgs:
        """The run's settings; {} when the file records none (or not as an object, which
        `read_run_file` refuses and the leaderboard's validator reports)."""
        first = self.header if self.header is not None else self.checkpoint
        run_args = None if first is None else first.get("run_args")
        return cast(RunArgs, run_args) if isinstance(run_args, dict) else {}


def decode_result_file(raw: bytes) -> Any:
    """The JSON value of a result file's bytes, parsed with the cyclic collector paused: by
    orjson (fast), or where it refuses (NaN, huge integers, broken text) by the standard
    parser, whose values and errors are the ones given (JSON nested deeper than both allow:
    orjson's). Raises UnicodeDecodeError or json.JSONDecodeError."""
    with gc_paused():
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as fast_error:
            try:
                return json.loads(raw.decode("utf-8"))
            except RecursionError:
                raise fast_error from None


def split_result_file(path: Path, content: list[Any]) -> RunFile:
    """The parts of a result file's JSON list, nothing checked: a checkpoint's or a header's
    first element (any object with `run_args`), then the records."""
    first = content[0] if content else None
    if isinstance(first, dict) and "run_args" in first:
        if first.get(UNFINISHED_KEY) is True:
            return RunFile(path, None, first, content[1:])
        return RunFile(path, cast(Header, first), None, content[1:])  # as written: read_run_file checks it
    return RunFile(path, None, None, content)


def read_run_file(path: Path | str) -> RunFile:
    """Header, run args and task records of a finished file or a checkpoint; DataError at
    the first problem."""
    path = Path(path)
    try:
        content = decode_result_file(path.read_bytes())
    except FileNotFoundError:
        raise DataError(f"{path}: result file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the result file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON, possibly truncated ({exc})") from None
    if not isinstance(content, list):
        raise DataError(f"{path}: a result file is a JSON list, got {type(content).__name__}")
    parsed = split_result_file(path, content)
    if parsed.header is not None:
        for key in HEADER_KEYS:
            if key not in parsed.header:
                raise DataError(f"{path}: header lacks {key!r}")
    first = parsed.header if parsed.header is not None else parsed.checkpoint
    if first is not None and not isinstance(first["run_args"], dict):
        raise DataError(f"{path}: run_args is not an object")
    for index, record in enumerate(parsed.records, start=parsed.first_element):
        _check_record(record, path, index)
    return parsed


def load_result_file(path: Path | str) -> tuple[Header | None, list[Record]]:
    """Header (None for an unfinished run) and task records of a result file."""
    parsed = read_run_file(path)
    return parsed.header, parsed.records


# What the release's run.py records that decides what was run: a file in its format (no
# `project_version`) is labelled from these, so a file that lacks one cannot be labelled at all.
RELEASE_LABEL_KEYS = ("env", "model", "user_mode", "user_model", "agent_strategy", "agent_memory", "memory_length",
                      "task_split", "max_steps", "start_index", "end_index", "num_trials")
# What only this project's runs record beside their settings (never the release's run.py).
PROJECT_LABEL_KEYS = ("data_source", "data_fingerprint", "protocol", "protocol_texts_digest")


def label_keys_lacking(run_args: Mapping[str, Any]) -> list[str]:
    """The run_args keys a file's labels (data origin; standard or custom) are derived from that
    it lacks ([] when its labels can be derived). A file of this project (`project_version`)
    needs the keys it records beside its settings (files of versions before the protocol record
    need only `data_source`); one without `project_version` is in the release's format only when
    it records none of them and every key of the release's run.py that decides the run."""
    if "project_version" in run_args:
        needed = PROJECT_LABEL_KEYS if "protocol" in run_args else ("data_source",)
        return [key for key in ("agent_strategy", *needed) if key not in run_args]
    if any(key in run_args for key in PROJECT_LABEL_KEYS):
        return ["project_version"]
    return [key for key in RELEASE_LABEL_KEYS if key not in run_args]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:20] + "..."


def _texts_of(run_args: Mapping[str, Any]) -> tuple[Any, Any]:
    """The texts a run used: the protocol record's name and the digest of every text (None where
    the file records none: files written before the digest was recorded lack it)."""
    record = run_args.get("protocol")
    return (record.get("texts") if isinstance(record, dict) else record), run_args.get("protocol_texts_digest")


def _texts_mismatch(previous: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """`protocol: <texts> in the file, <texts> now` when the runs used other texts, by name or by
    digest (each compared when both runs recorded it)."""
    (old_name, old_digest), (new_name, new_digest) = _texts_of(previous), _texts_of(current)
    names_differ = "protocol" in previous and "protocol" in current and old_name != new_name
    digests_differ = None not in (old_digest, new_digest) and old_digest != new_digest
    if not (names_differ or digests_differ):
        return []

    def label(name: Any, digest: Any) -> str:
        return _shown(name) + (f" (texts digest {digest})" if digest else "")

    return [f"protocol: {label(old_name, old_digest)} in the file, {label(new_name, new_digest)} now"]


def resume_mismatches(previous: Mapping[str, Any], current: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """`key: file value in the file, this run's value now` for every setting of `keys` (a run's
    resume keys) that differs, compared where both runs recorded it (older files lack newer keys);
    the texts, when they differ, in one entry naming both."""
    texts = _texts_mismatch(previous, current)
    found = [f"{key}: {_shown(previous[key])} in the file, {_shown(current[key])} now" for key in keys
             if key in previous and key in current and previous[key] != current[key]
             and not (texts and key in TEXTS_KEYS)]
    return texts + found


GRADER_KEY: Final = "grader_version"  # the digest of the scoring code a file was scored by


def grader_mismatch(files: Sequence[tuple[Path | str, Mapping[str, Any]]]) -> str | None:
    """Why files (path, run_args) may not share a table or a comparison: two of them scored by
    different graders (`run_args.grader_version`; a file that records none is not judged). None
    when they agree."""
    graded = [(path, run_args[GRADER_KEY]) for path, run_args in files if run_args.get(GRADER_KEY)]
    for path, version in graded[1:]:
        first_path, first = graded[0]
        if version != first:
            return (f"{first_path} was scored by grader {first}, {path} by grader {version}: scores of different "
                    "graders are not comparable; re-grade them under one grader first (pwab leaderboard regrade "
                    "FILE... --out DIR)")
    return None


def _is_score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and 0 <= value <= 1


def _is_cost(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def record_faults(record: Any) -> list[str]:
    """Everything that makes a task record unusable ([] when it is fine): the one set of record
    checks, so `leaderboard validate` and `--resume_from` accept exactly the same records."""
    if not isinstance(record, dict):
        return [f"not a task record (got {type(record).__name__})"]
    missing = [key for key in RECORD_KEYS if key not in record]
    if missing:
        return [f"missing key(s) {', '.join(missing)}"]
    faults = [f"{key} must be an integer, got {record[key]!r}" for key in ("task_id", "trial")
              if not isinstance(record[key], int) or isinstance(record[key], bool)]
    action_acc, res_acc = record["action_acc"], record["res_acc"]
    if not isinstance(action_acc, list) or not isinstance(res_acc, list):
        return [*faults, "action_acc and res_acc must be lists (one value per attempt)"]
    if len(action_acc) != len(res_acc):
        faults.append(f"action_acc has {len(action_acc)} values but res_acc has {len(res_acc)}")
    for name, values in (("action_acc", action_acc), ("res_acc", res_acc)):
        for i, value in enumerate(values):
            if not _is_score(value):
                faults.append(f"{name}[{i}] = {value!r} is not a number in [0, 1]")
            elif name == "action_acc" and value not in (0, 1):
                faults.append(f"action_acc[{i}] = {value!r}: function accuracy is 0 or 1")
    if not isinstance(record["traj"], list):
        faults.append("traj must be a list of chat messages")
    return faults + _info_faults(record["info"])


def _info_faults(info: Any) -> list[str]:
    if not isinstance(info, dict):
        return ["info must be an object"]
    task, usage = info.get("task"), info.get("usage")
    if not isinstance(task, dict) or any(key not in task for key in TASK_INFO_KEYS):
        return [f"info.task must hold {', '.join(TASK_INFO_KEYS)}"]
    if task["type"] not in TASK_TYPES:
        return [f"info.task.type {task['type']!r} is not one of {', '.join(TASK_TYPES)}"]
    if not isinstance(usage, dict) or any(not isinstance(usage.get(key), list) for key in USAGE_LISTS):
        return [f"info.usage must hold the lists {', '.join(USAGE_LISTS)}"]
    costs = (usage.get("total_price", 0.0), info.get("user_cost") or 0.0)
    if not all(_is_cost(cost) for cost in costs):
        return [f"info.usage.total_price / info.user_cost must be non-negative numbers, got {costs}"]
    if not isinstance(info.get("actions", []), list):
        return ["info.actions must be a list"]
    return []


def record_problem(record: Record) -> str | None:
    """The first of `record_faults` (None when the record is fine)."""
    faults = record_faults(record)
    return faults[0] if faults else None


def resumable_records(path: Path | str, run_args: RunArgs, tasks: list[Task],
                      task_ids: set[int], num_trials: int, keys: Sequence[str],
                      allow_headerless: bool = False) -> tuple[list[Record], list[str]]:
    """The finished records of `path` that this run keeps, and notes for the log (`keys`: the
    settings the two runs must share).

    Raises DataError (naming the differing settings or the first foreign record) when the
    file belongs to another run, or records no run settings and `allow_headerless` is
    False; nothing is written either way. Errored records and records with unusable numbers
    are left out (their tasks run again); a task recorded twice is kept once.
    """
    path = Path(path)
    parsed = read_run_file(path)
    notes: list[str] = []
    if parsed.header is None and parsed.checkpoint is None:
        if not allow_headerless:
            raise DataError(f"{path}: task records without the run's settings (an older format, or not a file of "
                            "this run), so resume cannot check that it belongs to this run; pass "
                            "--resume_headerless to keep its records anyway (each is still checked against its task)")
        notes.append(f"{path} records no run settings (an older format): only its tasks were checked")
    else:
        lacking = label_keys_lacking(parsed.run_args)
        if lacking:
            raise DataError(f"{path}: cannot derive label: run_args lacks {', '.join(lacking)}, so resume cannot "
                            "check that it belongs to this run (settings removed by hand?)")
        differing = resume_mismatches(parsed.run_args, run_args, keys)
        if differing:
            raise DataError(f"{path} belongs to another run ({'; '.join(differing)}): resume it with the "
                            "file's settings, or start a new run without --resume_from")
    kept: dict[tuple[int, int], Record] = {}
    duplicates = 0
    for record in parsed.records:
        task_id, trial = record["task_id"], record["trial"]
        where = f"{path}: task {task_id!r} trial {trial!r}"
        if not isinstance(task_id, int) or task_id not in task_ids:
            raise DataError(f"{where} is outside this run's task range; resume with the same "
                            "--start_index/--end_index")
        if not isinstance(trial, int) or not 0 <= trial < num_trials:
            raise DataError(f"{where}: trial outside 0-{num_trials - 1} (--num_trials {num_trials})")
        recorded = record["info"]["task"]
        if not isinstance(recorded, dict) or {key: recorded.get(key) for key in TASK_INFO_KEYS} != \
                task_summary(tasks[task_id]):
            raise DataError(f"{where} is not that task of this split (the data or split differs)")
        if is_errored(record):
            continue
        problem = record_problem(record)
        if problem:
            notes.append(f"{where} not kept ({problem}); the task runs again")
            continue
        if (trial, task_id) in kept:
            duplicates += 1
            continue
        kept[(trial, task_id)] = record
    if duplicates:
        notes.append(f"{path}: {duplicates} duplicate record(s) of finished tasks kept once")
    return list(kept.values()), notes


def dumps_json(content: Any) -> str:
    """The layout of `json.dumps(content, indent=2, ensure_ascii=False)` through orjson, 5x
    faster on a whole split's records (a checkpoint rewrites them all); floats are written
    in their shortest form (`1e-5`), which reads back to the same value. What orjson
    refuses (a lone surrogate, a non-string key, a huge int) goes through the stdlib encoder."""
    try:
        return orjson.dumps(content, option=orjson.OPT_INDENT_2).decode("utf-8")
    except (orjson.JSONEncodeError, ValueError):
        return json.dumps(content, indent=2, ensure_ascii=False)


def _atomic_write_json(path: Path, content: Any, exclusive: bool = False) -> None:
    atomic_write_text(path, dumps_json(content), exclusive=exclusive)


def numbered(path: Path, number: int) -> Path:
    """`name-N.json`: the N-th candidate when `path` is taken."""
    return path.with_name(f"{path.stem}-{number}{path.suffix}")


class CheckpointWriteError(RuntimeError):
    """A result file could not be written (a full disk, a folder gone read-only); the file keeps
    its last whole version, which holds `saved` records (None: nothing was written)."""

    def __init__(self, path: Path, error: OSError, saved: int | None):
        kept = ("nothing was written" if saved is None else
                f"it keeps its last whole checkpoint ({saved} finished task(s))")
        super().__init__(f"cannot write {path} ({error.strerror or error}); {kept}")
        self.saved = saved


class ResultWriter:
    """Collects task records and checkpoints them to disk.

    Checkpoints are throttled (at most one rewrite per `flush_interval_s`) so a
    long run does not spend its time rewriting the file after every task; a record that
    finished inside the pause is written when the pause ends, even if no other task finishes
    (the rest may wait minutes on a model), so a kill loses at most one pause of work. `saved`
    counts the records the file on disk holds (None before the first write).
    """

    def __init__(self, path: Path, run_args: RunArgs, records: list[Record] | None = None,
                 flush_interval_s: float = 1.0):
        self.path = Path(path)
        self.run_args = run_args
        self.records: list[Record] = list(records or [])
        self.flush_interval_s = flush_interval_s
        self.saved: int | None = None
        self.write_error: CheckpointWriteError | None = None  # the failed write of `save_before_stop`
        self._lock = threading.Lock()
        self._last_flush = 0.0
        self._pause = flush_interval_s
        self._file_locks: dict[Path, RunLock] = {}
        self._deferred: threading.Timer | None = None  # the checkpoint due when the pause ends
        self._finished = False  # the final file is written: no checkpoint may replace it

    def hold(self, *paths: Path | str) -> None:
        """Lock `paths` (the result file when its name is given, the file being resumed) until
        `release`; DataError naming the other run's pid when one holds any of them."""
        for path in paths:
            key = Path(path).resolve()
            if key not in self._file_locks:
                lock = RunLock(key)
                lock.acquire()
                self._file_locks[key] = lock

    def _drop_lock(self, path: Path) -> None:
        lock = self._file_locks.pop(path.resolve(), None)
        if lock is not None:
            lock.release()

    def release(self) -> None:
        """Drop every lock this writer holds (the run is over)."""
        with self._lock:
            self._finished = True
            if self._deferred is not None:
                self._deferred.cancel()
        for lock in self._file_locks.values():
            lock.release()
        self._file_locks.clear()

    def start(self, unique: bool = False, replace: bool = False) -> Path:
        """Claim the file and write the first checkpoint; returns the path used.

        `replace`: write over an existing file (--overwrite, or resuming in place).
        Otherwise the file is created only if absent (atomically, so two runs never
        share one): with `unique` the next free `name-N.json` is taken instead, else an
        existing file is refused. The file is locked (`hold`) from here until `release`.
        """
        with self._lock:
            if replace:
                self.hold(self.path)
                self._flush_locked()
            else:
                self.path = self._claim(unique)
                self._last_flush = time.monotonic()
            return self.path

    def _claim(self, unique: bool) -> Path:
        """Create the first checkpoint under a free name; never visible half-written or empty."""
        number = 1
        while True:
            candidate = self.path if number == 1 else numbered(self.path, number)
            try:
                if candidate.exists():  # the plainer reason first, even when its run still holds it
                    raise FileExistsError(candidate)
                self.hold(candidate)
                self._write(candidate, self._checkpoint(), exclusive=True)
                return candidate
            except FileExistsError:
                if not unique:
                    raise DataError(f"{candidate}: result file already exists; pass --overwrite to replace it, "
                                    "--resume_from it to finish it, or choose another --output") from None
                self._drop_lock(candidate)
                number += 1
            except DataError:
                if not unique:
                    raise
                self._drop_lock(candidate)
                number += 1  # a derived name another run holds, or no regular file

    def _write(self, path: Path, content: list[Any], exclusive: bool = False) -> None:
        """Write the file whole; on a failure it keeps its last whole version (CheckpointWriteError)."""
        try:
            _atomic_write_json(path, content, exclusive=exclusive)
        except FileExistsError:
            raise
        except OSError as exc:
            raise CheckpointWriteError(path, exc, self.saved) from exc
        self.saved = len(content) - 1

    def add(self, record: Record) -> None:
        with self._lock:
            self.records.append(record)
            wait = self._pause - (time.monotonic() - self._last_flush)
            if wait <= 0:
                self._flush_locked()
            elif self._deferred is None:
                self._deferred = threading.Timer(wait, self._flush_deferred)
                self._deferred.daemon = True
                self._deferred.start()

    def _flush_deferred(self) -> None:
        """The checkpoint of records that finished inside a pause. A write that fails here is
        left to the next checkpoint (a task's, or the one made as the run stops), which meets
        the same fault and reports it."""
        with self._lock:
            self._deferred = None
            if self._finished or self.saved == len(self.records):
                return
            with contextlib.suppress(CheckpointWriteError):
                self._flush_locked()

    def flush(self) -> None:
        """Checkpoint the records now (the run is not finished)."""
        with self._lock:
            self._flush_locked()

    def save_before_stop(self) -> None:
        """Checkpoint what finished as the run stops; a write that fails is kept in
        `write_error` rather than raised over the reason for stopping."""
        try:
            self.flush()
        except CheckpointWriteError as exc:
            self.write_error = exc

    def _checkpoint(self) -> list[Any]:
        return [{"run_args": self.run_args, UNFINISHED_KEY: True}, *self.records]

    def _flush_locked(self) -> None:
        """Rewrite the checkpoint; with a nonzero interval the next one waits at least 10x
        as long as this write took, so checkpointing costs at most ~10% of a long run
        however big the file grows."""
        start = time.monotonic()
        self._write(self.path, self._checkpoint())
        self._last_flush = time.monotonic()
        if self.flush_interval_s > 0:
            self._pause = max(self.flush_interval_s, 10 * (self._last_flush - start))

    def finalize(self) -> Header:
        """Write header + records (sorted by trial, task id); return the header."""
        with self._lock:
            self._finished = True
            if self._deferred is not None:
                self._deferred.cancel()
            self.records.sort(key=lambda r: (r["trial"], r["task_id"]))
            header = build_header(self.run_args, self.records)
            self._write(self.path, [header, *self.records])
            return header
