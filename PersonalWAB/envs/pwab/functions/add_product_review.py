"""add_product_review: post the review the agent wrote for the user."""

from __future__ import annotations

import json

from PersonalWAB.envs.pwab.functions.base import FunctionOutput, function_schema

NO_REVIEW = "No review provided."

SCHEMA = function_schema(
    "add_product_review",
    "Post a review of the product on the user's behalf. Write it as the user would.",
    {"review": {"type": "string", "description": "The review text."}},
    ["review"],
)


def add_product_review(engines, review: str) -> FunctionOutput:
    text = review.strip() or NO_REVIEW
    return FunctionOutput(text=json.dumps({"review": text}, ensure_ascii=False), review=text)
