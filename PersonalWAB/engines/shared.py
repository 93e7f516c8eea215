"""The engines behind the web functions, opened lazily and shared by all tasks.

One `Engines` object per (data directory, search backend, protocol) holds the BM25
search engine, the SASRec recommender and the MiniLM embedder. Each is opened on
first use under a lock, so concurrent tasks share one instance of each, and nothing
here starts the JVM before a search (`run.py` with the Lucene backend starts it in the
background while the data loads, since almost every run searches). The protocol renders the products a
search index holds; each (texts, products) pair has its own index folder
(`engines.search.search_index_dir`), and an index of other texts or products is refused with
the command that builds the right one.

A failure of an engine itself (an unreadable index, checkpoint or item map, a JVM
exception) raises `EngineError`, which the environment does not show the agent: the task
is recorded as errored. `Engines.check` opens and probes the engines a run needs before
its first task, so a broken artefact stops the run at once, named with its rebuild command.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.engines.search import BACKENDS, SearchEngine, open_search_engine, search_index_dir
from PersonalWAB.engines.search.common import index_mismatch
from PersonalWAB.engines.text_embedding import TextEmbedder, shared_embedder
from PersonalWAB.errors import DataError, EngineError, ToolArgumentError
from PersonalWAB.protocol import Protocol, load_protocol


class GuardedSearch:
    """A search engine whose own failures raise `EngineError`; the agent's bad arguments
    (`ToolArgumentError`) reach the agent as they are."""

    def __init__(self, engine: SearchEngine, index_dir: Path):
        self.engine = engine
        self.index_dir = index_dir

    def _call(self, method: Any, *args: Any) -> Any:
        try:
            return method(*args)
        except ToolArgumentError:
            raise
        except Exception as exc:
            raise EngineError(f"the {self.engine.name} search engine over {self.index_dir} failed: "
                              f"{type(exc).__name__}: {exc}") from exc

    @property
    def name(self) -> str:
        return self.engine.name

    def search(self, query: str, k: int = 10) -> list[str]:
        return self._call(self.engine.search, query, k)

    def batch_search(self, queries: list[str], k: int = 10) -> list[list[str]]:
        return self._call(self.engine.batch_search, queries, k)

    def contents(self, docids: list[str]) -> list[str]:
        return self._call(self.engine.contents, docids)


def rebuild_hint(data_dir: Path, checkpoint: Path, item_map: Path) -> str:
    """How to rebuild a data directory's recommender (a checkpoint is trained with its item map)."""
    return (f"remove {checkpoint} and {item_map} and run `python -m PersonalWAB.build --data_dir {data_dir}` "
            "(or fetch the official ones)")


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
    def search(self) -> GuardedSearch:
        if self._search is None:
            with self._lock:
                if self._search is None:
                    try:
                        self._search = GuardedSearch(self._open_search(), self.search_index)
                    except Exception as exc:
                        raise EngineError(str(exc) if isinstance(exc, DataError) else
                                          f"{self.search_index}: cannot open the {self.search_backend} index "
                                          f"({type(exc).__name__}: {exc})") from exc
        return self._search

    def _open_search(self) -> SearchEngine:
        mismatch = self.search_index.is_dir() and index_mismatch(
            self.search_index, self.protocol.contents_fingerprint, self.data.products_fingerprint)
        if mismatch:
            raise DataError(
                f"{self.search_index}: {mismatch} than this run's ({self.protocol.name} texts over "
                f"the product files of {self.data.data_dir} as they are now); "
                f"build its own with `python -m PersonalWAB.build --data_dir {self.data.data_dir} "
                f"--search_backend {self.search_backend}` (with the same --protocol_file)")
        return open_search_engine(self.search_backend, self.search_index,
                                  lambda asin: self.protocol.product_block(self.data.products[asin]))

    @property
    def recommender(self) -> Any:
        if self._recommender is None:
            with self._lock:
                if self._recommender is None:
                    try:
                        self._check_recommender_inputs()
                        self._recommender = self._open_recommender()
                    except DataError as exc:
                        hint = rebuild_hint(self.data.data_dir, self.checkpoint, self.item_map)
                        raise EngineError(f"{exc}; {hint}") from exc
        return self._recommender

    def _open_recommender(self) -> Any:
        """The checkpoint's exported ONNX graph where the build left one checked against PyTorch
        (`PersonalWAB.engines.recommender.exported`), else the PyTorch recommender."""
        from PersonalWAB.engines.recommender import exported
        from PersonalWAB.engines.recommender.engine import SASRecRecommender, load_item_map

        if exported.backend() == "onnx":
            found = exported.usable_graph(self.checkpoint)
            if found is not None:
                return exported.OnnxSASRec(found[0], load_item_map(self.item_map), found[1])
            print(f"note: SASRec answers on PyTorch: {self.checkpoint} has no export checked against it "
                  "(run_args.recommender_backend names the backend asked for; the build exports it)", file=sys.stderr)
        return SASRecRecommender(self.checkpoint, self.item_map)

    def _check_recommender_inputs(self) -> None:
        """Refuse a checkpoint and item map made for other data: they load, but answer `[]` or
        items of another catalogue, and every recommend task would score 0 as the agent's fault."""
        from PersonalWAB.engines.recommender.engine import foreign_recommender, trained_on_other_data

        if not self.checkpoint.is_file():
            return  # SASRecRecommender names the missing checkpoint
        problem = foreign_recommender(self.checkpoint, self.item_map, self.data.products)
        if problem:
            raise DataError(problem)
        if trained_on_other_data(self.checkpoint, self.data):
            raise DataError(f"{self.checkpoint}: was trained on other products or histories than the files of "
                            f"{self.data.data_dir} (its record's fingerprint differs)")

    def check(self, search: bool, recommender: bool) -> None:
        """Open and probe the engines a run needs, before its first task: a broken artefact
        raises `DataError` naming it (and how to rebuild it), instead of failing every task."""
        try:
            if search:
                hits = self.search.search(self._probe_query(), 1)
                self.search.contents(hits)
            if recommender:
                self.recommender.recommend(self.recommender.candidate_asins[:1], 1)
        except EngineError as exc:
            raise DataError(f"a benchmark artefact is broken: {exc}") from None

    def _probe_query(self) -> str:
        titles = (product["title"] for product in self.data.products.values())
        return str(next(titles, None) or "product")


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
