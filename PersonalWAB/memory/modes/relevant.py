"""`relevant`: the `length` behaviours whose full text (`Protocol.behaviour_block`) is
closest to the instruction by MiniLM cosine, best first (from the on-disk cache)."""

from __future__ import annotations

from PersonalWAB.memory.base import Behaviours, MemoryRequest, most_relevant, numbered_memory

HEADERS = ("memory.relevant.header", "react.memory.relevant.header")


def select(request: MemoryRequest) -> Behaviours:
    return most_relevant(request.data, request.task, request.past, request.length, request.protocol)


def render(request: MemoryRequest, behaviours: Behaviours) -> str:
    return numbered_memory(request, HEADERS, behaviours)
