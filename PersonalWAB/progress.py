"""Progress a user can see: the bar of a benchmark run (tasks done of all, live accuracy,
errors, ETA), an elapsed-time bar for opaque build steps, and bar-safe log lines.

The run's counts include the records kept from `--resume_from`, so the bar and its
accuracies describe the whole result file being built; the ETA comes from this
session's pace. Bars go to stderr (the results table stays alone on stdout).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

from tqdm import tqdm

from PersonalWAB.metrics import is_errored, task_score


class RunProgress:
    """A tqdm bar fed with finished task records."""

    def __init__(self, total: int, kept: list[dict[str, Any]]):
        self._function = self._result = 0.0
        self._count = self._errors = 0
        self._bar = tqdm(total=total, initial=len(kept), desc="tasks", unit="task", file=sys.stderr,
                         dynamic_ncols=True)
        for record in kept:
            self._count_record(record)
        self._show()

    def _count_record(self, record: dict[str, Any]) -> None:
        function, result = task_score(record["action_acc"], record["res_acc"])
        self._function += function
        self._result += result
        self._count += 1
        self._errors += is_errored(record)

    def _show(self) -> None:
        if self._count:
            self._bar.set_postfix_str(f"Function Acc {self._function / self._count:.3f}, "
                                      f"Result Acc {self._result / self._count:.3f}, errors {self._errors}",
                                      refresh=False)

    def update(self, record: dict[str, Any]) -> None:
        """One more finished task."""
        self._count_record(record)
        self._show()
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> "RunProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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
