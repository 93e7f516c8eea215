"""The engines behind the web functions, opened lazily and shared by all tasks.

One `Engines` object per (data directory, search backend, protocol) holds the BM25
search engine, the SASRec recommender and the MiniLM embedder. Each is opened on
first use under a lock, so concurrent tasks share one instance of each, and nothing
here starts the JVM before a search (`run.py` with the Lucene backend starts it in the
background while the data loads, since almost every run searches). The protocol renders the products a
search index holds; each (texts, products) pair has its own index folder
(`engines.search.search_index_dir`), and an index of other texts or products is refused with
the command that builds the right one.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.engines.search import BACKENDS, SearchEngine, open_search_engine, search_index_dir
from PersonalWAB.engines.search.common import index_mismatch
from PersonalWAB.engines.text_embedding import TextEmbedder, shared_embedder
from PersonalWAB.errors import DataError
from PersonalWAB.protocol import Protocol, load_protocol


class Engines:
    def __init__(self, data: BenchmarkData, search_backend: str = "lucene", protocol: Protocol | None = None,
                 search_index: Path | None = None, checkpoint: Path | None = None,
                 item_map: Path | None = None, embedder: TextEmbedder | None = None):
        if search_backend not in BACKENDS:
            raise DataError(f"unknown search backend {search_backend!r}; expected one of {BACKENDS}")
        artifacts = data.artifacts
        self.data = data
        self.protocol = protocol or load_protocol()
        self.search_backend = search_backend
        self.search_index = Path(search_index) if search_index else search_index_dir(data, search_backend,
                                                                                       self.protocol)
        self.checkpoint = Path(checkpoint) if checkpoint else artifacts.checkpoint
        self.item_map = Path(item_map) if item_map else artifacts.item_map
        self.embedder = embedder or shared_embedder()
        self._search: Any = None
        self._recommender: Any = None
        self._lock = threading.Lock()

    @property
    def search(self) -> SearchEngine:
        if self._search is None:
            with self._lock:
                if self._search is None:
                    mismatch = self.search_index.is_dir() and index_mismatch(
                        self.search_index, self.protocol.contents_fingerprint, self.data.products_fingerprint)
                    if mismatch:
                        raise DataError(
                            f"{self.search_index}: {mismatch} than this run's ({self.protocol.name} texts over "
                            f"the product files of {self.data.data_dir} as they are now); "
                            f"build its own with `python -m PersonalWAB.build --data_dir {self.data.data_dir} "
                            f"--search_backend {self.search_backend}` (with the same --protocol_file)")
                    self._search = open_search_engine(
                        self.search_backend, self.search_index,
                        lambda asin: self.protocol.product_block(self.data.products[asin]))
        return self._search

    @property
    def recommender(self) -> Any:
        if self._recommender is None:
            with self._lock:
                if self._recommender is None:
                    from PersonalWAB.engines.recommender.engine import SASRecRecommender

                    self._recommender = SASRecRecommender(self.checkpoint, self.item_map)
        return self._recommender


_SHARED: dict[tuple[Path, str, str], Engines] = {}
_SHARED_LOCK = threading.Lock()


def shared_engines(data: BenchmarkData, search_backend: str = "lucene", protocol: Protocol | None = None) -> Engines:
    """The one `Engines` of a data directory, backend and protocol, created on first request."""
    protocol = protocol or load_protocol()
    key = (data.data_dir, search_backend, protocol.contents_fingerprint)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Engines(data, search_backend, protocol)
        return _SHARED[key]
