"""`recmind`: the most recent behaviours (as `last` selects them) in RecMind's compact form."""

from __future__ import annotations

from PersonalWAB.memory.base import Behaviours, MemoryRequest


def render(request: MemoryRequest, behaviours: Behaviours) -> str:
    protocol = request.protocol
    return protocol.numbered_memory("memory.recmind.header",
                                    [protocol.recmind_block(b, i) for i, b in enumerate(behaviours)])
