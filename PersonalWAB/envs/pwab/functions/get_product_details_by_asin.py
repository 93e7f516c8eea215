"""get_product_details_by_asin: everything about one product (offered to RecMind)."""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.pwab.functions.base import ToolContext


def get_product_details_by_asin(data: ToolContext, product_asin: Any) -> str:
    product = data.products.get(product_asin)
    return data.protocol.details_block(product) if product else data.protocol.text("details.not_found")
