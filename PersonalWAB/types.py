"""Plain data types passed between the environment, agents and the runner."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import Iterator
from typing import Any

from PersonalWAB.schema_types import EpisodeNotes, UsageRecord

RESPOND = "respond"
STOP = "stop"


@dataclass
class Action:
    """One agent decision: a web function call, a message to the user, or stop."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass
class Attempt:
    """A scored call of an action function (search, recommend or review)."""

    function: str
    function_acc: float
    result_acc: float


@dataclass
class Usage:
    """Token usage and price, one entry per agent model call."""

    completion_tokens: list[int] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    total_tokens: list[int] = field(default_factory=list)
    completion_price: float = 0.0
    prompt_price: float = 0.0
    extra_calls: int = 0  # calls that are not steps: replies asked again, reflections, memory updates
    extra_price: float = 0.0
    price_unknown: bool = False  # some call's model had no price in litellm's table (cost counted as 0)

    def add_call(self, prompt_tokens: int = 0, completion_tokens: int = 0,
                 prompt_price: float = 0.0, completion_price: float = 0.0) -> None:
        self.prompt_tokens.append(prompt_tokens)
        self.completion_tokens.append(completion_tokens)
        self.total_tokens.append(prompt_tokens + completion_tokens)
        self.prompt_price += prompt_price
        self.completion_price += completion_price

    def add_extra(self, price: float) -> None:
        self.extra_calls += 1
        self.extra_price += price

    @property
    def calls(self) -> int:
        return len(self.total_tokens)

    @property
    def total_price(self) -> float:
        return self.prompt_price + self.completion_price + self.extra_price

    def to_dict(self) -> UsageRecord:
        usage: UsageRecord = {
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.total_tokens,
            "completion_price": self.completion_price,
            "prompt_price": self.prompt_price,
            "total_price": self.total_price,
        }
        if self.extra_calls:
            usage["extra_calls"] = self.extra_calls
            usage["extra_price"] = self.extra_price
        return usage


@dataclass
class Episode:
    """What an agent did on one task: its messages, actions and model usage."""

    traj: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    user_cost: float = 0.0
    error: str | None = None  # the task failed (API or program error): resume runs it again
    notes: EpisodeNotes = field(default_factory=EpisodeNotes)  # what went wrong on the model's side, kept in info

    @property
    def steps(self) -> int:
        """Agent model calls (one per action for the built-in agents, whose Avg Steps counts them)."""
        return self.usage.calls

    def record_action(self, action: Action) -> None:
        """Keep an action sent to `env.step`. Record it before the step, so that a task that
        fails inside the step (a user model's API error) still shows the action."""
        self.actions.append(action.to_dict())

    def record_message(self, role: str, content: Any) -> None:
        """Add one plain chat message to `traj`: what the agent said (or thought) as
        `assistant`, the user's reply (or a tool result shown as text) as `user`."""
        self.traj.append({"role": role, "content": content})

    def record_tool_call(self, action: Action, observation: str, message: dict[str, Any] | None = None) -> None:
        """Add a function call and its result to `traj`: the assistant message that makes the
        call, then the `tool` message carrying `observation`, paired by the call's id.

        `message`: the model's reply that made the call. It is kept with only its first tool
        call, whose id (the model's own) pairs the result, so what goes back to the model is
        its own reply. None (an agent that calls functions without a model's tool call): the
        call is written here, with the id `call_{n}` for the episode's n-th action, counted
        from 0; `action` is that action, recorded last (`record_action` comes first)."""
        if message is None:
            call = {"id": f"call_{len(self.actions) - 1}", "type": "function",
                    "function": {"name": action.name, "arguments": json.dumps(action.arguments)}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            call = message["tool_calls"][0]
            message = {**message, "tool_calls": [call]}
        self.traj.append(message)
        self.traj.append({"role": "tool", "tool_call_id": call["id"], "name": action.name, "content": observation})


@contextmanager
def kept_on_failure(episode: Episode) -> Iterator[Episode]:
    """Attach the episode to any exception that escapes, so the runner still records the
    calls it made (and their cost) when a task fails part-way."""
    try:
        yield episode
    except Exception as exc:
        exc.episode = episode  # type: ignore[attr-defined]
        raise
