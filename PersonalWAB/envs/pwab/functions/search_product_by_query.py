"""search_product_by_query: BM25 over the catalogue; the top 10 products' stored index
contents, each behind its 0-based rank. `search_many` is its batch form (PUMA's scoring)."""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.pwab.functions.base import ToolContext
from PersonalWAB.errors import ToolArgumentError

TOP_K = 10


def search_product_by_query(data: ToolContext, query: str) -> list[str]:
    engine = data.engines.search
    hits = engine.search(query, k=TOP_K)
    return [data.protocol.search_result(rank, contents) for rank, contents in enumerate(engine.contents(hits))]


def search_many(data: ToolContext, calls: list[dict[str, Any]]) -> list[list[str] | None]:
    """What each call returns (None where it fails), searched in one batch; when one query
    is too long for Lucene, query by query."""
    if not calls:
        return []
    engine = data.engines.search
    queries = [arguments["query"] for arguments in calls]
    try:
        hits: list[Any] = engine.batch_search(queries, k=TOP_K)
    except ToolArgumentError:
        hits = []
        for query in queries:
            try:
                hits.append(engine.search(query, k=TOP_K))
            except ToolArgumentError:
                hits.append(None)
    return [None if found is None else
            [data.protocol.search_result(rank, text) for rank, text in enumerate(engine.contents(found))]
            for found in hits]
