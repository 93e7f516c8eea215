"""`interecagent`: the most recent behaviours (as `last` selects them), then the user's
like / dislike / expect lists from the run's `InterecMemoryStore` (`memory/interec.py`)."""

from __future__ import annotations

from PersonalWAB.memory.base import Behaviours, MemoryRequest


def render(request: MemoryRequest, behaviours: Behaviours) -> str:
    protocol = request.protocol
    return protocol.interecagent_memory([protocol.interecagent_block(b) for b in behaviours],
                                        request.preferences or {})
