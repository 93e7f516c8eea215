"""The web functions an agent can call, keyed by name, in the release's order; their
schemas come from the protocol (`Protocol.tool`)."""

from __future__ import annotations

from PersonalWAB.envs.pwab.functions.add_product_review import add_product_review
from PersonalWAB.envs.pwab.functions.base import ToolContext, WebFunction
from PersonalWAB.envs.pwab.functions.get_product_details_by_asin import get_product_details_by_asin
from PersonalWAB.envs.pwab.functions.get_recommendations_by_history import get_recommendations_by_history
from PersonalWAB.envs.pwab.functions.search_product_by_query import search_product_by_query
from PersonalWAB.envs.pwab.functions.stop import stop

WEB_FUNCTIONS: dict[str, WebFunction] = {
    function.name: function
    for function in (
        WebFunction("search_product_by_query", search_product_by_query, True),
        WebFunction("get_recommendations_by_history", get_recommendations_by_history, True),
        WebFunction("add_product_review", add_product_review, True),
        WebFunction("get_product_details_by_asin", get_product_details_by_asin, False),
        WebFunction("stop", stop, False),
    )
}

FUNCTION_FOR_TASK_TYPE = {
    "search": "search_product_by_query",
    "recommend": "get_recommendations_by_history",
    "review": "add_product_review",
}

__all__ = ["WEB_FUNCTIONS", "FUNCTION_FOR_TASK_TYPE", "ToolContext", "WebFunction"]
