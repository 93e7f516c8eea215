"""Function Acc and Result Acc of one attempt (DESIGN §3.2)."""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.pwab.functions import FUNCTION_FOR_TASK_TYPE, FunctionOutput
from PersonalWAB.envs.pwab.text_embedding import TextEmbedder
from PersonalWAB.types import Attempt


def rank_score(target_asin: str, asins: list[str]) -> float:
    """1 - rank/len(results) for the 0-based rank of the target; 0 when absent."""
    if target_asin not in asins:
        return 0.0
    return 1.0 - asins.index(target_asin) / len(asins)


def review_score(embedder: TextEmbedder, review: str, target_review: str) -> float:
    """MiniLM cosine between the written and the real review, floored at 0 so
    every Result Acc stays in [0, 1]."""
    return max(0.0, embedder.similarity(review, target_review))


def score_attempt(task: dict[str, Any], function_name: str, output: FunctionOutput | None,
                  embedder: TextEmbedder) -> Attempt:
    """An attempt with the wrong function or a failed call scores (0, 0)."""
    if output is None or FUNCTION_FOR_TASK_TYPE[task["type"]] != function_name:
        return Attempt(function_name, 0.0, 0.0)
    target = task["target"]
    if task["type"] == "review":
        result = review_score(embedder, output.review or "", target["review"]["text"])
    else:
        result = rank_score(target["product_info"]["parent_asin"], output.asins or [])
    return Attempt(function_name, 1.0, result)
