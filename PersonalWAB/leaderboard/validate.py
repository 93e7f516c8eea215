"""Check a result file against the leaderboard format and, optionally, the benchmark data.

A submitted file is only worth ranking if its header says what its records say
and its records are the benchmark's tasks. Every problem is reported against the
exact element of the JSON list it concerns (element 0 is the header of a finished
file), so a submitter can open it with `jq '.[N]'` and see what is wrong.

Severities: an *error* makes the file invalid; a *warning* flags something a
reader of the numbers must know (synthetic data, a non-official search backend,
a partial split, an interrupted or errored run) without making the file wrong;
a *note* says which checks could not be made.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard, cast

from PersonalWAB.errors import DataError
from PersonalWAB.metrics import (compute_statistics, count_format_errors, record_cost, solved_threshold_of,
                                 trial_statistics)
from PersonalWAB.audit.run import privileged_flags, run_summary
from PersonalWAB.results import (
    AUDIT_KEY,
    HEADER_KEYS,
    TRIALS_KEY,
    RunFile,
    custom_reasons,
    decode_result_file,
    label_keys_lacking,
    record_faults,
    split_result_file,
)
from PersonalWAB.schema_types import RunArgs, Task

ERROR, WARNING, NOTE = "error", "warning", "note"
STANDARD, CUSTOM = "standard", "custom"
PRIVILEGED = "privileged inputs"  # the flag of a run whose agent read something a deployed agent would not
STAT_KEYS = ("total_count", "avg_interaction_times", "avg_action_acc", "avg_res_acc")
OFFICIAL_BACKEND = "lucene"
# Published split sizes of the official data: the range check needs no data directory for them.
OFFICIAL_SPLIT_SIZES = {"test": 2174, "train": 6896}
TOLERANCE = 1e-9


@dataclass
class Problem:
    """One finding; `element` is the position in the JSON list (None: the file as a whole)."""

    severity: str
    message: str
    element: int | None = None
    task_id: Any = None
    trial: Any = None

    def where(self) -> str:
        if self.element is None:
            return ""
        if self.task_id is None and self.trial is None:
            return f"record {self.element}: " if self.element else "record 0 (header): "
        return f"record {self.element} (task_id {self.task_id}, trial {self.trial}): "

    def format(self, path: Path | str) -> str:
        return f"{path}: {self.where()}{self.severity}: {self.message}"


@dataclass
class ValidationReport:
    """Everything `validate` found out about one file."""

    path: Path
    problems: list[Problem] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    result: RunFile | None = None
    statistics: dict[str, dict[str, float]] | None = None
    total_cost: float | None = None
    trials: dict[str, Any] | None = None  # the spread across trials, recomputed (None below 2 trials)
    format_errors: int = 0  # records that ended on unusable model replies (info.format_error)
    audit: dict[str, Any] | None = None  # the run's privileged inputs, recomputed (PersonalWAB.audit.run)

    @property
    def valid(self) -> bool:
        return not any(p.severity == ERROR for p in self.problems)

    def count(self, severity: str) -> int:
        return sum(p.severity == severity for p in self.problems)

    def lines(self) -> list[str]:
        """One line per problem and a closing VALID/INVALID line."""
        out = [p.format(self.path) for p in self.problems]
        verdict = "VALID" if self.valid else "INVALID"
        flags = f" [{', '.join(self.flags)}]" if self.flags else ""
        out.append(f"{self.path}: {verdict} ({self.count(ERROR)} errors, {self.count(WARNING)} warnings, "
                   f"{self.format_errors} format errors){flags}")
        return out

    def summary(self) -> dict[str, Any]:
        """A JSON-ready digest (it travels in the submission bundle)."""
        run_args = self.result.run_args if self.result else {}
        return {
            "file": self.path.name,
            "valid": self.valid,
            "errors": self.count(ERROR),
            "warnings": self.count(WARNING),
            "flags": list(self.flags),
            "synthetic": "synthetic" in self.flags,
            "protocol": CUSTOM if CUSTOM in self.flags else STANDARD,
            "track": run_track(self.result) if self.result else None,
            "data_source": run_args.get("data_source"),
            "search_backend": run_args.get("search_backend"),
            "task_split": run_args.get("task_split"),
            "records": len(self.result.records) if self.result else 0,
            "format_errors": self.format_errors,
            "statistics": self.statistics,
            "trials": self.trials,
            "total_cost": self.total_cost,
            "audit": self.audit,
            "problems": [p.format(self.path.name) for p in self.problems],
        }


def run_track(result: RunFile) -> str:
    """`multi-turn` iff run_args.max_steps > 0; a file without a header has no known track."""
    if result.header is None:
        return "unknown (no header)"
    max_steps = result.run_args.get("max_steps", -1)
    return "multi-turn" if _is_number(max_steps) and max_steps > 0 else "single-turn"


def protocol_label(run_args: RunArgs) -> tuple[str, list[str]]:
    """("standard" | "custom", reasons). A run is standard when it used the pinned release's
    texts with no departure. A file without `protocol` and without `project_version` was
    written by the release's own run.py: standard. One from an older version of this project
    (project texts, the only ones it had): custom."""
    record = run_args.get("protocol")
    if record is None:
        if "project_version" in run_args:
            return CUSTOM, ["written before protocol records (project texts)"]
        return STANDARD, []
    if not isinstance(record, dict):
        return CUSTOM, ["run_args.protocol is not an object"]
    reasons = custom_reasons(record, run_args.get("protocol_texts_digest"))
    return (CUSTOM, reasons) if reasons else (STANDARD, [])


def is_synthetic(run_args: RunArgs) -> bool:
    """Files of the original release carry no data_source: they ran on the official data."""
    return str(run_args.get("data_source", "official")) != "official"


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def _locate_json_break(text: str, exc: json.JSONDecodeError) -> Problem:
    """Walk the list element by element to name the record a broken file breaks in."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if text[pos:pos + 1] != "[":
        return Problem(ERROR, f"not valid JSON ({exc})")
    pos += 1
    last: Any = None
    element = 0
    while True:
        pos = _skip_space(text, pos)
        if pos >= len(text):
            return Problem(ERROR, f"the file ends where this element should begin; {_describe_previous(element, last)}",
                           element)
        try:
            last, pos = decoder.raw_decode(text, pos)
        except RecursionError:
            return Problem(ERROR, "JSON nested deeper than the parser allows in this element", element)
        except json.JSONDecodeError as inner:
            # an unterminated string runs to the end of the text, so it is a cut too
            if inner.pos >= len(text.rstrip()) or inner.msg.startswith("Unterminated string"):
                return Problem(ERROR, f"the file ends inside this element; {_describe_previous(element, last)}",
                               element)
            return Problem(ERROR, f"malformed JSON in this element ({inner.msg} at character {inner.pos})", element)
        pos = _skip_space(text, pos)
        if text[pos:pos + 1] == "]":
            return Problem(ERROR, f"text after the end of the list ({exc})")
        if text[pos:pos + 1] != ",":
            return Problem(ERROR, f"unexpected text after this element ({exc.msg})", element)
        pos += 1
        element += 1


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _describe_previous(element: int, last: Any) -> str:
    if element == 0:
        return "no complete element before it (truncated or not a result file)"
    if isinstance(last, dict) and "task_id" in last:
        return (f"truncated: the last complete record is {element - 1} "
                f"(task_id {last['task_id']}, trial {last.get('trial')})")
    return f"truncated: the last complete element is {element - 1}"


def read_result_file(path: Path | str) -> tuple[RunFile | None, list[Problem]]:
    """Parse a result file without giving up on the first bad record.

    Unlike `PersonalWAB.results.read_run_file`, which stops at the first
    problem, this returns whatever it could read so every problem can be listed.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, [Problem(ERROR, "the file does not exist")]
    except OSError as exc:
        return None, [Problem(ERROR, f"cannot read the file ({exc})")]
    if not raw.strip():
        return None, [Problem(ERROR, "the file is empty")]
    try:  # the standard parser also accepts NaN/Infinity, which the record checks then report
        content = decode_result_file(raw)
    except UnicodeDecodeError as exc:
        return None, [Problem(ERROR, f"not UTF-8 text ({exc})")]
    except json.JSONDecodeError as exc:
        return None, [_locate_json_break(raw.decode("utf-8"), exc)]
    if not isinstance(content, list):
        return None, [Problem(ERROR, f"a result file is a JSON list, got {type(content).__name__}")]
    return split_result_file(path, content), []


class _Checker:
    """Collects the problems of one file; one method per aspect of the format."""

    def __init__(self, result: RunFile, data: Any | None):
        self.result = result
        self.data = data
        self.problems: list[Problem] = []
        self.flags: list[str] = []
        split = result.run_args.get("task_split", "test")
        self.split = split if isinstance(split, str) else repr(split)
        self.split_tasks = data.split(self.split) if data is not None and self.split in data.tasks else None

    def add(self, severity: str, message: str, element: int | None = None, record: Any = None) -> None:
        task_id = trial = None
        if isinstance(record, dict):
            task_id, trial = record.get("task_id"), record.get("trial")
        self.problems.append(Problem(severity, message, element, task_id, trial))

    def flag(self, name: str) -> None:
        if name not in self.flags:
            self.flags.append(name)

    # -- run args -------------------------------------------------------------------------
    def check_run_args(self) -> None:
        result = self.result
        if result.header is None:
            if self._headless_header():
                return
            self.flag("interrupted")
            self.add(WARNING, "interrupted run: records but no header; finish it with run.py --resume_from")
            return
        run_args = result.header.get("run_args")
        if not isinstance(run_args, dict):
            self.add(ERROR, "run_args is not an object", 0)
            return
        if not run_args:
            self._unknown_settings("run_args is empty")
            return
        if "data_source" not in run_args:
            self.add(NOTE, "run_args has no data_source (original release format): treated as official data")
        elif is_synthetic(run_args):
            self.flag("synthetic")
            self.add(WARNING, f"run on {run_args['data_source']}: not comparable to the paper or to official runs")
        label, reasons = protocol_label(run_args)
        if label == CUSTOM:
            self.flag(CUSTOM)
            self.add(WARNING, f"custom run ({'; '.join(reasons)}): not comparable with standard runs or the paper")
        record = run_args.get("protocol")
        if isinstance(record, dict) and record.get("standard") is not None and \
                bool(record.get("standard")) != (label == STANDARD):
            self.add(ERROR, f"run_args.protocol.standard is {record.get('standard')!r} but its texts and departures "
                            f"make the run {label}", 0)
        backend = run_args.get("search_backend")
        if backend is None:
            self.add(NOTE, "run_args has no search_backend (original release format): backend unknown")
        elif backend != OFFICIAL_BACKEND:
            self.flag(f"backend {backend}")
            self.add(WARNING, f"search backend {backend!r} is not the official Lucene BM25")
        if self.split not in OFFICIAL_SPLIT_SIZES:
            self.add(ERROR, f"run_args.task_split {self.split!r} is not 'test' or 'train'", 0)
        if self.data is not None and "data_source" in run_args and run_args["data_source"] != self.data.source:
            self.add(WARNING, f"the run used {run_args['data_source']} but --data_dir holds {self.data.source}")
        shard = run_args.get("shard")
        if shard is not None:
            self.flag(f"shard {shard}")
            self.flag("partial split")
            self.add(WARNING, f"shard {shard} of a run, not a whole run: join all its shards with pwab leaderboard "
                              "merge")
            if self.shard_task_ids() is None:
                self.add(ERROR, "run_args.shard_plan does not list the shard's task ids", 0)

    def shard_task_ids(self) -> list[int] | None:
        """The tasks a shard's run holds (`run_args.shard_plan`); None for a whole run or a plan unreadable."""
        plan = self.result.run_args.get("shard_plan")
        task_ids = plan.get("task_ids") if isinstance(plan, dict) else None
        if self.result.run_args.get("shard") is None or not isinstance(task_ids, list) \
                or not all(_is_int(t) for t in task_ids):
            return None
        return task_ids

    def check_labels(self) -> None:
        """The labels (data origin, standard or custom) derived from run_args and the data, never
        taken as written: keys they need that are gone, texts named the release's with the
        project's digest, a departure the settings show that the protocol record leaves out, or a
        data source other than that of the data with the recorded fingerprint are errors."""
        run_args = self.result.run_args
        if not run_args:
            return  # reported by check_run_args
        lacking = label_keys_lacking(run_args)
        if lacking:
            self.flag(CUSTOM)
            self.add(ERROR, f"cannot derive label: run_args lacks {', '.join(lacking)} (settings removed by hand?)", 0)
            return
        from PersonalWAB.runner.labels import setting_departures

        label, _ = protocol_label(run_args)
        record = run_args.get("protocol")
        stored = record.get("departures") if isinstance(record, dict) else None
        if label == STANDARD or isinstance(stored, list):
            left_out = [d for d in setting_departures(run_args) if d not in (stored or [])]
            if left_out:
                self.flag(CUSTOM)
                self.add(ERROR, f"labelled {label} but its settings depart from the release: {'; '.join(left_out)} "
                                "(missing from run_args.protocol.departures)", 0)
        if isinstance(record, dict):
            self._check_texts_label(str(record.get("texts")), run_args.get("protocol_texts_digest"))
        if self.data is not None and run_args.get("data_fingerprint") == self.data.fingerprint \
                and run_args.get("data_source") != self.data.source:
            self.add(ERROR, f"run_args.data_source is {run_args.get('data_source')!r} but the data it ran on "
                            f"(--data_dir, the same fingerprint) is {self.data.source}", 0)

    def _check_texts_label(self, name: str, digest: Any) -> None:
        """Texts named the release's must not have the project's digest (nor, when a pinned
        release pack is placed, another digest than its texts')."""
        from PersonalWAB.protocol import project_protocol

        if not name.startswith("release@"):
            return
        if digest == project_protocol().texts_digest:
            self.flag(CUSTOM)
            self.add(ERROR, f"run_args.protocol.texts is {name!r} but protocol_texts_digest {digest} is the "
                            "project's own texts (relabelled by hand?)", 0)
            return
        release = _placed_release_protocol()
        if release is not None and name == release.name and digest != release.texts_digest:
            self.flag(CUSTOM)
            self.add(ERROR, f"run_args.protocol.texts is {name!r} but protocol_texts_digest {digest} is not its "
                            f"texts' ({release.texts_digest})", 0)

    def _unknown_settings(self, what: str) -> None:
        """A file whose settings were removed says nothing of how it was run: invalid, never standard."""
        self.flag(CUSTOM)
        self.add(ERROR, f"{what}: the run's settings are unknown, so it can be neither checked nor labelled "
                        "standard", 0)

    def _headless_header(self) -> bool:
        """Whether the file begins with a header (or checkpoint) that lost its run_args; reported if so."""
        first = self.result.records[0] if self.result.records else None
        if self.result.checkpoint is not None and not self.result.run_args:
            self._unknown_settings("the checkpoint's run_args is empty")
            return True
        if isinstance(first, dict) and "task_id" not in first and ("results" in first or "total cost" in first):
            self._unknown_settings("element 0 is a header without run_args")
            return True
        return False

    def split_size(self) -> int | None:
        if self.split_tasks is not None:
            return len(self.split_tasks)
        if not is_synthetic(self.result.run_args):
            return OFFICIAL_SPLIT_SIZES.get(self.split)
        return None

    def task_range(self) -> tuple[int, int | None]:
        """The run's [start, end) over the split; end is None when it cannot be known."""
        run_args = self.result.run_args
        start = run_args.get("start_index", 0)
        end = run_args.get("end_index", -1)
        start = start if _is_int(start) and start >= 0 else 0
        size = self.split_size()
        if not _is_int(end) or end == -1:
            return start, size
        return start, end if size is None else min(end, size)

    def check_range(self) -> None:
        if self.result.header is None:
            return
        run_args = self.result.run_args
        start, end = self.task_range()
        size = self.split_size()
        if size is None:
            self.add(NOTE, f"size of the {self.split} split unknown for synthetic data: "
                           "pass --data_dir to check task ids and targets")
        elif self.split_tasks is None:
            self.add(NOTE, "no --data_dir: task types and targets not checked against the split")
        declared_end = run_args.get("end_index", -1)
        for key in ("start_index", "end_index"):
            if key in run_args and not _is_int(run_args[key]):  # a boolean is no task index (True would read as 1)
                self.add(ERROR, f"run_args.{key} {run_args[key]!r} is not a task index: the tasks the run covers are "
                                "unknown", 0)
        if start > 0 or (end is not None and size is not None and end < size) or (
                size is None and _is_int(declared_end) and declared_end != -1):
            self.flag("partial split")
            last = "?" if end is None else end - 1  # inclusive, as summarize names a run's tasks
            self.add(WARNING, f"partial split: tasks {start}-{last} of the "
                              f"{self.split} split{'' if size is None else f' ({size} tasks)'}")

    # -- records --------------------------------------------------------------------------
    def check_records(self) -> bool:
        """Check every record; True when all are well-formed enough to recompute statistics."""
        start, end = self.task_range()
        size = self.split_size()
        num_trials = self.result.run_args.get("num_trials")
        multi_turn = run_track(self.result) == "multi-turn"
        seen: dict[tuple[int, int], int] = {}
        shard_ids = set(self.shard_task_ids() or ())
        all_ok = True
        for offset, record in enumerate(self.result.records):
            element = offset + self.result.first_element
            if not self._check_record_shape(record, element, multi_turn):
                all_ok = False
                continue
            task_id, trial = record["task_id"], record["trial"]
            previous = seen.setdefault((trial, task_id), element)
            if previous != element:
                self.add(ERROR, f"duplicate: task {task_id} of trial {trial} is already record {previous}",
                         element, record)
            if task_id < 0 or (size is not None and task_id >= size):
                limit = f"the {self.split} split has {size} tasks" if size is not None else "ids start at 0"
                self.add(ERROR, f"task_id {task_id} is out of range: {limit}", element, record)
            elif task_id < start or (end is not None and task_id >= end):
                self.add(ERROR, f"task_id {task_id} is outside the run's range {start}-{end}", element, record)
            elif shard_ids and task_id not in shard_ids:
                self.add(ERROR, f"task_id {task_id} is not a task of shard {self.result.run_args.get('shard')} "
                                "(run_args.shard_plan)", element, record)
            elif self.split_tasks is not None:
                self._check_against_split(record, element, self.split_tasks)
            if _is_int(num_trials) and not 0 <= trial < num_trials:
                self.add(ERROR, f"trial {trial} is outside 0-{num_trials - 1} (run_args.num_trials)", element, record)
            if "error" in record["info"]:
                self.flag("errored records")
                self.add(WARNING, f"the task ended in an error ({str(record['info']['error'])[:200]}); "
                                  "resume the run to retry it", element, record)
        self._check_coverage(seen, start, end)
        return all_ok

    def _check_record_shape(self, record: Any, element: int, multi_turn: bool) -> bool:
        """The shared record checks (`record_faults`, the ones resume applies too); True when none fails."""
        faults = record_faults(record)
        for fault in faults:
            self.add(ERROR, fault, element, record)
        if isinstance(record, dict) and isinstance(record.get("action_acc"), list) and not multi_turn \
                and len(record["action_acc"]) > 1:
            self.add(WARNING, f"{len(record['action_acc'])} attempts in a single-turn run (it ends at the first)",
                     element, record)
        return not faults

    def _check_against_split(self, record: Mapping[str, Any], element: int, split_tasks: list[Task]) -> None:
        expected = split_tasks[record["task_id"]]
        got = record["info"]["task"]
        target = got["target"]
        if isinstance(target, dict):  # tolerate a full target object instead of its ASIN
            target = (target.get("product_info") or target).get("parent_asin")
        want_target = expected["target"]["product_info"]["parent_asin"]
        mismatches = [
            f"{name} {have!r} (the {self.split} split has {want!r})"
            for name, have, want in (
                ("type", got["type"], expected["type"]),
                ("target", target, want_target),
                ("user_id", got["user_id"], expected["user_id"]),
                ("instruction", got["task"], expected["task"]),
            )
            if have != want
        ]
        if mismatches:
            self.add(ERROR, f"does not match task {record['task_id']} of the {self.split} split: "
                            + "; ".join(mismatches), element, record)

    def _check_coverage(self, seen: dict[tuple[int, int], int], start: int, end: int | None) -> None:
        shard_ids = self.shard_task_ids()
        if self.result.header is None or (end is None and shard_ids is None):
            return
        expected = shard_ids if shard_ids is not None else range(start, cast(int, end))
        where = (f"of shard {self.result.run_args.get('shard')}" if shard_ids is not None
                 else f"in range {start}-{end}")
        trials = self.result.run_args.get("num_trials", 1)
        for trial in range(trials if _is_int(trials) and trials > 0 else 1):
            missing = [t for t in expected if (trial, t) not in seen]
            if missing:
                self.flag("partial split")
                shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
                self.add(WARNING, f"trial {trial} has no record for {len(missing)} of the {len(expected)} tasks "
                                  f"{where} (task ids {shown})")

    # -- header ---------------------------------------------------------------------------
    def check_header(self, statistics: dict[str, dict[str, float]], total_cost: float) -> None:
        header = self.result.header
        if header is None:
            return
        missing = [key for key in HEADER_KEYS if key not in header]
        if missing:
            self.add(ERROR, f"header lacks {', '.join(missing)}", 0)
            return
        if not _is_number(header["total cost"]) or not _close(header["total cost"], total_cost):
            self.add(ERROR, f"header 'total cost' = {header['total cost']!r} but the records cost {total_cost!r}", 0)
        results = header["results"]
        if not isinstance(results, dict):
            self.add(ERROR, "header results is not an object", 0)
            return
        empty = dict.fromkeys(STAT_KEYS, 0)
        for group in [*statistics, *(g for g in results if g not in statistics)]:
            want = statistics.get(group, empty)
            have = results.get(group)
            if have is None:
                if want["total_count"]:
                    self.add(ERROR, f"header results lacks {group!r} ({want['total_count']} records)", 0)
                continue
            if not isinstance(have, dict):
                self.add(ERROR, f"header results.{group} is not an object", 0)
                continue
            for key in STAT_KEYS:
                value = have.get(key)
                if not _is_number(value) or not _close(value, want[key]):
                    self.add(ERROR, f"header results.{group}.{key} = {value!r} but the records give "
                                    f"{want[key]!r} (tampered or stale header)", 0)


    def check_trials(self, trials: dict[str, Any] | None) -> None:
        """The header's spread across trials must be what the records give (it is optional:
        the release's format, and this project's before it, have none)."""
        header = self.result.header
        if header is None:
            return
        have = header.get(TRIALS_KEY)
        if have is None:
            if trials is not None:
                self.add(WARNING, f"the header has no {TRIALS_KEY!r} (the spread across the {trials['num_trials']} "
                                  "trials, added by newer versions); summarize computes it from the records", 0)
            return
        if trials is None:
            self.add(ERROR, f"header {TRIALS_KEY!r} is present but run_args.num_trials is below 2", 0)
            return
        for path, value, want in list(_differences(have, trials, TRIALS_KEY))[:5]:
            self.add(ERROR, f"header {path} = {_shown(value)} but the records give {_shown(want)} "
                            "(tampered or stale header)", 0)


    def check_audit(self, audit: dict[str, Any]) -> None:
        """Privileged inputs that reached the agent are flagged; the header's audit, where it has one
        (files written before it have none), must be what the records give."""
        for line in privileged_flags(audit):
            self.flag(PRIVILEGED)
            self.add(WARNING, f"privileged input: {line}")
        header = self.result.header
        if header is None or header.get(AUDIT_KEY) is None:
            return
        for path, value, want in list(_differences(header[AUDIT_KEY], audit, AUDIT_KEY))[:5]:
            self.add(ERROR, f"header {path} = {_shown(value)} but the records give {_shown(want)} "
                            "(tampered or stale header)", 0)


def _differences(have: Any, want: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """(path, value, expected) wherever `have` differs from `want`; numbers within TOLERANCE agree."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            yield path, have, want
            return
        for key in [*want, *(k for k in have if k not in want)]:
            yield from _differences(have.get(key), want.get(key), f"{path}.{key}")
    elif isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            yield path, have, want
            return
        for i, (a, b) in enumerate(zip(have, want)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif _is_number(want):
        if not _is_number(have) or not _close(have, want):
            yield path, have, want
    elif have != want:
        yield path, have, want


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _placed_release_protocol() -> Any | None:
    """The pinned release pack when one is placed (None otherwise, or when it cannot be loaded)."""
    from PersonalWAB.protocol import DEFAULT_PACK, load_protocol

    if not DEFAULT_PACK.is_file():
        return None
    try:
        protocol = load_protocol()
    except (DataError, OSError):
        return None
    return protocol if protocol.is_pinned_release else None


def validate_result(result: RunFile, data: Any | None = None) -> ValidationReport:
    """Validate a parsed file; `data` (a BenchmarkData) enables the checks against the split."""
    report = ValidationReport(result.path, result=result)
    checker = _Checker(result, data)
    checker.check_run_args()
    checker.check_labels()
    checker.check_range()
    records_ok = checker.check_records()
    if not result.records:
        checker.add(ERROR, "the file holds no task records")
    elif records_ok:
        report.statistics = compute_statistics(result.records)
        report.total_cost = sum(record_cost(r) for r in result.records)
        report.format_errors = count_format_errors(result.records)
        checker.check_header(report.statistics, report.total_cost)
        trials = result.run_args.get("num_trials", 1)
        report.trials = trial_statistics(result.records, trials if _is_int(trials) else 1,
                                         solved_threshold_of(result.run_args))
        checker.check_trials(report.trials)
        report.audit = run_summary(result.run_args, result.records)
        checker.check_audit(report.audit)
    else:
        checker.add(NOTE, "header statistics not checked: some records are malformed")
    report.problems, report.flags = checker.problems, checker.flags
    return report


def validate_file(path: Path | str, data: Any | None = None) -> ValidationReport:
    """Read and validate one result file; never raises for a bad file."""
    result, problems = read_result_file(path)
    if result is None:
        return ValidationReport(Path(path), problems=problems)
    return validate_result(result, data)


class InvalidResultFile(DataError):
    """A result file a command refuses: unreadable, or invalid by `validate`'s checks."""


def refusal(report: ValidationReport) -> str:
    """One line: the file, its first error and where, and how many more `validate` lists."""
    errors = [problem for problem in report.problems if problem.severity == ERROR]
    more = f" (and {len(errors) - 1} more errors: run validate for all)" if len(errors) > 1 else ""
    return f"{report.path}: invalid result file: {errors[0].where()}{errors[0].message}{more}"


def read_valid(path: Path | str, data: Any | None = None) -> ValidationReport:
    """The one reader of result files every command uses (summarize, compare, plot, report, pack):
    the file validated, or InvalidResultFile (a DataError, exit status 2) naming its first error,
    so an invalid file is refused the same way everywhere."""
    report = validate_file(path, data)
    if not report.valid:
        raise InvalidResultFile(refusal(report))
    return report
