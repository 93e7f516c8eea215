"""Reading a product's price, which official data stores as a number, null or the string "None".
(What a model reads of a product is rendered by `PersonalWAB.protocol`.)"""

from __future__ import annotations

from typing import Any


def format_price(price: Any) -> str:
    """Official data stores unknown prices as null or the string "None"."""
    if price is None or price == "None" or price == "":
        return "unknown"
    try:
        return f"{float(price):.2f}"
    except (TypeError, ValueError):
        return str(price)


def price_value(price: Any) -> float | None:
    if price is None or price == "None" or price == "":
        return None
    try:
        return float(price)
    except (TypeError, ValueError):
        return None
