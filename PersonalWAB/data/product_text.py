"""One text rendering of a product, shared by the search index, search/recommend
results and product-detail lookups, so what the engine indexes is what the agent reads."""

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


def product_to_text(product: dict[str, Any]) -> str:
    details = product.get("details") or {}
    detail_text = "; ".join(f"{key}: {value}" for key, value in details.items())
    lines = [
        f"Title: {product.get('title', '')}",
        f"Main Category: {product.get('main_category', '')}",
        f"Categories: {', '.join(product.get('categories') or [])}",
        f"Store: {product.get('store', '')}",
        f"Price: {format_price(product.get('price'))}",
        f"Average Rating: {product.get('average_rating', '')} ({product.get('rating_number', 0)} ratings)",
        f"Features: {' '.join(product.get('features') or [])}",
        f"Description: {' '.join(product.get('description') or [])}",
        f"Details: {detail_text}",
        f"Parent Asin: {product.get('parent_asin', '')}",
    ]
    return "\n".join(lines)


def render_product_list(products: list[dict[str, Any]]) -> str:
    """The text an agent sees for a search or recommendation result."""
    if not products:
        return "No products found."
    return "\n\n".join(
        f"Product {rank}:\n{product_to_text(product)}" for rank, product in enumerate(products, start=1)
    )
