"""Which past behaviours an agent may see for a task (`--agent_memory`).

Only behaviours strictly before the task's timestamp are ever eligible, so no
target (or anything after it) can leak into the memory.
"""

from __future__ import annotations

import random
from typing import Any

from PersonalWAB.data.loader import BenchmarkData

MEMORY_MODES = ("none", "last", "random")


def retrieve_memory(data: BenchmarkData, task: dict[str, Any], mode: str, length: int,
                    seed: int = 0) -> list[dict[str, Any]]:
    """Up to `length` behaviours; `last` is most recent first, `random` is seeded per task."""
    if mode not in MEMORY_MODES:
        raise ValueError(f"unknown memory {mode!r}; expected one of {MEMORY_MODES}")
    if mode == "none" or length <= 0:
        return []
    past = data.behaviours_before(task["user_id"], task["timestamp"])
    if mode == "last":
        return past[::-1][:length]
    rng = random.Random(f"{seed}:{task['user_id']}:{task['timestamp']}")
    return rng.sample(past, min(length, len(past)))
