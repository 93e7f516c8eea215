"""BM25 search engines behind `search_product_by_query`, and the builders of their indexes.

Two backends answer the same question ("which ten products best match this query?"):

* ``lucene`` (`lucene`) -- the official one: Anserini's Lucene BM25 as Pyserini runs it
  (k1=0.9, b=0.4, Porter stemming, Lucene's English stop words). It opens indexes built
  here and the official prebuilt index alike, because both store the product's
  parent_asin as the document id and the raw document (whose ``contents`` the agent is shown).
* ``bm25s`` (`bm25s`) -- a pure-Python stand-in (no JVM) for speed and for machines without
  Java: an analyzer written to tokenise like Lucene's (`analyzer`), and per-term scores
  computed as Lucene computes them (one-byte document lengths included), so its rankings
  match Lucene's.

Each product is indexed as the text the protocol renders for it (`Protocol.product_block`),
which is also what the agent reads for a hit. An index lives in a folder named by the
fingerprints of those texts and of the product files (`common.index_dir_for`) and records
them (`common.index_record`), so a run with other texts or edited products uses (or builds)
its own index instead of showing stale text, and never disturbs another run's.

This module only names the backends and dispatches to them: a backend's module (and the JVM,
bm25s or scipy behind it) is imported when that backend is opened or built.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol

from PersonalWAB.engines.search.common import Render
from PersonalWAB.schema_types import Product

BACKENDS = ("lucene", "bm25s")


class SearchEngine(Protocol):
    """What the web functions need from a search backend."""

    name: str

    def search(self, query: str, k: int = 10) -> list[str]: ...

    def batch_search(self, queries: list[str], k: int = 10) -> list[list[str]]: ...

    def contents(self, docids: list[str]) -> list[str]: ...


def search_index_dir(data: Any, backend: str, protocol: Any) -> Path:
    """The index a run over `data` (a `BenchmarkData`) with `protocol`'s product texts reads."""
    from PersonalWAB.engines.search.common import index_dir_for

    return index_dir_for(data.artifacts, backend, protocol.contents_fingerprint, data.products_fingerprint)


def open_search_engine(backend: str, index_dir: Path | str, contents_of: Callable[[str], str]) -> SearchEngine:
    """The engine of `backend` ("lucene" or "bm25s") over the index in `index_dir`;
    `contents_of` renders a document's text where the index does not store it (bm25s)."""
    if backend == "lucene":
        from PersonalWAB.engines.search.lucene import LuceneSearchEngine

        return LuceneSearchEngine(index_dir)
    if backend == "bm25s":
        from PersonalWAB.engines.search.bm25s import BM25sSearchEngine

        return BM25sSearchEngine(index_dir, contents_of)
    raise _unknown_backend(backend)


def build_index(backend: str, products: dict[str, Product], index_dir: Path, render: Render,
                fingerprint: str, threads: int = 2, products_fingerprint: str = "") -> dict[str, Any]:
    """Build `backend`'s index of `products` (rendered by `render`, whose texts' fingerprint is
    `fingerprint`; the products' is `products_fingerprint`) into `index_dir`; `threads` are
    Anserini's indexing threads (the bm25s build has none)."""
    if backend == "lucene":
        from PersonalWAB.engines.search.lucene import build_lucene_index

        return build_lucene_index(products, index_dir, render, fingerprint, threads=threads,
                                  products_fingerprint=products_fingerprint)
    if backend == "bm25s":
        from PersonalWAB.engines.search.bm25s import build_bm25s_index

        return build_bm25s_index(products, index_dir, render, fingerprint, products_fingerprint)
    raise _unknown_backend(backend)


def _unknown_backend(backend: str) -> ValueError:
    return ValueError(f"unknown search backend {backend!r}; expected one of {BACKENDS}")
