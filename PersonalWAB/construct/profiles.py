"""Step `profiles`: one LLM-written profile (the eleven fields) per user.

The writer sees the user's behaviours of the configured splits (by default the history
split only, so no task target shapes the profile), the most recent ones when there are
many. An answer that is not a usable profile is sent back with the problem named, up to
`REPAIRS` times; a user whose profile still cannot be read is dropped and reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PersonalWAB.construct import prompts
from PersonalWAB.construct.config import BuildConfig
from PersonalWAB.construct.llm_cache import CachedLLM, Request, ask_with_repairs, request

Log = Callable[[str], None]
REPAIRS = 2
EXPECTED_COMPLETION_TOKENS = 220  # a profile's JSON, for the dry run's estimate


def shown_behaviours(config: BuildConfig, behaviours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the profile writer sees: the chosen splits, the most recent ones, oldest first."""
    eligible = [b for b in behaviours if b["split"] in config.profile_splits]
    return eligible[-config.profile_max_behaviours :]


def profile_requests(config: BuildConfig, histories: dict[str, list[dict[str, Any]]]) -> dict[str, Request]:
    """The first request of every user who has behaviours to show."""
    out = {}
    for user_id, behaviours in histories.items():
        shown = shown_behaviours(config, behaviours)
        if shown:
            out[user_id] = request(prompts.PROFILE_SYSTEM, prompts.profile_prompt(shown), config.profile_max_tokens)
    return out


def write_profiles(config: BuildConfig, llm: CachedLLM, histories: dict[str, list[dict[str, Any]]],
                   log: Log) -> dict[str, Any]:
    """The `profiles` step's output: profiles by user, and the users dropped with the reason."""
    requests = profile_requests(config, histories)
    dropped = {u: f"no behaviour in the {'/'.join(config.profile_splits)} split(s)"
               for u in histories if u not in requests}
    asked = ask_with_repairs(llm, list(requests.values()), prompts.parse_profile, prompts.PROFILE_RETRY,
                             "profile", REPAIRS)
    profiles = {u: value for u, value in zip(requests, asked.values) if value is not None}
    dropped.update({u: problem for u, problem in zip(requests, asked.problems) if problem is not None})
    if dropped:
        log(f"profiles: dropped {len(dropped)} user(s) whose profile could not be written, e.g. "
            f"{next(iter(dropped))}: {next(iter(dropped.values()))}")
    return {"profiles": {u: profiles[u] for u in sorted(profiles)}, "dropped": dict(sorted(dropped.items())),
            "repair_requests": asked.repair_requests}
