"""Progress a user can see: the bar of a benchmark run (tasks done of all, live accuracy,
errors and format errors, ETA), the first error of each kind, an elapsed-time bar for
opaque steps, and bar-safe log lines.

The run's counts include the records kept from `--resume_from`, so the bar and its
accuracies describe the whole result file being built; the ETA comes from this
session's pace. Bars go to stderr (the results table stays alone on stdout).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tqdm import tqdm

from PersonalWAB.metrics import has_format_error, is_errored, task_score
from PersonalWAB.schema_types import Record


class RunProgress:
    """A tqdm bar fed with finished task records."""

    def __init__(self, total: int, kept: list[Record]):
        self._function = self._result = 0.0
        self._count = self._errors = self._format_errors = 0
        self._bar = tqdm(total=total, initial=len(kept), desc="tasks", unit="task", file=sys.stderr,
                         dynamic_ncols=True)
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
    bar = tqdm(total=None, desc=description, file=sys.stderr, bar_format="{desc}: {elapsed} elapsed")
    done = threading.Event()

    def tick() -> None:
        while not done.wait(1.0):
            bar.refresh()

    ticker = threading.Thread(target=tick, name="progress-stage", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bar.close()
