"""The user-level view of runs: a user's tasks share the user, so they are not independent draws.

For one run: the overall Result Acc with its naive interval (tasks independent) beside the
interval clustered by user and the design effect (`PersonalWAB.metrics.clustered_interval`), the
distribution of per-user Result Acc and the worst decile of users. Between two runs: the users
that flip, solved in more than half of their tasks by one run and not by the other. Each task's
score is the mean over its trials, and records that ended in an error are left out, as
`leaderboard compare` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.metrics import clustered_interval, is_errored, per_user_means, task_score, user_distribution
from PersonalWAB.schema_types import Record

SHOWN_USERS = 10  # users named in one line


@dataclass
class UserView:
    """One run's overall Result Acc, clustered and naive, and its per-user distribution."""

    interval: dict[str, Any]  # clustered_interval of the per-task Result Acc
    distribution: dict[str, Any]  # user_distribution of the per-user Result Acc

    def line(self) -> str:
        i, d = self.interval, self.distribution
        effect = "-" if i["design_effect"] is None else f"{i['design_effect']:.2f}"
        q = d["quantiles"]
        worst = d["worst_decile"]
        return (f"R. Acc {i['mean']:.3f}: naive 95% [{i['naive'][0]:.3f}, {i['naive'][1]:.3f}] ({i['tasks']} tasks as "
                f"independent), clustered by user [{i['clustered'][0]:.3f}, {i['clustered'][1]:.3f}] "
                f"({i['clusters']} users), design effect {effect}; per-user R. Acc median {q['median']:.3f} "
                f"[p10 {q['p10']:.3f}, p90 {q['p90']:.3f}], worst decile ({len(worst['users'])} users) "
                f"{worst['mean']:.3f}: {named(worst['users'])}")


def named(users: Iterable[Any]) -> str:
    listed = list(users)
    return ", ".join(map(str, listed[:SHOWN_USERS])) + (f" ... ({len(listed)} users)" if len(listed) > SHOWN_USERS
                                                         else "")


def task_results(records: list[Record]) -> list[tuple[Any, Any, float]]:
    """(task_id, user, Result Acc) per task, the mean over its trials; errored records left out."""
    trials: dict[Any, list[Record]] = {}
    for record in records:
        if not is_errored(record):
            trials.setdefault(record["task_id"], []).append(record)
    return [(task_id, runs[0]["info"]["task"]["user_id"],
             sum(task_score(r["action_acc"], r["res_acc"])[1] for r in runs) / len(runs))
            for task_id, runs in trials.items()]


def user_view(records: list[Record]) -> UserView | None:
    """The run's user-level view (None without a scored task)."""
    results = task_results(records)
    if not results:
        return None
    scores, users = [r for _, _, r in results], [u for _, u, _ in results]
    return UserView(clustered_interval(scores, users), user_distribution(per_user_means(scores, users)))


def solved_share(pairs: list[tuple[Any, list[Record], list[Record]]], side: int) -> dict[Any, tuple[int, int]]:
    """user -> (tasks solved, tasks) in one run of matched pairs (side 1: baseline, 2: other); a task
    counts as solved when solved in more than half of its trials."""
    shares: dict[Any, tuple[int, int]] = {}
    for pair in pairs:
        trials = pair[side]
        user = trials[0]["info"]["task"]["user_id"]
        solved = sum(is_solved(record) for record in trials) * 2 > len(trials)
        done, total = shares.get(user, (0, 0))
        shares[user] = (done + solved, total + 1)
    return shares


def user_flips(pairs: list[tuple[Any, list[Record], list[Record]]]) -> tuple[list[str], list[str]]:
    """The users solved (in more than half of their matched tasks) by the baseline only, and by the
    other run only, each as `user (k/n -> m/n)`."""
    base, other = solved_share(pairs, 1), solved_share(pairs, 2)
    lost: list[str] = []
    gained: list[str] = []
    for user in sorted(base, key=str):
        (a, n), (b, _) = base[user], other[user]
        if (a * 2 > n) != (b * 2 > n):
            (lost if a * 2 > n else gained).append(f"{user} ({a}/{n} -> {b}/{n})")
    return lost, gained
