"""add_product_review: post the review the agent wrote for the user."""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.pwab.functions.base import ToolContext
from PersonalWAB.errors import ToolArgumentError


def add_product_review(data: ToolContext, review: Any) -> dict[str, str]:
    if review and not isinstance(review, str):
        raise ToolArgumentError("review must be a string")
    return {"review": review if review else data.protocol.text("review.empty")}
