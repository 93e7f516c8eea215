"""User simulators of the multi-turn track (`--user_mode naive|human|offline`) and
the leak guard applied to every simulated user message before the agent reads it.
`get_user` builds the one a run's `--user_mode` names; each is imported only when chosen."""

from __future__ import annotations

from PersonalWAB.envs.users.base import UserSimulator
from PersonalWAB.pricing import Rate

NO_USER = "no"  # the single-turn track
MULTI_TURN_USERS = ("naive", "human", "offline")
USER_MODES = (NO_USER, *MULTI_TURN_USERS)


def get_user(user_mode: str, user_model: str | None = None, user_api_base: str | None = None,
             seed: int = 0, max_retries: int = 5, price: Rate | None = None,
             timeout_s: float = 120.0) -> UserSimulator | None:
    """The simulated user for `--user_mode`: `no` is the single-turn track (no user);
    `naive` an LLM user (`user_model`, optionally served at `user_api_base`, each call waited
    for up to `timeout_s`); `human` a person at the terminal; `offline` a rule-based user,
    deterministic given `seed`. `price`: the user model's own rate (`--user_price_per_mtok`)
    over litellm's table."""
    if user_mode == NO_USER:
        return None
    if user_mode == "naive":
        if not user_model:
            raise ValueError("--user_mode naive needs --user_model (any litellm model string, e.g. gpt-4o-mini)")
        from PersonalWAB.envs.users.llm_user import LLMUser

        return LLMUser(user_model, api_base=user_api_base, max_retries=max_retries, price=price, timeout_s=timeout_s)
    if user_mode == "human":
        from PersonalWAB.envs.users.human_user import HumanUser

        return HumanUser()
    if user_mode == "offline":
        from PersonalWAB.envs.users.offline_user import OfflineUser

        return OfflineUser(seed=seed)
    raise ValueError(f"unknown user_mode {user_mode!r}; expected one of {USER_MODES}")
