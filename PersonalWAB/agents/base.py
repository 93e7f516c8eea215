"""The agent interface the runner drives."""

from __future__ import annotations

from abc import ABC, abstractmethod

from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.types import Episode


class Agent(ABC):
    @abstractmethod
    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        """Run one task in `env` (reset included) and return what happened, each step
        recorded with the episode's `record_action`, `record_message` and `record_tool_call`."""
