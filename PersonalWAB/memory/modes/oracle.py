"""`oracle`: an upper bound. The `length` behaviours of the user's own past (before the task) closest
by MiniLM cosine to the *target* (the purchase the task is about), best first, shown as `relevant`
shows its list: the best any selection of this user's history could give an agent. It reads the
answer, so its runs measure the memory's ceiling, never a method.

The target's vector is its behaviour's row of the behaviour cache (the task's own purchase is in the
user's history); a target missing from the history is encoded from its memory block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from PersonalWAB.memory.base import Behaviours, MemoryRequest, most_similar_to
from PersonalWAB.memory.modes import relevant
from PersonalWAB.schema_types import Behaviour

HEADERS = relevant.HEADERS  # shown as `relevant` is: only the ranking differs


def target_vector(request: MemoryRequest, embeddings: Any) -> np.ndarray:
    """The target purchase's MiniLM vector, from the user's cached rows when the history holds it."""
    task = request.task
    asin = task["target"]["product_info"]["parent_asin"]
    history = request.data.histories.get(task["user_id"], [])
    own = next((i for i, b in enumerate(history) if b["product_info"]["parent_asin"] == asin
                and b["review"]["timestamp"] == task["timestamp"]), None)
    if own is not None:
        return np.asarray(embeddings.behaviours(task["user_id"])[own])
    target: Behaviour = {**task["target"], "split": "test"}
    return np.asarray(embeddings.instruction(request.protocol.behaviour_block(target, 0)))


def select(request: MemoryRequest) -> Behaviours:
    return most_similar_to(request.data, request.task, request.past, request.length, request.protocol,
                           lambda embeddings: target_vector(request, embeddings))
