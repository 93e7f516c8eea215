"""Deterministic scripted "models" for the scripted server: they read the task from the
request and answer the way a sensible agent would, so runs against them are
reproducible and exercise the whole agent loop with zero model latency.

`conversation` plays both sides of the multi-turn track from one server (give it as
`--api_base` and `--user_api_base`): as the agent it calls a function, asks the user about
the result, calls again with the user's answer and stops; as the LLM user it answers each
message. So the LLM-user path, its requests and its cost, runs offline end to end."""

from __future__ import annotations

import json
import re
from typing import Any

from PersonalWAB.agents.heuristic import choose_function
from devtools.doubles.scripted_server import ScriptedReply

PLAIN_REVIEW = "I like it. It works as described and the quality is good."
AGENT_OBSERVATION = re.compile(r"^USER \S+: ")  # how an agent's first user message opens
QUESTION = "I tried {name} for you. Does that fit, or is there something I should take into account?"
USER_ANSWER = "Close, but keep in mind what I asked: {instruction}"


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


def is_agent_request(request: dict[str, Any]) -> bool:
    """An agent's request opens its conversation with the task (`USER <id>: ...`); the LLM
    user's opens with its greeting answered by the instruction."""
    first_user = next((m for m in request["messages"] if m["role"] == "user"), None)
    return first_user is not None and bool(AGENT_OBSERVATION.match(str(first_user.get("content") or "")))


def conversation(request: dict[str, Any]) -> ScriptedReply:
    """The agent or the LLM user, whichever sent the request (see the module docstring); a
    side request of one system message (a reflection, a memory update) is answered empty."""
    if not any(m["role"] == "user" for m in request["messages"]):
        return ScriptedReply(content="")
    if not is_agent_request(request):
        instruction = request["messages"][2]["content"] if len(request["messages"]) > 2 else ""
        return ScriptedReply(content=USER_ANSWER.format(instruction=instruction))
    instruction = instruction_of(request)
    name, arguments = sensible_call(instruction)
    turn = sum(m["role"] == "assistant" for m in request["messages"])
    if turn == 1:
        return _agent_reply(request, "respond", QUESTION.format(name=name))
    if turn == 2:
        answer = str(request["messages"][-1].get("content") or "")
        if name == "search_product_by_query":
            arguments = {"query": f"{instruction} {answer}"}
        elif name == "add_product_review":
            arguments = {"review": f"{PLAIN_REVIEW} {answer}"}
        return _agent_reply(request, name, arguments)
    if turn > 2:
        return _agent_reply(request, "stop", {})
    return _agent_reply(request, name, arguments)


def _agent_reply(request: dict[str, Any], name: str, arguments: dict[str, Any] | str) -> ScriptedReply:
    """An action in the format the request asks for: a tool call (or a plain message for
    `respond`) when tools are offered, ReAct text otherwise."""
    if request.get("tools"):
        if name == "respond":
            return ScriptedReply(content=str(arguments))
        return ScriptedReply(tool_calls=[(name, json.dumps(arguments))])
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ScriptedReply(content=f"Thought:\nThe user wants this.\nAction:\n{name}\nArguments:\n{raw}")
