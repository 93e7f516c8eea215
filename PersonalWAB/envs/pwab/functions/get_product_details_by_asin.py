"""get_product_details_by_asin: full details of one product (offered to RecMind)."""

from __future__ import annotations

from PersonalWAB.data.product_text import product_to_text
from PersonalWAB.envs.pwab.functions.base import FunctionOutput, function_schema

NOT_FOUND = "Product not found."

SCHEMA = function_schema(
    "get_product_details_by_asin",
    "Look up the full details of a product by its parent ASIN.",
    {"product_asin": {"type": "string", "description": "The product's parent ASIN."}},
    ["product_asin"],
)


def get_product_details_by_asin(engines, product_asin: str) -> FunctionOutput:
    product = engines.data.products.get(product_asin.strip())
    return FunctionOutput(text=product_to_text(product) if product else NOT_FOUND)
