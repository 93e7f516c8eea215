"""The base of the simulated users an agent talks to in the multi-turn track."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING
from PersonalWAB.schema_types import Task, UserProfile

if TYPE_CHECKING:
    from PersonalWAB.protocol import Protocol


class UserSimulator(ABC):
    """Plays the user of one task. The request itself reaches the agent as the first
    observation; afterwards the user answers the agent's messages (`respond`) only."""

    cost: float = 0.0

    @abstractmethod
    def reset(self, task: Task, profile: UserProfile, protocol: Protocol) -> str | None:
        """Start a new episode. Return None to open with the task's request as the protocol
        writes it, or the user's own opening line (a person at the terminal)."""

    @abstractmethod
    def reply(self, agent_message: str) -> str:
        """Answer a message the agent sent to the user."""
