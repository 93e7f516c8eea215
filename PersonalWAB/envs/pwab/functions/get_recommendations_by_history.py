"""get_recommendations_by_history: SASRec next-item recommendations over the benchmark's
items; ASINs the recommender does not know are dropped, the last 30 are used."""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.pwab.functions.base import ToolContext

TOP_K = 10


def get_recommendations_by_history(data: ToolContext, product_sequence: Any) -> list[str]:
    asins = data.engines.recommender.recommend(product_sequence, k=TOP_K)
    # A recommended item missing from the catalogue fails with the KeyError of its ASIN, as in the release.
    return [data.protocol.recommendation_block(data.products[asin], rank) for rank, asin in enumerate(asins)]
