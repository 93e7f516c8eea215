"""The web functions an agent can call, keyed by name, in the release's order; their
schemas come from the protocol (`Protocol.tool`)."""

from __future__ import annotations

from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH
from PersonalWAB.envs.pwab.functions.add_product_review import add_product_review
from PersonalWAB.envs.pwab.functions.base import ToolContext, WebFunction
from PersonalWAB.envs.pwab.functions.get_product_details_by_asin import get_product_details_by_asin
from PersonalWAB.envs.pwab.functions.get_recommendations_by_history import get_recommendations_by_history
from PersonalWAB.envs.pwab.functions.search_product_by_query import search_product_by_query
from PersonalWAB.envs.pwab.functions.stop import stop
from PersonalWAB.types import STOP

WEB_FUNCTIONS: dict[str, WebFunction] = {
    function.name: function
    for function in (
        WebFunction(SEARCH, search_product_by_query, True),
        WebFunction(RECOMMEND, get_recommendations_by_history, True),
        WebFunction(REVIEW, add_product_review, True),
        WebFunction("get_product_details_by_asin", get_product_details_by_asin, False),
        WebFunction(STOP, stop, False),
    )
}

__all__ = ["WEB_FUNCTIONS", "ToolContext", "WebFunction"]
