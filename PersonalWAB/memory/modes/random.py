"""`random`: `length` behaviours drawn from the newest-first list, as full numbered blocks.

The release draws from one generator seeded once per run (`--seed`, default 2024), task
after task; `ReleaseRandomMemory` replays exactly that sequence for the run's task order.
Without a run's draw (a single call), the draw is seeded by `seed` and the task.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.memory.base import Behaviours, MemoryRequest, newest_first, numbered_memory, past_behaviours
from PersonalWAB.schema_types import Task

HEADERS = ("memory.random.header", "react.memory.random.header")


class ReleaseRandomMemory:
    """`random` memory as the release draws it: one `random.Random(seed)` consumed by
    `sample(newest_first(past), min(length, len(past)))` for each task run, in the run's
    order (trials in turn, tasks in index order). Precomputed, so concurrency cannot
    change which task gets which draw."""

    def __init__(self, data: BenchmarkData, tasks: list[Task], jobs: Iterable[tuple[int, int]],
                 length: int, seed: int):
        rng = random.Random(seed)
        self._draws: dict[tuple[int, int], Behaviours] = {}
        for trial, task_index in jobs:
            past = newest_first(past_behaviours(data, tasks[task_index]))
            self._draws[(trial, task_index)] = rng.sample(past, min(length, len(past)))

    def draw(self, trial: int, task_index: int | None) -> Behaviours | None:
        return None if task_index is None else self._draws.get((trial, task_index))


def select(request: MemoryRequest) -> Behaviours:
    if request.random_draw is not None:
        return request.random_draw
    task, past = request.task, request.past
    rng = random.Random(f"{request.seed}:{task['user_id']}:{task['timestamp']}")
    return rng.sample(newest_first(past), min(request.length, len(past)))


def render(request: MemoryRequest, behaviours: Behaviours) -> str:
    return numbered_memory(request, HEADERS, behaviours)
