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
from PersonalWAB.construct.llm_cache import CachedLLM, Request, request

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
    pending = profile_requests(config, histories)
    dropped = {u: f"no behaviour in the {'/'.join(config.profile_splits)} split(s)"
               for u in histories if u not in pending}
    profiles: dict[str, dict[str, str]] = {}
    repairs = 0
    for attempt in range(REPAIRS + 1):
        if not pending:
            break
        repairs += len(pending) if attempt else 0
        label = "writing profiles" if attempt == 0 else f"re-asking for {len(pending)} profile(s)"
        answers = llm.ask_all(list(pending.values()), label)
        retry: dict[str, Request] = {}
        for (user_id, req), answer in zip(pending.items(), answers):
            try:
                profiles[user_id] = prompts.parse_profile(answer.content)
            except prompts.AnswerError as exc:
                dropped[user_id] = str(exc)
                retry[user_id] = req.then(answer.content, prompts.PROFILE_RETRY.format(problem=exc))
        pending = retry
    dropped = {u: reason for u, reason in dropped.items() if u not in profiles}
    if dropped:
        log(f"profiles: dropped {len(dropped)} user(s) whose profile could not be written, e.g. "
            f"{next(iter(dropped))}: {next(iter(dropped.values()))}")
    return {"profiles": {u: profiles[u] for u in sorted(profiles)}, "dropped": dict(sorted(dropped.items())),
            "repair_requests": repairs}
