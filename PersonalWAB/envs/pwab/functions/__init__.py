"""The web functions an agent can call, keyed by name.

Each function lives in its own module beside its JSON schema; the recommender
keeps only the last 30 ASINs of a sequence (its model's maximum length).
"""

from __future__ import annotations

from PersonalWAB.envs.pwab.functions import (
    add_product_review,
    get_product_details_by_asin,
    get_recommendations_by_history,
    search_product_by_query,
    stop,
)
from PersonalWAB.envs.pwab.functions.base import FunctionOutput, WebFunction

WEB_FUNCTIONS: dict[str, WebFunction] = {
    function.name: function
    for function in (
        WebFunction(search_product_by_query.SCHEMA, search_product_by_query.search_product_by_query, True),
        WebFunction(get_recommendations_by_history.SCHEMA,
                    get_recommendations_by_history.get_recommendations_by_history, True),
        WebFunction(add_product_review.SCHEMA, add_product_review.add_product_review, True),
        WebFunction(get_product_details_by_asin.SCHEMA, get_product_details_by_asin.get_product_details_by_asin,
                    False),
        WebFunction(stop.SCHEMA, stop.stop, False),
    )
}

FUNCTION_FOR_TASK_TYPE = {
    "search": "search_product_by_query",
    "recommend": "get_recommendations_by_history",
    "review": "add_product_review",
}

__all__ = ["WEB_FUNCTIONS", "FUNCTION_FOR_TASK_TYPE", "FunctionOutput", "WebFunction"]
