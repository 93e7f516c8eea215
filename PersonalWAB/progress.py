"""Progress a user can see: the bar of a benchmark run (tasks done of all, live accuracy,
errors and format errors, ETA), the first error of each kind, an elapsed-time bar for
opaque steps, the announcement of a one-time build, and bar-safe log lines.

Every bar comes from `progress_bar`: on a terminal a bar redrawn in place; when stderr is
a file or a pipe (a job log) one plain line every `LINE_INTERVAL_S` seconds instead of
`\r` redraws that a log would keep as one endless line; nothing under `set_quiet(True)`.

The run's counts include the records kept from `--resume_from`, so the bar and its
accuracies describe the whole result file being built; the ETA comes from this
session's pace. Bars go to stderr (the results table stays alone on stdout).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from PersonalWAB.metrics import has_format_error, is_errored, task_score
from PersonalWAB.schema_types import Record

MEASURED_CORES = 2  # the cores of the machine the build rates were measured on
ANNOUNCE_MIN_S = 5.0  # a build expected to take less is not announced
LINE_INTERVAL_S = 5.0  # seconds between the progress lines written to a file or a pipe
LINE_FORMAT = "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
_settings = {"quiet": False}


def set_quiet(quiet: bool) -> None:
    """Show no progress bar or progress line from now on (`--quiet`), or show them again."""
    _settings["quiet"] = quiet


class _LineStream:
    """Where a bar draws when stderr is not a terminal: each redraw (a `\r` and the bar)
    becomes one line, the blank redraws that clear a bar and a repeat of the last line none."""

    def __init__(self, stream: Any):
        self._stream = stream
        self._last = ""

    def write(self, text: str) -> int:
        line = text.replace("\r", "").replace("\x1b[A", "").rstrip()
        if line and line != self._last:
            self._stream.write(line + "\n")
            self._last = line
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def progress_bar(**options: Any) -> tqdm:
    """A tqdm bar on stderr (tqdm's `options`), drawn for where stderr goes (see the module
    docstring); disabled under `set_quiet(True)`."""
    stream = sys.stderr
    options["disable"] = options.get("disable", False) or _settings["quiet"]
    if not stream.isatty():
        # a log keeps each line, so the last one stays too (a bar that would vanish on a terminal)
        options.update(file=_LineStream(stream), mininterval=LINE_INTERVAL_S, dynamic_ncols=False, leave=True)
        options.setdefault("bar_format", LINE_FORMAT if options.get("total") else "{desc}: {n_fmt} {unit} "
                                         "[{elapsed}, {rate_fmt}{postfix}]")
    else:
        options.setdefault("file", stream)
    return tqdm(**options)


def announce_build(what: str, items: int, unit: str, per_second: float, prebuild: str,
                   log: Callable[[str], None] | None = None) -> None:
    """Say, before a one-time build starts, what it builds, for how many items, about how long
    it takes and the command that builds it ahead of a run. `per_second`: the items per second
    measured on the 2-core machine of docs/performance.md, scaled here by this machine's cores
    (what a run needs quickly is not announced)."""
    seconds = items / per_second * MEASURED_CORES / max(1, os.cpu_count() or 1)
    if seconds < ANNOUNCE_MIN_S:
        return
    (log or log_line)(f"one-time build: {what}, {items:,} {unit}, about {duration_text(seconds)} on this "
                      f"machine's {os.cpu_count() or 1} idle CPU cores (more when they are busy); kept for later "
                      f"runs; to build it ahead: {prebuild}")


def prebuild_command(data_dir: Path | str, flags: str = "") -> str:
    """The command that builds a data folder's artefacts ahead of a run (`flags`: which ones)."""
    return f"pwab build --data_dir {shlex.quote(str(data_dir))}" + (f" {flags}" if flags else "")


def duration_text(seconds: float) -> str:
    """A rough duration a person reads at a glance."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class RunProgress:
    """A tqdm bar fed with finished task records."""

    def __init__(self, total: int, kept: list[Record]):
        self._function = self._result = 0.0
        self._count = self._errors = self._format_errors = 0
        self._bar = progress_bar(total=total, initial=len(kept), desc="tasks", unit="task", dynamic_ncols=True)
        for record in kept:
            self._count_record(record)
        self._show()

    def _count_record(self, record: Record) -> None:
        function, result = task_score(record["action_acc"], record["res_acc"])
        self._function += function
        self._result += result
        self._count += 1
        self._errors += is_errored(record)
        self._format_errors += has_format_error(record)

    def _show(self) -> None:
        if self._count:
            self._bar.set_postfix_str(self.postfix(), refresh=False)

    def postfix(self) -> str:
        """The live numbers after the bar."""
        return (f"Function Acc {self._function / self._count:.3f}, Result Acc {self._result / self._count:.3f}, "
                f"errors {self._errors}, format errors {self._format_errors}")

    def update(self, record: Record) -> None:
        """One more finished task."""
        self._count_record(record)
        self._show()
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FirstErrors:
    """Says the first error of each kind a run meets, without --verbose: a run that fails
    every task the same way shows why at once, not only in the result file."""

    def __init__(self, log: Callable[[str], None]):
        self._log = log
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def report(self, task_id: int, exc: BaseException) -> None:
        """Log `exc` if no error of its kind (class, and the model client's error class) was logged yet."""
        kind = f"{type(exc).__name__}/{getattr(exc, 'error_class', '')}"
        with self._lock:
            if kind in self._seen:
                return
            self._seen.add(kind)
        self._log(f"task {task_id} ended in an error (first of its kind; recorded, and --resume_from runs it "
                  f"again): {type(exc).__name__}: {exc}")


def log_line(line: str) -> None:
    """Print a log line without tearing an active progress bar."""
    tqdm.write(line)


@contextlib.contextmanager
def stage(description: str) -> Iterator[None]:
    """An elapsed-time bar for a step that reports no progress of its own (a JVM indexer):
    the user sees that it is running and for how long."""
    bar = progress_bar(total=None, desc=description, bar_format="{desc}: {elapsed} elapsed")
    done = threading.Event()
    interval = 1.0 if sys.stderr.isatty() else LINE_INTERVAL_S

    def tick() -> None:
        while not done.wait(interval):
            bar.refresh()

    ticker = threading.Thread(target=tick, name="progress-stage", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bar.close()
