"""The ``lucene`` backend: Anserini's Lucene BM25 as Pyserini runs it, and its index builder.

It opens indexes built here and the official prebuilt index alike, because both store the
product's parent_asin as the document id and the raw document (whose ``contents`` the agent
is shown). Every Java call goes through `jvm.on_jvm`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from PersonalWAB.engines.search.common import (Render, check_k, check_query, missing_index, record_contents,
                                               replace_dir, require_products, scratch_dir, too_many_terms)
from PersonalWAB.engines.search.jvm import anserini, on_jvm
from PersonalWAB.errors import DataError
from PersonalWAB.paths import PACKAGE_DIR
from PersonalWAB.schema_types import Product


def _write_json_collection(products: dict[str, Product], folder: Path, files: int, render: Render) -> None:
    """Write `{"id", "contents"}` lines, split into `files` parts so Anserini's threads share the work."""
    asins = list(products)
    per_file = -(-len(asins) // files)
    for part in range(files):
        chunk = asins[part * per_file : (part + 1) * per_file]
        with open(folder / f"products_{part:02d}.jsonl", "w", encoding="utf-8") as out:
            for asin in chunk:
                out.write(json.dumps({"id": asin, "contents": render(products[asin])}) + "\n")


def _index_collection_on_jvm(collection: Path, index: Path, threads: int) -> dict[str, int]:
    """Pyserini's `-collection JsonCollection -generator DefaultLuceneDocumentGenerator
    -storePositions -storeDocvectors -storeRaw`, through Anserini's indexer object."""
    java = anserini()
    args = java.IndexArgs()
    args.collectionClass = "JsonCollection"
    args.generatorClass = "DefaultLuceneDocumentGenerator"
    args.input = str(collection)
    args.index = str(index)
    args.threads = threads
    args.storePositions = True
    args.storeDocvectors = True
    args.storeRaw = True
    args.quiet = True
    indexer = java.IndexCollection(args)
    indexer.run()
    counters = indexer.getCounters()
    return {name: getattr(counters, name).get() for name in ("indexed", "empty", "skipped", "errors")}


def _indexer_command(collection: Path, index: Path, threads: int, counts_file: Path) -> list[str]:
    """The child process that indexes `collection` into `index` (see `_main`)."""
    return [sys.executable, "-m", "PersonalWAB.engines.search.lucene", str(collection), str(index), str(threads),
            str(counts_file)]


def _index_in_child(collection: Path, index: Path, threads: int) -> dict[str, int]:
    """Run Anserini's indexer in a child process with a JVM of its own, so an interrupt
    (Ctrl-C, SIGTERM) stops the build at once: an indexing call on this process's JVM cannot
    be interrupted, and would hold the exit until it ends. The child is killed, never left
    writing into the scratch folder the caller removes."""
    counts_file = index.parent / "counts.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(PACKAGE_DIR.parent),
                                                                     os.environ.get("PYTHONPATH"))))}
    child = subprocess.Popen(_indexer_command(collection, index, threads, counts_file), env=env)
    try:
        code = child.wait()
    except BaseException:
        child.kill()
        child.wait()
        raise
    if code != 0:
        raise DataError(f"{index}: the Anserini indexer ended with exit code {code} (its messages are above)")
    return json.loads(counts_file.read_text(encoding="utf-8"))


def build_lucene_index(products: dict[str, Product], index_dir: Path, render: Render,
                       fingerprint: str, threads: int = 2, products_fingerprint: str = "") -> dict[str, Any]:
    """Index every product's text `render(product)` (id = parent_asin) with Anserini, replacing
    `index_dir` when done; `fingerprint` names the texts that rendered it and
    `products_fingerprint` the products. Nothing half-built is left when it is interrupted
    (and what a killed build left is removed by the next, `scratch.remove_stale`).

    Results do not depend on `threads`: Anserini breaks score ties by document id, not by
    the (thread-dependent) order documents entered the index.
    """
    from PersonalWAB.progress import stage

    index_dir = Path(index_dir)
    require_products(products, index_dir)
    started = time.perf_counter()
    scratch = scratch_dir(index_dir, "build")
    try:
        collection = scratch / "collection"
        collection.mkdir()
        _write_json_collection(products, collection, max(1, min(threads, len(products))), render)
        with stage(f"Anserini indexing {len(products)} products"):
            counts = _index_in_child(collection, scratch / "index", max(1, threads))
        if counts["indexed"] != len(products):
            raise DataError(f"{index_dir}: Anserini indexed {counts} of {len(products)} products")
        record_contents(scratch / "index", fingerprint, products_fingerprint)
        replace_dir(scratch / "index", index_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"backend": "lucene", "index_dir": str(index_dir), "documents": len(products),
            "seconds": round(time.perf_counter() - started, 2)}


def _is_lucene_index(index_dir: Path) -> bool:
    return index_dir.is_dir() and any(index_dir.glob("segments_*"))


def _is_too_many_clauses(exc: Exception) -> bool:
    return "TooManyClauses" in str(exc)


class LuceneSearchEngine:
    """Anserini's SimpleSearcher with Pyserini's defaults (BM25 k1=0.9, b=0.4, bag-of-words
    queries, so quotes, colons or `AND` in a query are plain text, never query syntax)."""

    name = "lucene"

    def __init__(self, index_dir: Path | str):
        self.index_dir = Path(index_dir)
        if not _is_lucene_index(self.index_dir):
            raise missing_index(self.index_dir, "lucene", "no Lucene index here")
        self._searcher: Any = None  # opened on the JVM thread at first search
        self._contents: dict[str, str] = {}  # docid -> stored contents, read once

    def search(self, query: str, k: int = 10) -> list[str]:
        """ASINs of the best `k` products, best first ([] when no word of the query is indexed)."""
        return on_jvm(self._search_on_jvm, check_query(query), check_k(k))

    def contents(self, docids: list[str]) -> list[str]:
        """The stored `contents` of each document: what the agent is shown for a hit."""
        missing = [d for d in dict.fromkeys(docids) if d not in self._contents]
        if missing:
            self._contents.update(zip(missing, on_jvm(self._contents_on_jvm, missing)))
        return [self._contents[d] for d in docids]

    def _contents_on_jvm(self, docids: list[str]) -> list[str]:
        searcher = self._open_on_jvm()
        found = []
        for docid in docids:
            document = searcher.doc(docid)
            raw = document.get("raw") if document is not None else None
            if raw is None:
                raise DataError(f"{self.index_dir}: document {docid!r} has no stored raw text; rebuild the index")
            found.append(json.loads(raw)["contents"])
        return found

    def batch_search(self, queries: list[str], k: int = 10) -> list[list[str]]:
        """Many queries in one JVM round trip, searched by Anserini's own thread pool."""
        checked = [check_query(query) for query in queries]
        return on_jvm(self._batch_search_on_jvm, checked, check_k(k))

    def _open_on_jvm(self) -> Any:
        if self._searcher is None:
            self._searcher = anserini().SimpleSearcher(str(self.index_dir))
        return self._searcher

    def _search_on_jvm(self, query: str, k: int) -> list[str]:
        try:
            hits = self._open_on_jvm().search(query, k)
        except anserini().JavaException as exc:
            if _is_too_many_clauses(exc):
                raise too_many_terms() from None
            raise
        return [hit.docid for hit in hits]

    def _batch_search_on_jvm(self, queries: list[str], k: int) -> list[list[str]]:
        java = anserini()
        texts, ids = java.ArrayList(), java.ArrayList()
        for position, query in enumerate(queries):
            texts.add(query)
            ids.add(str(position))
        try:
            found = self._open_on_jvm().batch_search(texts, ids, k, max(1, min(8, os.cpu_count() or 1)))
        except java.JavaException as exc:
            if _is_too_many_clauses(exc):
                raise too_many_terms() from None
            raise
        return [[hit.docid for hit in found.get(str(position))] for position in range(len(queries))]


def _exit_when_orphaned(parent: int) -> None:
    """End this indexer when the build that started it is gone (even killed with SIGKILL)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _main(argv: list[str]) -> int:
    """The indexer child of `_index_in_child`: index, then write Anserini's counters to a file.
    Interrupts are left to the parent, which kills this process."""
    collection, index, threads, counts_file = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    counts = on_jvm(_index_collection_on_jvm, Path(collection), Path(index), int(threads))
    Path(counts_file).write_text(json.dumps(counts), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
