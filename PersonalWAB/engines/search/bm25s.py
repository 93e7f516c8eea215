"""The ``bm25s`` backend: a pure-Python stand-in for Lucene (no JVM), for speed and for
machines without Java, and its index builder.

It tokenises like Lucene (`analyzer.analyze`) and scores each term as Lucene does, one-byte
document lengths included, so its rankings match Lucene's. `import bm25s` here is the
third-party package: imports are absolute, so this module is only ever
`PersonalWAB.engines.search.bm25s` (unless this folder itself is put on sys.path, which
running a file of it as a script, rather than with `python -m`, would do).
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PersonalWAB.engines.search.analyzer import ANALYZER_ID, analyze, lucene_stored_length
from PersonalWAB.engines.search.common import (MAX_QUERY_TERMS, Render, check_k, check_query, missing_index,
                                               record_contents, replace_dir, require_products, scratch_dir,
                                               too_many_terms)
from PersonalWAB.schema_types import Product

BM25_K1 = 0.9
BM25_B = 0.4
_META_FILE = "pwab_search.json"


def _lucene_bm25_matrix(documents: list[list[str]]) -> tuple[dict[str, Any], dict[str, int]]:
    """Per (document, term) BM25 scores exactly as Lucene computes them, in bm25s's CSC layout.

    bm25s's own "lucene" method uses exact document lengths; Anserini indexes with Lucene's
    one-byte lengths (up to 1/8 off), which reorders close results. Scoring with the stored
    lengths makes the two backends agree up to float rounding.
    """
    import numpy as np
    import scipy.sparse as sp

    vocab = {term: i for i, term in enumerate(dict.fromkeys(itertools.chain.from_iterable(documents)))}
    lengths = np.array([len(terms) for terms in documents], dtype=np.int64)
    n_docs, n_terms = len(documents), len(vocab)
    token_terms = np.fromiter(map(vocab.__getitem__, itertools.chain.from_iterable(documents)),
                              dtype=np.int64, count=int(lengths.sum()))
    pairs, tf = np.unique(np.repeat(np.arange(n_docs), lengths) * n_terms + token_terms, return_counts=True)
    doc_ids, term_ids = np.divmod(pairs, n_terms)
    df = np.bincount(term_ids, minlength=n_terms)
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    stored = np.array([lucene_stored_length(int(n)) for n in lengths], dtype=np.float64)
    norm = BM25_K1 * ((1 - BM25_B) + BM25_B * stored[doc_ids] / (lengths.sum() / max(1, n_docs)))
    scores = (idf[term_ids] * (tf / (tf + norm))).astype(np.float32)
    matrix = sp.csc_matrix((scores, (doc_ids, term_ids)), shape=(n_docs, n_terms), dtype=np.float32)
    arrays = {"data": matrix.data, "indices": matrix.indices.astype(np.int32),
              "indptr": matrix.indptr.astype(np.int64), "num_docs": n_docs}
    return arrays, vocab


def build_bm25s_index(products: dict[str, Product], index_dir: Path, render: Render,
                      fingerprint: str, products_fingerprint: str = "") -> dict[str, Any]:
    """Index every product's text `render(product)` for bm25s (Lucene's BM25, k1=0.9, b=0.4)
    beside its ASIN list; `fingerprint` names the texts that rendered it and
    `products_fingerprint` the products.

    Documents are stored in ASIN order, so ranking ties by position ranks them by ASIN, as
    Anserini does.
    """
    import bm25s

    from PersonalWAB.progress import progress_bar

    index_dir = Path(index_dir)
    require_products(products, index_dir)
    started = time.perf_counter()
    asins = sorted(products)
    retriever = bm25s.BM25(method="lucene", k1=BM25_K1, b=BM25_B)
    memo: dict[str, tuple[str, ...]] = {}
    retriever.scores, retriever.vocab_dict = _lucene_bm25_matrix(
        [analyze(render(products[asin]), memo)
         for asin in progress_bar(iterable=asins, desc="bm25s: analysing products", unit="product")]
    )
    retriever.nonoccurrence_array = None  # what `index` leaves for the "lucene" method
    scratch = scratch_dir(index_dir, "build")
    try:
        retriever.save(str(scratch), show_progress=False)
        meta = {"analyzer": ANALYZER_ID, "scores": "lucene-stored-lengths", "documents": len(asins),
                "asins": asins}
        (scratch / _META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        record_contents(scratch, fingerprint, products_fingerprint)
        replace_dir(scratch, index_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"backend": "bm25s", "index_dir": str(index_dir), "documents": len(asins),
            "seconds": round(time.perf_counter() - started, 2)}


def _read_bm25s_meta(index_dir: Path) -> dict[str, Any]:
    path = index_dir / _META_FILE
    if not path.is_file():
        raise missing_index(index_dir, "bm25s", f"no bm25s index here ({_META_FILE} missing)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise missing_index(index_dir, "bm25s", f"{_META_FILE} is not valid JSON ({exc})") from None
    if meta.get("analyzer") != ANALYZER_ID:
        raise missing_index(index_dir, "bm25s", f"index was built with analyzer {meta.get('analyzer')!r}, "
                            f"this code reads {ANALYZER_ID!r}")
    return meta


class BM25sSearchEngine:
    """bm25s over memory-mapped score arrays; thread-safe, and ranks equal scores by ASIN as
    Anserini does. `contents_of` gives a document's text (the index stores only scores):
    the same rendering it was built from, which its contents fingerprint vouches for."""

    name = "bm25s"

    def __init__(self, index_dir: Path | str, contents_of: Callable[[str], str]):
        import bm25s

        self.index_dir = Path(index_dir)
        self._contents_of = contents_of
        self._asins: list[str] = _read_bm25s_meta(self.index_dir)["asins"]
        try:
            self._retriever = bm25s.BM25.load(str(self.index_dir), mmap=True)
        except (OSError, ValueError) as exc:
            raise missing_index(self.index_dir, "bm25s", f"unreadable bm25s index ({exc})") from None
        if self._retriever.scores["num_docs"] != len(self._asins):
            raise missing_index(self.index_dir, "bm25s", f"{_META_FILE} lists {len(self._asins)} products, "
                                f"the scores {self._retriever.scores['num_docs']}")
        self._vocab: dict[str, int] = self._retriever.vocab_dict

    def search(self, query: str, k: int = 10) -> list[str]:
        """ASINs of the best `k` products, best first ([] when no word of the query is indexed)."""
        check_query(query)
        k = check_k(k)
        terms = analyze(query)
        if len(set(terms)) > MAX_QUERY_TERMS:
            raise too_many_terms()
        ids = [self._vocab[term] for term in terms if term in self._vocab]
        return self._top_k(ids, k) if ids else []

    def contents(self, docids: list[str]) -> list[str]:
        return [self._contents_of(docid) for docid in docids]

    def batch_search(self, queries: list[str], k: int = 10) -> list[list[str]]:
        """One search per query: scoring is already vectorised per query."""
        for query in queries:
            check_query(query)
        return [self.search(query, k) for query in queries]

    def _top_k(self, term_ids: list[int], k: int) -> list[str]:
        import numpy as np

        raw = self._retriever.get_scores_from_ids(term_ids)
        matching = np.flatnonzero(raw > 0)
        # Lucene adds the same float32 terms in another order; rounding away that last-bit
        # noise lets its exact ties (ranked by ASIN) be ties here too.
        scores = np.round(raw[matching], 5)
        if len(matching) > k:
            keep = scores >= np.partition(scores, len(scores) - k)[len(scores) - k]  # every tie at the cut
            matching, scores = matching[keep], scores[keep]
        return [self._asins[i] for i in matching[np.lexsort((matching, -scores))[:k]]]
