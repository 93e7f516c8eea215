"""BM25 search engines behind `search_product_by_query`, and the builders of their indexes.

Two backends answer the same question ("which ten products best match this query?"):

* ``lucene`` -- the official one: Anserini's Lucene BM25 as Pyserini runs it (k1=0.9,
  b=0.4, Porter stemming, Lucene's English stop words). It opens indexes built here and
  the official prebuilt index alike, because both store the product's parent_asin as
  the document id and the raw document (whose ``contents`` the agent is shown).
* ``bm25s`` -- a pure-Python stand-in (no JVM) for speed and for machines without Java:
  an analyzer written to tokenise like Lucene's, and per-term scores computed as Lucene
  computes them (one-byte document lengths included), so its rankings match Lucene's.

Each product is indexed as the text the protocol renders for it (`Protocol.product_block`),
which is also what the agent reads for a hit. An index records which texts rendered it
(`contents_fingerprint`), so a run with other texts rebuilds it instead of showing stale text.

Lucene lives in a JVM reached through pyjnius. pyjnius attaches every Python thread that
touches Java to the JVM, and threads that end while attached are never cleaned up, so all
Java calls run on one long-lived worker thread (`_on_jvm`); the benchmark's many task
threads only hand work to it. The JVM starts on the first Lucene call, never at import.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol, TypeVar

from PersonalWAB.errors import DataError, ToolArgumentError
from PersonalWAB.paths import OFFICIAL_DATA_DIR, ArtifactPaths

T = TypeVar("T")

BACKENDS = ("lucene", "bm25s")
BM25_K1 = 0.9
BM25_B = 0.4
# Lucene refuses boolean queries with more clauses than this (one clause per distinct
# term); the bm25s engine applies the same limit so both backends fail alike.
MAX_QUERY_TERMS = 1024


class SearchEngine(Protocol):
    """What the web functions need from a search backend."""

    name: str

    def search(self, query: str, k: int = 10) -> list[str]: ...

    def batch_search(self, queries: list[str], k: int = 10) -> list[list[str]]: ...

    def contents(self, docids: list[str]) -> list[str]: ...


# --------------------------------------------------------------------------- arguments


def check_query(query: Any) -> str:
    """Reject what no backend can search, with the message the agent will read; an empty
    query is searched (and finds nothing), as in the release."""
    if not isinstance(query, str):
        raise ToolArgumentError("query must be a string")
    return query


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ToolArgumentError(f"k must be a positive integer, got {k!r}")
    return k


def _too_many_terms() -> ToolArgumentError:
    return ToolArgumentError(f"query has more than {MAX_QUERY_TERMS} distinct terms; shorten it")


def _build_command(index_dir: Path, backend: str) -> str:
    """The command that (re)builds `index_dir`, with the data directory when it can be inferred."""
    attribute = "lucene_index" if backend == "lucene" else "bm25s_index"
    for data_dir in (OFFICIAL_DATA_DIR, index_dir.parent.parent):
        if getattr(ArtifactPaths.for_data_dir(data_dir), attribute).resolve() == index_dir.resolve():
            return f"bash scripts/tools/build_search_index.sh --data_dir {data_dir} --backend {backend}"
    return (
        f"bash scripts/tools/build_search_index.sh --data_dir DATA_DIR --backend {backend} "
        f"--index_dir {index_dir}"
    )


def _missing_index(index_dir: Path, backend: str, what: str) -> DataError:
    return DataError(f"{index_dir}: {what}. Build it with `{_build_command(index_dir, backend)}`.")


# --------------------------------------------------------------------------- building helpers


def _replace_dir(built: Path, target: Path) -> None:
    """Move a finished index into place so readers never see a half-written one."""
    if target.exists():
        retired = target.with_name(f".{target.name}.{os.getpid()}.old-{time.time_ns()}")
        os.replace(target, retired)
        os.replace(built, target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(built, target)


def _require_products(products: dict[str, dict[str, Any]], index_dir: Path) -> None:
    if not products:
        raise DataError(f"{index_dir}: no products to index")


CONTENTS_FILE = "pwab_contents.json"
Render = Callable[[dict[str, Any]], str]


def contents_fingerprint(index_dir: Path) -> str | None:
    """Which texts rendered an index built here; None for an index built elsewhere (the
    official prebuilt one) or an unreadable record."""
    path = Path(index_dir) / CONTENTS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("contents")
    except (OSError, ValueError, AttributeError):
        return None


def _record_contents(index_dir: Path, fingerprint: str) -> None:
    (index_dir / CONTENTS_FILE).write_text(json.dumps({"contents": fingerprint}), encoding="utf-8")


def _scratch_dir(target: Path, purpose: str) -> Path:
    """A scratch folder beside `target`, on the same file system so the final rename is atomic;
    named after this process so a later run can remove it if the process is killed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.{purpose}-", dir=target.parent))


# --------------------------------------------------------------------------- the JVM thread

_jvm_thread_id: int | None = None
_anserini: SimpleNamespace | None = None  # Java classes; read and written on the JVM thread only


def _remember_jvm_thread() -> None:
    global _jvm_thread_id
    _jvm_thread_id = threading.get_ident()


_JVM_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pwab-jvm", initializer=_remember_jvm_thread)

_JVM_OPTIONS = (
    # Leave SIGINT/SIGTERM to Python, so Ctrl-C still raises KeyboardInterrupt.
    "-Xrs",
    # One log4j context for the whole JVM: with the default per-class-loader selector,
    # log-level changes made through Configurator miss Anserini's loggers under pyjnius.
    "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector",
    # The quick (C1) JIT only: on 2 busy cores the optimising compiler's threads cost more
    # than they win back in a run's queries (start + first query 1.2-1.5 s of CPU against
    # 1.9-2.6 s, and 100 queries after it 0.5-1.3 s against 1.9-3.0 s; load average ~13).
    "-XX:TieredStopAtLevel=1",
)


def _on_jvm(function: Callable[..., T], *args: Any) -> T:
    """Run `function` on the single thread that owns every Java call."""
    if threading.get_ident() == _jvm_thread_id:
        return function(*args)
    return _JVM_EXECUTOR.submit(function, *args).result()


def start_jvm_early() -> None:
    """Start the JVM on its thread without waiting for it, so a run that will search
    overlaps the JVM's start-up (~1.5 s of class loading) with loading its data."""
    _JVM_EXECUTOR.submit(_java)


def _java() -> SimpleNamespace:
    """Anserini's classes, starting the JVM on first use (JVM thread only)."""
    global _anserini
    if _anserini is None:
        _anserini = _start_jvm()
    return _anserini


def _start_jvm() -> SimpleNamespace:
    import jnius_config

    if not jnius_config.vm_running:
        jnius_config.add_options(*_JVM_OPTIONS)
    # pyserini.pyclass puts the bundled Anserini fat jar on the class path and starts the JVM;
    # pyserini.search.lucene would also load faiss, transformers and an OpenAI client.
    from pyserini.pyclass import JArrayList, autoclass
    from jnius import JavaException

    _quiet_java_logging(autoclass)
    return SimpleNamespace(
        JavaException=JavaException,
        ArrayList=JArrayList,
        SimpleSearcher=autoclass("io.anserini.search.SimpleSearcher"),
        IndexCollection=autoclass("io.anserini.index.IndexCollection"),
        IndexArgs=autoclass("io.anserini.index.IndexCollection$Args"),
    )


def _quiet_java_logging(autoclass: Callable[[str], Any]) -> None:
    """Silence Anserini's INFO chatter, which log4j writes to the process's stdout.

    Under Java 17, log4j also prints a one-off warning about `getCallerClass` to
    System.out when it first initialises; stdout is muted around that moment.
    """
    system = autoclass("java.lang.System")
    print_stream = autoclass("java.io.PrintStream")
    stdout = system.out
    system.setOut(print_stream(autoclass("java.io.OutputStream").nullOutputStream()))
    try:
        autoclass("org.apache.logging.log4j.core.config.Configurator").setRootLevel(
            autoclass("org.apache.logging.log4j.Level").WARN
        )
    finally:
        system.setOut(stdout)


# --------------------------------------------------------------------------- Lucene


def _write_json_collection(products: dict[str, dict[str, Any]], folder: Path, files: int, render: Render) -> None:
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
    java = _java()
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


def build_lucene_index(products: dict[str, dict[str, Any]], index_dir: Path, render: Render,
                       fingerprint: str, threads: int = 2) -> dict[str, Any]:
    """Index every product's text `render(product)` (id = parent_asin) with Anserini, replacing
    `index_dir` when done; `fingerprint` names the texts that rendered it.

    Results do not depend on `threads`: Anserini breaks score ties by document id, not by
    the (thread-dependent) order documents entered the index.
    """
    from PersonalWAB.progress import stage

    index_dir = Path(index_dir)
    _require_products(products, index_dir)
    started = time.perf_counter()
    scratch = _scratch_dir(index_dir, "build")
    try:
        collection = scratch / "collection"
        collection.mkdir()
        _write_json_collection(products, collection, max(1, min(threads, len(products))), render)
        with stage(f"Anserini indexing {len(products)} products"):
            counts = _on_jvm(_index_collection_on_jvm, collection, scratch / "index", max(1, threads))
        if counts["indexed"] != len(products):
            raise DataError(f"{index_dir}: Anserini indexed {counts} of {len(products)} products")
        _record_contents(scratch / "index", fingerprint)
        _replace_dir(scratch / "index", index_dir)
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
            raise _missing_index(self.index_dir, "lucene", "no Lucene index here")
        self._searcher: Any = None  # opened on the JVM thread at first search
        self._contents: dict[str, str] = {}  # docid -> stored contents, read once

    def search(self, query: str, k: int = 10) -> list[str]:
        """ASINs of the best `k` products, best first ([] when no word of the query is indexed)."""
        return _on_jvm(self._search_on_jvm, check_query(query), _check_k(k))

    def contents(self, docids: list[str]) -> list[str]:
        """The stored `contents` of each document: what the agent is shown for a hit."""
        missing = [d for d in dict.fromkeys(docids) if d not in self._contents]
        if missing:
            self._contents.update(zip(missing, _on_jvm(self._contents_on_jvm, missing)))
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
        return _on_jvm(self._batch_search_on_jvm, checked, _check_k(k))

    def _open_on_jvm(self) -> Any:
        if self._searcher is None:
            self._searcher = _java().SimpleSearcher(str(self.index_dir))
        return self._searcher

    def _search_on_jvm(self, query: str, k: int) -> list[str]:
        try:
            hits = self._open_on_jvm().search(query, k)
        except _java().JavaException as exc:
            if _is_too_many_clauses(exc):
                raise _too_many_terms() from None
            raise
        return [hit.docid for hit in hits]

    def _batch_search_on_jvm(self, queries: list[str], k: int) -> list[list[str]]:
        java = _java()
        texts, ids = java.ArrayList(), java.ArrayList()
        for position, query in enumerate(queries):
            texts.add(query)
            ids.add(str(position))
        try:
            found = self._open_on_jvm().batch_search(texts, ids, k, max(1, min(8, os.cpu_count() or 1)))
        except java.JavaException as exc:
            if _is_too_many_clauses(exc):
                raise _too_many_terms() from None
            raise
        return [[hit.docid for hit in found.get(str(position))] for position in range(len(queries))]


# --------------------------------------------------------------------------- bm25s

# Lucene's English stop set, which Anserini's DefaultEnglishAnalyzer removes.
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
# Words as Lucene's StandardTokenizer (Unicode word boundaries) cuts them: letters joined
# by . ' ’ or :, digits joined by . ' ’ , or ; ("u.s.a", "don't", "1,000", "3.5oz"); each
# Han ideograph, Hiragana character, emoji and ™ ® © a word of its own; and no word made
# of fractions, superscripts or circled numbers, which Python counts as word characters.
_ONE_CHAR_WORDS = (
    "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Hiragana, Han
    "\u00a9\u00ae\u2122\u2600-\u27bf\U0001f000-\U0001faff"  # © ® ™, symbols, emoji
)
_NOT_WORD_CHARS = "\u00b2\u00b3\u00b9\u00bc-\u00be\u2150-\u218f\u2460-\u24ff"
_RUN = rf"[^\W{_ONE_CHAR_WORDS}{_NOT_WORD_CHARS}]+"
_JOINER = r"(?:(?<=[^\W\d_])[.'’:](?=[^\W\d_])|(?<=\d)[.'’,;](?=\d))"
_WORD = re.compile(rf"[{_ONE_CHAR_WORDS}]|{_RUN}(?:{_JOINER}{_RUN})*")
# A cheap first cut into runs that never straddle two of the words above.
_CANDIDATE = re.compile(rf"[{_ONE_CHAR_WORDS}]|\w+(?:[.'’:,;]\w+)*")
_POSSESSIVE = re.compile(r"['’]s$")
ANALYZER_ID = "lucene-english-porter/1"
_META_FILE = "pwab_search.json"
_local = threading.local()


def _stemmer() -> Any:
    """PyStemmer objects are not thread-safe, so each thread gets its own."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer("porter")
    return stemmer


def _porter_measure(stem: str) -> int:
    """Porter's m: how many vowel-then-consonant runs `stem` has ("y" after a consonant is a vowel)."""
    pattern = []
    for i, char in enumerate(stem):
        vowel = char in "aeiou" or (char == "y" and i > 0 and pattern[-1] == "c")
        pattern.append("v" if vowel else "c")
    return len(re.findall("v+c+", "".join(pattern)))


def _as_lucene_porter_input(word: str) -> str:
    """Lucene's Porter stemmer follows Porter's later revision in step 2 ("bli" -> "ble",
    "logi" -> "log"), which the Snowball "porter" algorithm does not; rewriting the word so
    the original algorithm meets the same intermediate form yields Lucene's stem."""
    if word.endswith("bly") and _porter_measure(word[:-3]) > 0:
        return word[:-1] + "e"
    for ending in ("logy", "logies"):
        if word.endswith(ending) and _porter_measure(word[: -len(ending)]) > 0:
            return word[: -len(ending)] + "log"
    return word


def _terms_of_candidate(candidate: str) -> tuple[str, ...]:
    """The terms of one run of word characters and joiners (usually a single word)."""
    stemmer = _stemmer()
    terms = []
    for word in _WORD.findall(candidate):
        word = _POSSESSIVE.sub("", word)
        if word and word not in LUCENE_STOPWORDS:
            terms.append(stemmer.stemWord(_as_lucene_porter_input(word)))
    return tuple(terms)


def analyze(text: str, memo: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Terms of `text` as Anserini's default English analyzer makes them: words, possessive
    's dropped, lower-cased, Lucene stop words removed, Porter stemming as Lucene does it.

    A catalogue repeats the same words millions of times; pass one `memo` dict to every call
    of an indexing run so each distinct word is analysed once.
    """
    memo = {} if memo is None else memo
    terms: list[str] = []
    for candidate in _CANDIDATE.findall(text.lower()):
        found = memo.get(candidate)
        if found is None:
            found = memo[candidate] = _terms_of_candidate(candidate)
        terms.extend(found)
    return terms


def lucene_stored_length(length: int) -> int:
    """A document length as Lucene's BM25 sees it: stored in one byte (SmallFloat.intToByte4),
    exact up to 39, above that (length - 24) rounded down to four significant bits."""
    if length < 40:
        return length
    rest = length - 24
    shift = rest.bit_length() - 4
    return 24 + ((rest >> shift) << shift)


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


def build_bm25s_index(products: dict[str, dict[str, Any]], index_dir: Path, render: Render,
                      fingerprint: str) -> dict[str, Any]:
    """Index every product's text `render(product)` for bm25s (Lucene's BM25, k1=0.9, b=0.4)
    beside its ASIN list; `fingerprint` names the texts that rendered it.

    Documents are stored in ASIN order, so ranking ties by position ranks them by ASIN, as
    Anserini does.
    """
    import bm25s
    from tqdm import tqdm

    index_dir = Path(index_dir)
    _require_products(products, index_dir)
    started = time.perf_counter()
    asins = sorted(products)
    retriever = bm25s.BM25(method="lucene", k1=BM25_K1, b=BM25_B)
    memo: dict[str, tuple[str, ...]] = {}
    retriever.scores, retriever.vocab_dict = _lucene_bm25_matrix(
        [analyze(render(products[asin]), memo)
         for asin in tqdm(asins, desc="bm25s: analysing products", unit="product", file=sys.stderr)]
    )
    retriever.nonoccurrence_array = None  # what `index` leaves for the "lucene" method
    scratch = _scratch_dir(index_dir, "build")
    try:
        retriever.save(str(scratch), show_progress=False)
        meta = {"analyzer": ANALYZER_ID, "scores": "lucene-stored-lengths", "documents": len(asins),
                "asins": asins}
        (scratch / _META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        _record_contents(scratch, fingerprint)
        _replace_dir(scratch, index_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"backend": "bm25s", "index_dir": str(index_dir), "documents": len(asins),
            "seconds": round(time.perf_counter() - started, 2)}


def _read_bm25s_meta(index_dir: Path) -> dict[str, Any]:
    path = index_dir / _META_FILE
    if not path.is_file():
        raise _missing_index(index_dir, "bm25s", f"no bm25s index here ({_META_FILE} missing)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise _missing_index(index_dir, "bm25s", f"{_META_FILE} is not valid JSON ({exc})") from None
    if meta.get("analyzer") != ANALYZER_ID:
        raise _missing_index(index_dir, "bm25s", f"index was built with analyzer {meta.get('analyzer')!r}, "
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
            raise _missing_index(self.index_dir, "bm25s", f"unreadable bm25s index ({exc})") from None
        if self._retriever.scores["num_docs"] != len(self._asins):
            raise _missing_index(self.index_dir, "bm25s", f"{_META_FILE} lists {len(self._asins)} products, "
                                 f"the scores {self._retriever.scores['num_docs']}")
        self._vocab: dict[str, int] = self._retriever.vocab_dict

    def search(self, query: str, k: int = 10) -> list[str]:
        """ASINs of the best `k` products, best first ([] when no word of the query is indexed)."""
        check_query(query)
        k = _check_k(k)
        terms = analyze(query)
        if len(set(terms)) > MAX_QUERY_TERMS:
            raise _too_many_terms()
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


# --------------------------------------------------------------------------- choosing


def open_search_engine(backend: str, index_dir: Path | str, contents_of: Callable[[str], str]) -> SearchEngine:
    """The engine of `backend` ("lucene" or "bm25s") over the index in `index_dir`;
    `contents_of` renders a document's text where the index does not store it (bm25s)."""
    if backend == "lucene":
        return LuceneSearchEngine(index_dir)
    if backend == "bm25s":
        return BM25sSearchEngine(index_dir, contents_of)
    raise ValueError(f"unknown search backend {backend!r}; expected one of {BACKENDS}")
