"""The task pool: a run's jobs on worker threads, their records handed back as they finish."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

R = TypeVar("R")  # what a task run gives back (a Record)


def finished_records(jobs: list[tuple[int, int]], run_one: Callable[[int, int], R],
                     workers: int) -> Iterator[R]:
    """Run the jobs on `workers` threads and yield each record as it finishes.

    The threads are daemons and the caller only ever waits on a queue, so Ctrl-C (or a
    fatal error) stops the run at once: tasks still in flight are abandoned, not awaited
    (they are unfinished and run again on resume). An exception a task lets through
    (data errors, fatal model errors, an interrupt) is raised here and stops the rest.
    """
    pending: queue.Queue[tuple[int, int]] = queue.Queue()
    for job in jobs:
        pending.put(job)
    done: queue.Queue[R | BaseException] = queue.Queue()  # a record, or what a task let through
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                trial, task_id = pending.get_nowait()
            except queue.Empty:
                return
            try:
                done.put(run_one(trial, task_id))
            except BaseException as exc:  # handed to the caller, which stops the run
                done.put(exc)
                return

    for number in range(min(workers, len(jobs))):
        threading.Thread(target=work, name=f"task-worker-{number}", daemon=True).start()
    try:
        for _ in jobs:
            outcome = done.get()
            if isinstance(outcome, BaseException):
                raise outcome
            yield outcome
    finally:
        stop.set()
