"""search_product_by_query: BM25 over the catalogue; the top 10 products' stored index
contents, each behind its 0-based rank."""

from __future__ import annotations

from PersonalWAB.envs.pwab.functions.base import ToolContext

TOP_K = 10


def search_product_by_query(data: ToolContext, query: str) -> list[str]:
    engine = data.engines.search
    hits = engine.search(query, k=TOP_K)
    return [data.protocol.search_result(rank, contents) for rank, contents in enumerate(engine.contents(hits))]
