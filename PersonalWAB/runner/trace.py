"""What `--verbose` prints of a finished task: each action the agent took and the start of
what came back, read off the record's trajectory, so any agent (tool calls, ReAct text,
scripted) is shown the same way and concurrent tasks never interleave their lines."""

from __future__ import annotations

from typing import Any

from PersonalWAB.schema_types import Record

SHOWN = 160  # characters kept of an action or an observation


def cut(text: Any, width: int = SHOWN) -> str:
    """One line of at most `width` characters (whitespace folded)."""
    line = " ".join(str(text).split())
    return line if len(line) <= width else f"{line[:width - 3]}..."


def call_text(call: Any) -> str:
    """A tool call as name(arguments)."""
    function = (call.get("function") or {}) if isinstance(call, dict) else {}
    return f"{function.get('name')}({function.get('arguments', '')})"


def trace_lines(record: Record) -> list[str]:
    """`-> action` and `<- observation` lines of a task's trajectory, after its opening
    system and user messages."""
    lines = []
    for message in record["traj"][2:]:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        calls = message.get("tool_calls") or []
        if role == "assistant":
            lines += [f"  -> {cut(call_text(call))}" for call in calls]
            if message.get("content") and not calls:
                lines.append(f"  -> {cut(message['content'])}")
        elif role in ("tool", "user"):
            lines.append(f"  <- {role}: {cut(message.get('content'))}")
    return lines
