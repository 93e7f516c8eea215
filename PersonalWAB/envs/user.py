"""The simulated user an agent talks to in the multi-turn track."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

STOP_TOKEN = "###STOP###"


class UserSimulator(ABC):
    """Plays the user of one task: opens with the instruction, then answers the agent."""

    cost: float = 0.0

    @abstractmethod
    def reset(self, task: dict[str, Any], profile: dict[str, str]) -> str:
        """Start a new episode; return the user's first message."""

    @abstractmethod
    def reply(self, agent_message: str) -> str:
        """Answer the agent's message or react to the results it shows; STOP_TOKEN ends."""


def get_user(user_mode: str, user_model: str | None = None) -> UserSimulator | None:
    """`no` is the single-turn track (no simulated user)."""
    if user_mode == "no":
        return None
    raise ValueError(
        f"user_mode {user_mode!r} is not available in this version; the single-turn track uses --user_mode no"
    )
