"""get_recommendations_by_history: SASRec next-item recommendations."""

from __future__ import annotations

from PersonalWAB.data.product_text import render_product_list
from PersonalWAB.envs.pwab.functions.base import FunctionOutput, function_schema

TOP_K = 10

SCHEMA = function_schema(
    "get_recommendations_by_history",
    "Recommend 10 products from a sequence of products the user interacted with. Give the "
    "products' ASINs in time order, most recent last (at most 30 are used).",
    {
        "product_sequence": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Parent ASINs of past products, oldest first, most recent last.",
        }
    },
    ["product_sequence"],
)


def get_recommendations_by_history(engines, product_sequence: list[str]) -> FunctionOutput:
    asins = engines.recommender.recommend(product_sequence, k=TOP_K)
    products = [engines.data.products[asin] for asin in asins if asin in engines.data.products]
    return FunctionOutput(text=render_product_list(products), asins=[p["parent_asin"] for p in products],
                          products=products)
