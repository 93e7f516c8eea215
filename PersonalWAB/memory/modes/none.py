"""`none`: no memory; nothing is appended to the prompt."""

from __future__ import annotations

from PersonalWAB.memory.base import Behaviours, MemoryRequest


def select(request: MemoryRequest) -> Behaviours:
    return []


def render(request: MemoryRequest, behaviours: Behaviours) -> str | None:
    return None
