"""get_recommendations_by_history: SASRec next-item recommendations over the benchmark's
items; ASINs the recommender does not know are dropped, the last 30 are used.
`recommend_many` is its batch form (PUMA's scoring)."""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.pwab.functions.base import ToolContext

TOP_K = 10


def get_recommendations_by_history(data: ToolContext, product_sequence: Any) -> list[str]:
    asins = data.engines.recommender.recommend(product_sequence, k=TOP_K)
    # A recommended item missing from the catalogue fails with the KeyError of its ASIN, as in the release.
    return [data.protocol.recommendation_block(data.products[asin], rank) for rank, asin in enumerate(asins)]


def recommend_many(data: ToolContext, calls: list[dict[str, Any]]) -> list[list[str] | None]:
    """What each call returns (None where a recommended item is missing from the catalogue),
    recommended in one batch."""
    if not calls:
        return []
    values: list[list[str] | None] = []
    sequences = [arguments["product_sequence"] for arguments in calls]
    for asins in data.engines.recommender.recommend_batch(sequences, k=TOP_K):
        products = [data.products[asin] for asin in asins if asin in data.products]
        values.append(None if len(products) < len(asins) else
                      [data.protocol.recommendation_block(product, rank) for rank, product in enumerate(products)])
    return values
