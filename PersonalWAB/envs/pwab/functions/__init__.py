"""The table of web functions an agent can call, keyed by name, in the release's order
(the order of the schemas offered). Each row carries what every reader needs: the
function, its label in analyses, the task type it answers (scored), the tool lists that
offer it, the observation it shows, its batch form and its texts (`base.WebFunction`).
The environment, the agents' tool lists, the scoring, the leaderboard's analysis and
PUMA's scoring read this table. A web function is one file here and one row below.

| function                        | label     | answers   | offered to    | batch form       |
|---------------------------------|-----------|-----------|---------------|------------------|
| search_product_by_query         | search    | search    | every agent   | `search_many`    |
| get_recommendations_by_history  | recommend | recommend | every agent   | `recommend_many` |
| add_product_review              | review    | review    | every agent   | one by one       |
| get_product_details_by_asin     | details   | -         | RecMind       | one by one       |
| stop                            | stop      | -         | every agent   | one by one       |
"""

from __future__ import annotations

from typing import Any

from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH
from PersonalWAB.envs.pwab.functions.add_product_review import add_product_review
from PersonalWAB.envs.pwab.functions.base import BASE, RECMIND, ToolContext, WebFunction
from PersonalWAB.envs.pwab.functions.get_product_details_by_asin import get_product_details_by_asin
from PersonalWAB.envs.pwab.functions.get_recommendations_by_history import (
    get_recommendations_by_history,
    recommend_many,
)
from PersonalWAB.envs.pwab.functions.search_product_by_query import search_many, search_product_by_query
from PersonalWAB.envs.pwab.functions.stop import stop
from PersonalWAB.errors import EngineError
from PersonalWAB.types import STOP, Action

WEB_FUNCTIONS: dict[str, WebFunction] = {function.name: function for function in (
    WebFunction(SEARCH, search_product_by_query, "search", task_type="search", batch=search_many),
    WebFunction(RECOMMEND, get_recommendations_by_history, "recommend", task_type="recommend",
                batch=recommend_many),
    WebFunction(REVIEW, add_product_review, "review", task_type="review"),
    WebFunction("get_product_details_by_asin", get_product_details_by_asin, "details", toolsets=(RECMIND,)),
    WebFunction(STOP, stop, "stop"),
)}


def tool_names(toolset: str) -> tuple[str, ...]:
    """The functions a tool list offers, in the table's order."""
    return tuple(name for name, function in WEB_FUNCTIONS.items() if toolset in function.toolsets)


def call_many(context: ToolContext, actions: list[Action]) -> list[Any]:
    """What each action's function returns, None where the call fails or names no web
    function: each function's calls in one batch when its row has a batch form, else one by
    one. A failure of the engines themselves (`EngineError`) is raised, as in the environment."""
    values: list[Any] = [None] * len(actions)
    for name, function in WEB_FUNCTIONS.items():
        mine = [i for i, action in enumerate(actions) if action.name == name]
        if not mine:
            continue
        if function.batch is not None:
            for i, value in zip(mine, function.batch(context, [actions[i].arguments for i in mine])):
                values[i] = value
            continue
        for i in mine:
            try:
                values[i] = function(context, actions[i].arguments)
            except EngineError:
                raise
            except Exception:  # a failed call scores 0, as the environment scores it
                values[i] = None
    return values


__all__ = ["BASE", "RECMIND", "WEB_FUNCTIONS", "ToolContext", "WebFunction", "call_many", "tool_names"]
