"""The extension points are tables: the release's memory modes and web functions are rows,
and a new memory mode and a new web function, each one file (here: this module) and one
row, run end to end through `run.py`'s code, the run labelled custom."""

from __future__ import annotations

import json
from typing import Any

import pytest

from PersonalWAB.agents.function_calling import FunctionCallingAgent
from PersonalWAB.agents.heuristic import HeuristicAgent
from PersonalWAB.agents.llm_agent import memory_settings
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.schema import TASK_FUNCTIONS
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.envs.pwab.functions import (BASE, RECMIND, WEB_FUNCTIONS, ToolContext, WebFunction, call_many,
                                             tool_names)
from PersonalWAB.leaderboard.analysis import action_sequence
from PersonalWAB.llm import LLMReply
from PersonalWAB.memory import MEMORY_MODES, MemoryMode, memory_text, system_prompt
from PersonalWAB.memory.base import Behaviours, MemoryRequest
from PersonalWAB.protocol import own_texts_note, project_protocol
from PersonalWAB.protocol.spec import TEXTS
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from PersonalWAB.types import STOP, Action

# --- a new memory mode: the user's first purchases, oldest first, under a header of its own -----------------
OLDEST_TEXTS = {"memory.oldest.header": "\nThe user's first purchases and reviews, oldest first:\n\n"}


def select_oldest(request: MemoryRequest) -> Behaviours:
    return request.past[:request.length]


def render_oldest(request: MemoryRequest, behaviours: Behaviours) -> str:
    blocks = [request.protocol.behaviour_block(b, i) for i, b in enumerate(behaviours)]
    return OLDEST_TEXTS["memory.oldest.header"] + "\n".join(blocks)


OLDEST = MemoryMode("oldest", select_oldest, render_oldest, texts=("memory.behaviour",), in_release=False,
                    own_texts=OLDEST_TEXTS)

# --- a new web function: how many ratings a product has, with its schema and observation text ----------------
COUNT_TEXTS = {
    "tool.count_ratings": {"type": "function", "function": {
        "name": "count_ratings", "description": "How many ratings a product has.",
        "parameters": {"type": "object", "properties": {"product_asin": {"type": "string"}},
                       "required": ["product_asin"]}}},
    "count_ratings.result": "{count} ratings",
}


def count_ratings(data: ToolContext, product_asin: Any) -> int:
    return int(data.products[product_asin]["rating_number"] or 0)


def render_count(count: Any) -> str:
    return COUNT_TEXTS["count_ratings.result"].format(count=count)


COUNT = WebFunction("count_ratings", count_ratings, "count", render=render_count, in_release=False,
                    own_texts=COUNT_TEXTS)


class ScriptedModel:
    """Stands in for the model: first asks `count_ratings` about the user's first purchase,
    then makes the call the offline agent would make. Keeps every request."""

    def __init__(self, asin: str, action: Action):
        self.script = [Action("count_ratings", {"product_asin": asin}), action]
        self.requests: list[dict[str, Any]] = []

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> LLMReply:
        self.requests.append({"messages": [dict(m) for m in messages], **kwargs})
        action = self.script[min(len(self.requests), len(self.script)) - 1]
        call = {"id": f"call_{len(self.requests)}", "type": "function",
                "function": {"name": action.name, "arguments": json.dumps(action.arguments)}}
        return LLMReply({"role": "assistant", "content": None, "tool_calls": [call]}, 10, 5, 0.0, 0.0, True)


class ScriptedAgent(FunctionCallingAgent):
    """The function-calling agent with a scripted model (`--agent_strategy module:Class`)."""

    requests: list[dict[str, Any]] = []

    def __init__(self, data: BenchmarkData, config: RunConfig):
        super().__init__(None, data, memory_settings(data, config))  # type: ignore[arg-type]

    def solve(self, env: PWABEnv, task_index: int):
        task = env.tasks[task_index]
        past = self.data.behaviours_before(task["user_id"], task["timestamp"])
        asin = past[0]["product_info"]["parent_asin"] if past else next(iter(self.data.products))
        self.client = ScriptedModel(asin, HeuristicAgent(self.data).decide(env, task))
        episode = super().solve(env, task_index)
        ScriptedAgent.requests.append(self.client.requests[0])
        return episode


@pytest.fixture
def extended(monkeypatch):
    """The new mode and the new web function, each registered by its one row."""
    monkeypatch.setitem(MEMORY_MODES, OLDEST.name, OLDEST)
    monkeypatch.setitem(WEB_FUNCTIONS, COUNT.name, COUNT)
    monkeypatch.setattr(ScriptedAgent, "requests", [])


PROJECT_CONTROLS = ("other_user", "oracle")


def test_the_release_rows():
    assert tool_names(BASE) == (*TASK_FUNCTIONS, STOP)
    assert tool_names(RECMIND) == (*TASK_FUNCTIONS, "get_product_details_by_asin", STOP)
    for mode in MEMORY_MODES.values():
        assert not mode.own_texts and set(mode.texts) | set(mode.system) <= set(TEXTS)
        if mode.name in PROJECT_CONTROLS:  # the ablation's controls: shown with the release's texts, labelled custom
            assert not mode.in_release and mode.departure == f"agent_memory {mode.name}: the project's memory mode, " \
                                                             "not in the release"
        else:
            assert mode.in_release and mode.departure is None
    for function in WEB_FUNCTIONS.values():
        assert function.in_release and not function.own_texts and function.departure is None
        assert function.schema(project_protocol()) == project_protocol().tool(function.name)
    assert {f.task_type for f in WEB_FUNCTIONS.values() if f.scored} == {"search", "recommend", "review"}


def test_a_row_cannot_take_a_release_text_name_and_a_function_needs_a_schema():
    with pytest.raises(ValueError, match="are the release's"):
        MemoryMode("mine", select_oldest, render_oldest, texts=(), own_texts={"memory.last.header": "x"})
    with pytest.raises(ValueError, match="no schema"):
        WebFunction("unknown_function", count_ratings, "unknown")


def test_a_new_mode_and_a_new_function_run_end_to_end_labelled_custom(extended, tiny_data, tiny_engines, tmp_path):
    strategy = f"{__name__}:ScriptedAgent"
    header, path, _ = run(RunConfig(agent_strategy=strategy, agent_memory="oldest", data_dir=str(tiny_data.data_dir),
                                    end_index=4, out=str(tmp_path / "extended.json")), log=lambda _: None)
    protocol = header["run_args"]["protocol"]
    assert protocol["standard"] is False
    assert "agent_memory oldest: the project's memory mode, not in the release; " \
           f"{own_texts_note(OLDEST_TEXTS)}" in protocol["departures"]
    assert "web function count_ratings: the project's web function, not in the release; " \
           f"{own_texts_note(COUNT_TEXTS)}" in protocol["departures"]
    assert own_texts_note(COUNT_TEXTS).startswith("texts of its own: count_ratings.result, tool.count_ratings (")
    assert own_texts_note({**COUNT_TEXTS, "count_ratings.result": "{count} reviews"}) != own_texts_note(COUNT_TEXTS)
    _, records = load_result_file(path)
    texts, tasks = project_protocol(), tiny_data.split("test")
    assert len(records) == 4 and len(ScriptedAgent.requests) == 4
    for record, request in zip(records, ScriptedAgent.requests):
        task = tasks[record["task_id"]]
        memory = memory_text(texts, tiny_data, task, "oldest", 10)
        assert memory.startswith(OLDEST_TEXTS["memory.oldest.header"])
        assert record["traj"][0]["content"] == system_prompt(texts, "oldest", -1) + memory
        assert request["tools"][-1] == COUNT_TEXTS["tool.count_ratings"]  # offered after the release's five
        count = int(tiny_data.products[json.loads(record["traj"][2]["tool_calls"][0]["function"]["arguments"])
                                       ["product_asin"]]["rating_number"] or 0)
        assert record["traj"][3] == {"role": "tool", "tool_call_id": "call_1", "name": "count_ratings",
                                     "content": f"{count} ratings"}
        assert [a["name"] for a in record["info"]["actions"]][0] == "count_ratings"
        assert len(record["action_acc"]) == 1  # the new function is not scored; the task's call is
        assert action_sequence(record)[0] == "count"


def test_puma_scoring_calls_a_function_without_a_batch_form_one_by_one(extended, tiny_engines):
    asin = next(iter(tiny_engines.data.products))
    values = call_many(ToolContext(tiny_engines, project_protocol()),
                       [Action("count_ratings", {"product_asin": asin}), Action("count_ratings", {"asin": asin}),
                        Action("respond", {"content": "hi"})])
    assert values == [count_ratings(ToolContext(tiny_engines, project_protocol()), asin), None, None]
