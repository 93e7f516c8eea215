"""search_product_by_query: BM25 over the catalogue, top 10 products."""

from __future__ import annotations

from PersonalWAB.data.product_text import render_product_list
from PersonalWAB.envs.pwab.functions.base import FunctionOutput, function_schema
from PersonalWAB.errors import ToolArgumentError

TOP_K = 10

SCHEMA = function_schema(
    "search_product_by_query",
    "Search the product catalogue with a free-text query and return the 10 best-matching "
    "products, best first. Use it when the user wants to find a specific kind of product.",
    {"query": {"type": "string", "description": "Search query describing the wanted product."}},
    ["query"],
)


def search_product_by_query(engines, query: str) -> FunctionOutput:
    if not query.strip():
        raise ToolArgumentError("query must be a non-empty string")
    asins = engines.search.search(query, k=TOP_K)
    products = [engines.data.products[asin] for asin in asins if asin in engines.data.products]
    return FunctionOutput(text=render_product_list(products), asins=[p["parent_asin"] for p in products],
                          products=products)
