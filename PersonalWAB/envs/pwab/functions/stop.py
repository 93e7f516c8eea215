"""stop: the agent says it has finished the task."""

from __future__ import annotations

from PersonalWAB.envs.pwab.functions.base import ToolContext


def stop(data: ToolContext) -> str:
    return data.protocol.text("stop.result")
