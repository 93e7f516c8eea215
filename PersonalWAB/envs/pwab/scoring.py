"""Function Acc and Result Acc of one attempt (DESIGN §3.2), as the release scores them.

Function Acc is 1 when the called function answers the task's type (its row's `task_type` in
the table of web functions) and ran without error. Result Acc is read off what the function
returned, whichever function it was (so a wrong function can carry a Result Acc, which no
task score uses): for search and recommendation tasks, `1 - i/len(results)` for the first
result whose text contains the target ASIN; for review tasks, the MiniLM cosine of the
posted review and the real one, kept in [0, 1] (the release keeps the raw cosine: a negative
value, or 1 + float error for an identical review, would fall outside the leaderboard's
range). `review_similarity` gives that raw cosine, for callers that must reproduce the
release's numbers (PUMA's step 4 and `PUMA.fast_test` under `--recipe release`).

`grader_version` names this grader: a digest of the source of every function that decides a
score (these and `PersonalWAB.metrics.task_score`, which makes a task's score of its attempts),
so any change to how a call is scored changes it. A result file records it
(`run_args.grader_version`); scores of different graders are not compared until re-graded
(`pwab leaderboard regrade`).
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS
from PersonalWAB.engines.text_embedding import TextEmbedder
from PersonalWAB.schema_types import Task
from PersonalWAB.types import Attempt


def rank_score(target_asin: str, results: list[str]) -> float:
    """1 - i/len(results) for the first result text that contains the target ASIN; 0 when none does."""
    for rank, text in enumerate(results):
        if target_asin in text:
            return 1.0 - rank / len(results)
    return 0.0


def review_similarity(embedder: TextEmbedder, review: str, target_review: str) -> float:
    """The raw MiniLM cosine between the written and the real review, as the release's
    `compute_similarity` returns it: not clipped, so it can be negative."""
    return embedder.similarity(target_review, review)


def review_score(embedder: TextEmbedder, review: str, target_review: str) -> float:
    """MiniLM cosine between the written and the real review, clipped to [0, 1]."""
    return min(1.0, max(0.0, review_similarity(embedder, review, target_review)))


def score_attempt(task: Task, function_name: str, value: Any, failed: bool,
                  embedder: TextEmbedder) -> Attempt:
    """Score what an action function returned; a failed call scores (0, 0)."""
    if failed:
        return Attempt(function_name, 0.0, 0.0)
    function = WEB_FUNCTIONS.get(function_name)
    function_acc = 1.0 if function is not None and function.task_type == task["type"] else 0.0
    result_acc = 0.0
    if task["type"] == "review":
        if isinstance(value, dict):
            result_acc = review_score(embedder, value["review"], task["target"]["review"]["text"])
    elif isinstance(value, list):
        result_acc = rank_score(task["target"]["product_info"]["parent_asin"], value)
    return Attempt(function_name, function_acc, result_acc)


GRADER_DIGEST_CHARS = 16


def grader_version() -> str:
    """The digest of the scoring code as it is bound now (a function replaced at run time counts):
    `rank_score`, `review_similarity`, `review_score`, `score_attempt` and the task score."""
    import sys

    from PersonalWAB import metrics

    module = sys.modules[__name__]
    functions = [getattr(module, name) for name in ("rank_score", "review_similarity", "review_score",
                                                    "score_attempt")] + [metrics.task_score]
    digest = hashlib.sha256()
    for function in functions:
        digest.update(inspect.getsource(function).encode("utf-8") + b"\0")
    return digest.hexdigest()[:GRADER_DIGEST_CHARS]
