"""Deterministic scripted "models" for the scripted server: they read the task from the
request and answer the way a sensible agent would, so runs against them are
reproducible and exercise the whole agent loop with zero model latency."""

from __future__ import annotations

import json
from typing import Any

from PersonalWAB.agents.heuristic import choose_function
from devtools.scripted_server import ScriptedReply

PLAIN_REVIEW = "I like it. It works as described and the quality is good."


def instruction_of(request: dict[str, Any]) -> str:
    """The user's instruction: the first user message opens with `USER <id>: <instruction>`
    (a review task's product follows on the next lines)."""
    first_user = next(m for m in request["messages"] if m["role"] == "user")
    return first_user["content"].split(": ", 1)[1].split("\n", 1)[0]


def sensible_call(instruction: str) -> tuple[str, dict[str, Any]]:
    """The function the instruction asks for, with arguments taken from the instruction alone."""
    name = choose_function(instruction)
    if name == "search_product_by_query":
        return name, {"query": instruction}
    if name == "get_recommendations_by_history":
        return name, {"product_sequence": []}
    return name, {"review": PLAIN_REVIEW}


def tool_caller(request: dict[str, Any]) -> ScriptedReply:
    """A native tool-calling model."""
    name, arguments = sensible_call(instruction_of(request))
    return ScriptedReply(tool_calls=[(name, json.dumps(arguments))])


def react_writer(request: dict[str, Any]) -> ScriptedReply:
    """A model answering in the ReAct text format."""
    name, arguments = sensible_call(instruction_of(request))
    return ScriptedReply(
        content=f"Thought:\nThe user wants this.\nAction:\n{name}\nArguments:\n{json.dumps(arguments)}")
