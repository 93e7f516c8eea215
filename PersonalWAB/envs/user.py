"""The simulated user an agent talks to in the multi-turn track."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PersonalWAB.protocol import Protocol


class UserSimulator(ABC):
    """Plays the user of one task. The request itself reaches the agent as the first
    observation; afterwards the user answers the agent's messages (`respond`) only."""

    cost: float = 0.0

    @abstractmethod
    def reset(self, task: dict[str, Any], profile: dict[str, str], protocol: "Protocol") -> str | None:
        """Start a new episode. Return None to open with the task's request as the protocol
        writes it, or the user's own opening line (a person at the terminal)."""

    @abstractmethod
    def reply(self, agent_message: str) -> str:
        """Answer a message the agent sent to the user."""


USER_MODES = ("no", "naive", "human", "offline")


def get_user(user_mode: str, user_model: str | None = None, user_api_base: str | None = None,
             seed: int = 0, max_retries: int = 5) -> UserSimulator | None:
    """The simulated user for `--user_mode`: `no` is the single-turn track (no user);
    `naive` an LLM user (`user_model`, optionally served at `user_api_base`); `human`
    a person at the terminal; `offline` a rule-based user, deterministic given `seed`."""
    if user_mode == "no":
        return None
    if user_mode == "naive":
        if not user_model:
            raise ValueError("--user_mode naive needs --user_model (any litellm model string, e.g. gpt-4o-mini)")
        from PersonalWAB.envs.users.llm_user import LLMUser

        return LLMUser(user_model, api_base=user_api_base, max_retries=max_retries)
    if user_mode == "human":
        from PersonalWAB.envs.users.human_user import HumanUser

        return HumanUser()
    if user_mode == "offline":
        from PersonalWAB.envs.users.offline_user import OfflineUser

        return OfflineUser(seed=seed)
    raise ValueError(f"unknown user_mode {user_mode!r}; expected one of {USER_MODES}")
