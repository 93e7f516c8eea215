"""`last`: the `length` most recent behaviours, newest first, as full numbered blocks."""

from __future__ import annotations

from PersonalWAB.memory.base import Behaviours, MemoryRequest, newest_first, numbered_memory

HEADERS = ("memory.last.header", "react.memory.last.header")


def select(request: MemoryRequest) -> Behaviours:
    return newest_first(request.past)[:request.length]


def render(request: MemoryRequest, behaviours: Behaviours) -> str:
    return numbered_memory(request, HEADERS, behaviours)
