"""The calls a task record's trajectory holds, each with the observation the agent read, and the
value the web function returned as read back from that observation.

A record keeps its actions (`info.actions`, messages to the user left out) and its trajectory:
function-calling agents (and the offline and PUMA agents) answer each action with a `tool`
message; the ReAct agents with a `user` message that starts with the protocol's
`react.api_output` text. Either way the n-th observation belongs to the n-th action, so what a
function returned can be read again without running anything: a search or recommendation is
Python's text of its list of result texts, a posted review that of its `{"review": ...}` object,
and a call that failed shows the environment's error text, which reads as neither. Re-grading,
the failure labels, the ranking metrics and the leakage audit all read records this way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS
from PersonalWAB.errors import DataError
from PersonalWAB.schema_types import Record


@dataclass(frozen=True)
class RecordedCall:
    """One action of a record with the observation the agent read after it."""

    name: str
    arguments: dict[str, Any]
    observation: str

    @property
    def scored(self) -> bool:
        """Whether the environment scored it as an attempt (its function answers a task type)."""
        function = WEB_FUNCTIONS.get(self.name)
        return function is not None and function.scored

    @property
    def task_type(self) -> str | None:
        function = WEB_FUNCTIONS.get(self.name)
        return function.task_type if function is not None else None

    def value(self) -> Any:
        """What the function returned, read back from the observation: a list of result texts
        (search, recommendation), a `{"review": ...}` object (a posted review), or None when the
        call failed (the observation is the environment's error text)."""
        try:
            value = ast.literal_eval(self.observation)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            return None
        if self.task_type == "review":
            return value if isinstance(value, dict) and isinstance(value.get("review"), str) else None
        return value if isinstance(value, list) and all(isinstance(text, str) for text in value) else None


def _observations(record: Record, react_prefix: str) -> list[str]:
    """The observations of the record's actions, in order (tool messages, or ReAct's prefixed user messages)."""
    traj = [message for message in record["traj"] if isinstance(message, dict)]
    tools = [message for message in traj if message.get("role") == "tool"]
    if tools:
        return [str(message.get("content") or "") for message in tools]
    return [str(message["content"])[len(react_prefix):] for message in traj[2:]
            if message.get("role") == "user" and isinstance(message.get("content"), str)
            and message["content"].startswith(react_prefix)]


def recorded_calls(record: Record, react_prefix: str) -> list[RecordedCall]:
    """Every action of the record with its observation (`react_prefix`: the run's
    `react.api_output` text). DataError when the trajectory holds another number of observations
    than the record has actions (a record edited by hand, or of another protocol's texts)."""
    actions = [action for action in record["info"].get("actions", []) if isinstance(action, dict)]
    observations = _observations(record, react_prefix)
    if len(observations) != len(actions):
        raise DataError(f"task {record.get('task_id')!r} trial {record.get('trial')!r}: its trajectory holds "
                        f"{len(observations)} observation(s) for {len(actions)} action(s), so its calls cannot be "
                        "read back (another protocol's texts? pass the run's --protocol_file)")
    return [RecordedCall(str(action.get("name")), _arguments(action), observation)
            for action, observation in zip(actions, observations)]


def _arguments(action: dict[str, Any]) -> dict[str, Any]:
    arguments = action.get("arguments")
    return arguments if isinstance(arguments, dict) else {}


def scored_calls(record: Record, react_prefix: str) -> list[RecordedCall]:
    """The calls the environment scored, in order: the record's attempts (a single-turn message to
    the user, scored (0, 0), aside)."""
    return [call for call in recorded_calls(record, react_prefix) if call.scored]
