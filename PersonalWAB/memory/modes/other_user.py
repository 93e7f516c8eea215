"""`other_user`: a control arm. As many behaviours as this user's `last` memory would hold, but of
another user (newest first, before the task's timestamp), shown as `last` shows them. An agent that
scores as well with them as with `last` uses *some* history, not this user's. A purchase of the
task's target by the other user is left out, so the control never shows the answer.

The other user is drawn for each task by a generator seeded with `--seed`, the user and the task's
time, among the users with at least that many behaviours before the task (the one with the most
when none has enough): the same run always shows the same history.
"""

from __future__ import annotations

import random

from PersonalWAB.memory.base import Behaviours, MemoryRequest, newest_first
from PersonalWAB.memory.modes import last

HEADERS = last.HEADERS  # shown as `last` is, so the arm differs from it only in whose history it holds


def other_user(request: MemoryRequest, wanted: int) -> str:
    """The user whose history stands in for this user's (never this user)."""
    data, task = request.data, request.task
    users = sorted(user for user in data.histories if user != task["user_id"])
    order = random.Random(f"{request.seed}:{task['user_id']}:{task['timestamp']}").sample(users, len(users))
    sizes = {user: len(data.behaviours_before(user, task["timestamp"])) for user in order}
    return next((user for user in order if sizes[user] >= wanted), max(order, key=lambda user: sizes[user]))


def select(request: MemoryRequest) -> Behaviours:
    wanted = min(request.length, len(request.past))
    if wanted == 0 or len(request.data.histories) < 2:
        return []
    other = other_user(request, wanted)
    target = request.task["target"]["product_info"]["parent_asin"]
    earlier = request.data.behaviours_before(other, request.task["timestamp"])
    return newest_first([b for b in earlier if b["product_info"]["parent_asin"] != target])[:wanted]
