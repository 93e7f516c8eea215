"""MiniLM embeddings of every behaviour and every instruction of a data directory,
computed once and kept on disk.

`relevant` and `taskspe` memory rank a user's past behaviours by cosine similarity
to the instruction, over each behaviour's full text as the protocol renders it for
memory (`Protocol.behaviour_block(behaviour, i)`, `i` its position in the user's
history, as the release ranks). Encoding ~40 such texts per task would cost seconds;
with the vectors cached, a task costs one dot product over the user's rows.

Cache layout (in `data.artifacts.cache_dir`; with `--embedding_precision bf16`, every name ends in
`_bf16` and holds that precision's vectors):

- `behaviour_embeddings_<texts>.npy`: float32 `[n_behaviours, 384]`, L2-normalised, for the
  protocol whose behaviour text has fingerprint `<texts>` (so release and project texts
  keep separate caches). Users in sorted id order; each user's rows in the loader's
  (time) order, so row `first + i` belongs to `data.histories[user_id][i]`.
- `behaviour_embeddings_<texts>.json`: `{"fingerprint", "rows", "users": {user_id: [first, count]}}`.
- `instruction_embeddings.npy` / `.json`: the distinct instruction texts of the train
  split then the test split, in order of first appearance (`{"fingerprint", "rows"}`);
  the text -> row map is rebuilt from the data on load.

The fingerprints hash the embedded texts themselves (and the model name), so changed
data or texts invalidate the cache. The arrays are memory-mapped, so worker threads
share one read-only copy.

Behind the per-directory matrices, a content-keyed `TextStore` (one per encoder, shared by
every data directory of the checkout, `data/cache/text_embeddings/` or
`$PERSONALWAB_EMBEDDING_STORE`) keeps each text's vector under its SHA-256, so a data
directory that shares behaviours with one built before (a copy, a subset, an edited review)
encodes only its new texts.

Speed: MiniLM in fp32 by default (`text_embedding`: ONNX Runtime on the CPU, PyTorch on a GPU),
texts sorted by length so a batch pads little; `--embedding_precision bf16` (OpenVINO on a CPU
with bf16 instructions) builds `full`'s cache ~2.5x faster with top-10 memory lists equal to
fp32's on nearly every task (the figures: docs/performance.md; `scripts/embedding_agreement.py`
measures them). A build announces its time from its texts' arithmetic (`minilm_flops`) and
corrects it at its own pace once the first chunk is done.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any, Protocol as TypingProtocol

import numpy as np

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.digests import digest_problem, write_with_digest
from PersonalWAB.engines.text_embedding import DIMENSION, EXACT, PRECISIONS, read_vector_cache
from PersonalWAB.paths import UNREADABLE_CACHE, warn_unusable_cache
from PersonalWAB.protocol import Protocol
from PersonalWAB.schema_types import Behaviour, Task

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
CHUNK = 256  # texts per encode call: several batches, with a progress update between them
PACE_CHUNKS = 4  # an announced encoding of more chunks than this says the time left after its first
STORE_ENV = "PERSONALWAB_EMBEDDING_STORE"
BEHAVIOURS = "behaviour_embeddings"
INSTRUCTIONS = "instruction_embeddings"
# The behaviour text the agents' relevance ranking embeds; PUMA's data step ranks by its own
# (`puma.behaviour`), so each template has its own cache.
MEMORY_TEMPLATE = "memory.behaviour"
PUMA_TEMPLATE = "puma.behaviour"


class Encoder(TypingProtocol):
    def encode(self, texts: list[str]) -> np.ndarray: ...


_RANKING_PRECISION = EXACT  # the precision memory ranks by in this process (`ranking_precision`)


@contextmanager
def ranking_precision(precision: str) -> Iterator[None]:
    """Within it, memory that ranks by MiniLM reads `precision` vectors (a run's
    `--embedding_precision`, set for the run's life; one run at a time in a process)."""
    global _RANKING_PRECISION
    if precision not in PRECISIONS:
        raise ValueError(f"embedding precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    before, _RANKING_PRECISION = _RANKING_PRECISION, precision
    try:
        yield
    finally:
        _RANKING_PRECISION = before


def precision_suffix(precision: str) -> str:
    """What a precision adds to the names of its caches (nothing for the exact one)."""
    return "" if precision == EXACT else f"_{precision}"


def encoder_id(encoder: Encoder) -> str | None:
    """The name under which an encoder's vectors may be shared (its `model_id`), or None
    for an encoder without one, whose vectors are never stored for other data."""
    return getattr(encoder, "model_id", None)


def text_digests(texts: list[str]) -> np.ndarray:
    """SHA-256 of each text, as a `[n, 32]` uint8 array (the store's keys)."""
    return np.frombuffer(b"".join(hashlib.sha256(t.encode("utf-8")).digest() for t in texts),
                         dtype=np.uint8).reshape(len(texts), 32)


def default_store_root() -> Path:
    from PersonalWAB.paths import REPO_ROOT

    return Path(os.environ.get(STORE_ENV) or REPO_ROOT / "data" / "cache" / "text_embeddings")


class TextStore:
    """Vectors of every text an encoder has embedded, keyed by the text's SHA-256.

    One file per encoder (`store.npz`: `keys` `[n, 32]` uint8, `vectors` `[n, 384]` float32),
    replaced atomically, so keys and vectors always belong together. Concurrent writers
    may drop each other's additions (they are only encoded again later), never mix them up.
    """

    def __init__(self, root: Path, model_id: str):
        self.path = root / hashlib.sha256(model_id.encode()).hexdigest()[:16] / "store.npz"

    def lookup(self, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found, vectors): which digests the store holds, and their vectors (zeros elsewhere)."""
        vectors = np.zeros((len(digests), DIMENSION), dtype=np.float32)
        keys, stored = self._read()
        row_of = {key: row for row, key in enumerate(map(bytes, keys))}
        rows = np.array([row_of.get(bytes(d), -1) for d in digests], dtype=np.int64)
        found = rows >= 0
        vectors[found] = stored[rows[found]]
        return found, vectors

    def add(self, digests: np.ndarray, vectors: np.ndarray) -> None:
        keys, stored = self._read()
        new = ~np.isin(digests.view("V32").ravel(), keys.view("V32").ravel())
        if new.any():
            _write_atomic(self.path, lambda h: np.savez(h, keys=np.concatenate([keys, digests[new]]),
                                                        vectors=np.concatenate([stored, vectors[new]])))

    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        """The stored keys and vectors; none for a missing store, and for a damaged one
        (named in a warning; the next `add` writes a whole one)."""
        empty = np.zeros((0, 32), dtype=np.uint8), np.zeros((0, DIMENSION), dtype=np.float32)
        stored = read_vector_cache(self.path, "embedding store")
        if stored is None:
            return empty
        keys, vectors = stored
        if keys.shape != (len(keys), 32):
            warn_unusable_cache(self.path, f"embedding store of keys shaped {keys.shape}, not digests")
            return empty
        return keys, vectors


def behaviour_texts(protocol: Protocol, behaviours: list[Behaviour],
                    template: str = MEMORY_TEMPLATE) -> list[str]:
    """The texts `relevant` memory ranks: each behaviour's memory block, numbered by position."""
    return [protocol.behaviour_block(b, i, template) for i, b in enumerate(behaviours)]


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _fingerprint(texts: list[str]) -> str:
    digest = hashlib.sha256(EMBEDDING_MODEL.encode())
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def instruction_texts(data: BenchmarkData) -> list[str]:
    """The distinct instructions of the train split then the test split, in order of first appearance."""
    return list(dict.fromkeys(t["task"] for split in ("train", "test") for t in data.tasks.get(split, [])))


def encode_sorted(encoder: Encoder, texts: list[str], label: str, progress: bool = True,
                  prebuild: str | None = None) -> np.ndarray:
    """Embed texts in length order (batches of similar length pad little), in chunks
    with a progress bar; rows come back in input order. `prebuild`: the command that builds
    them ahead, named when a long encoding is announced first; such an encoding counts its
    texts' arithmetic (`minilm_flops`), so the bar's rate and time left, and the time left it
    says after its first chunk, hold for the longer texts that come last."""
    from PersonalWAB.engines.text_embedding import announce_encoding, minilm_flops, token_counts
    from PersonalWAB.progress import duration_text, log_line, progress_bar

    precision = getattr(encoder, "precision", EXACT)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    flops = np.array([minilm_flops([n]) for n in token_counts(texts)]) if prebuild else np.ones(len(texts))
    if prebuild:
        announce_encoding(len(texts), float(flops.sum()), f"embedding {label}", prebuild, precision=precision)
    out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
    started = time.perf_counter()
    with progress_bar(total=round(flops.sum() / 1e9) if prebuild else len(texts), desc=f"embedding {label}",
                      unit="GFLOP" if prebuild else "text", disable=not progress, dynamic_ncols=True) as bar:
        for done in range(0, len(order), CHUNK):
            rows = order[done:done + CHUNK]
            out[rows] = encoder.encode([texts[i] for i in rows])
            bar.update(round(flops[rows].sum() / 1e9) if prebuild else len(rows))
            if prebuild and done == 0 and len(order) > PACE_CHUNKS * CHUNK:
                first = float(flops[rows].sum())
                left = float(flops.sum()) - first
                log_line(f"embedding {label}: about {duration_text(left * (time.perf_counter() - started) / first)} "
                         f"left at the pace of its first {len(rows)} texts on this machine")
    return out


def encode_with_store(encoder: Encoder, texts: list[str], label: str, progress: bool = True,
                      reuse: bool = True, prebuild: str | None = None) -> tuple[np.ndarray, int]:
    """Vectors of `texts`, reusing (with `reuse`) those the encoder's `TextStore` holds and
    adding the ones it encoded; returns them and how many were encoded (`prebuild`: see
    `encode_sorted`)."""
    model_id = encoder_id(encoder)
    if model_id is None:
        return encode_sorted(encoder, texts, label, progress, prebuild), len(texts)
    store = TextStore(default_store_root(), model_id)
    digests = text_digests(texts)
    if reuse:
        found, vectors = store.lookup(digests)
    else:
        found, vectors = np.zeros(len(texts), dtype=bool), np.zeros((len(texts), DIMENSION), dtype=np.float32)
    missing = np.flatnonzero(~found)
    if len(missing):
        vectors[missing] = encode_sorted(encoder, [texts[i] for i in missing], label, progress, prebuild)
        store.add(digests[missing], vectors[missing])
    return vectors, len(missing)


def _write_atomic(path: Path, write: Callable[[Any], None]) -> None:
    """Write a cache file whole with its content digest, checked when it is read back."""
    buffer = io.BytesIO()
    write(buffer)
    write_with_digest(path, buffer.getvalue())


def _save(cache_dir: Path, name: str, matrix: np.ndarray, index: dict[str, Any]) -> None:
    """Matrix first, index last: an index is only ever next to the matrix it describes
    (a reader that catches the old index with the new matrix sees a row-count or
    fingerprint mismatch and rebuilds)."""
    _write_atomic(cache_dir / f"{name}.npy", lambda h: np.save(h, matrix))
    _write_atomic(cache_dir / f"{name}.json", lambda h: h.write(json.dumps(index).encode()))


def _load(cache_dir: Path, name: str, fingerprint: str) -> tuple[np.ndarray, dict[str, Any]] | None:
    """The cached matrix (memory-mapped) and index, or None when missing, stale (built from
    other texts) or damaged (named in a warning)."""
    index_file, matrix_file = cache_dir / f"{name}.json", cache_dir / f"{name}.npy"
    if not index_file.exists() or not matrix_file.exists():
        return None
    try:
        index = json.loads(index_file.read_text())
        stale = index.get("fingerprint") != fingerprint
    except UNREADABLE_CACHE as exc:
        warn_unusable_cache(index_file, f"unreadable embedding index ({exc})")
        return None
    if stale:
        return None
    problem = digest_problem(matrix_file)
    if problem:  # vectors of the right shape but other values load without an error
        warn_unusable_cache(matrix_file, problem)
        return None
    try:
        matrix = np.load(matrix_file, mmap_mode="r")
    except UNREADABLE_CACHE as exc:
        warn_unusable_cache(matrix_file, f"unreadable embedding matrix ({exc})")
        return None
    if matrix.shape != (index.get("rows"), DIMENSION):
        warn_unusable_cache(matrix_file, f"{matrix.shape} embeddings where {index_file.name} says "
                                         f"({index.get('rows')}, {DIMENSION})")
        return None
    return matrix, index


class BehaviourEmbeddings:
    """Cached embeddings of one data directory's behaviours and instructions.

    Loaded (or built, once) on first use, under a lock, so threads can share one
    instance; afterwards lookups are lock-free reads of memory-mapped arrays. A run over
    some users only calls `prepare_users` first, which encodes just theirs when the whole
    cache is not built yet.
    """

    def __init__(self, data: BenchmarkData, protocol: Protocol, encoder: Encoder | None = None,
                 template: str = MEMORY_TEMPLATE, precision: str = EXACT):
        self.data = data
        self.protocol = protocol
        self.template = template
        self.precision = precision
        self.name = f"{BEHAVIOURS}_{protocol.fingerprint(template)}{precision_suffix(precision)}"
        self.instructions_name = f"{INSTRUCTIONS}{precision_suffix(precision)}"
        self._encoder = encoder
        self._lock = threading.Lock()
        self._behaviours: np.ndarray | None = None
        self._users: dict[str, tuple[int, int]] = {}
        self._instructions: np.ndarray | None = None
        self._instruction_rows: dict[str, int] = {}
        self._adhoc: dict[str, np.ndarray] = {}
        self._partial: dict[str, np.ndarray] | None = None  # user -> rows, after `prepare_users`

    def prebuild_command(self) -> str:
        """The command that builds this cache ahead of a run."""
        from PersonalWAB.progress import prebuild_command

        flags = ["--puma_embeddings 1"] if self.template == PUMA_TEMPLATE else []
        if self.precision != EXACT:
            flags.append(f"--embedding_precision {self.precision}")
        return prebuild_command(self.data.data_dir, " ".join(flags))

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            from PersonalWAB.engines.text_embedding import shared_embedder

            self._encoder = shared_embedder(self.precision, bulk=True)
        return self._encoder

    def ensure(self, force: bool = False, log: Callable[[str], None] | None = _to_stderr) -> dict[str, float]:
        """Load both caches, building whichever is missing or stale (all with `force`);
        returns seconds spent per cache built. A first lookup calls this too, so a run
        without a prebuilt cache says on stderr why its first task waits."""
        if self._instructions is not None and not force:
            return {}
        with self._lock:
            if self._instructions is not None and not force:
                return {}
            seconds: dict[str, float] = {}
            self._ensure_behaviours(force, log, seconds)
            self._ensure_instructions(force, log, seconds)
            return seconds

    def prepare_users(self, user_ids: set[str], instructions: list[str],
                      log: Callable[[str], None] | None = _to_stderr) -> int:
        """Get ready for lookups of these users and instructions only: load the whole cache
        when it is built, else encode just their texts (through the text store, so a later
        whole build reuses them; nothing is written to the data directory). Returns how
        many texts were encoded. Other users are encoded when first asked for."""
        with self._lock:
            if self._instructions is not None:
                return 0
            if self._partial is None and self._ensure_behaviours(False, None, {}, encode=False):
                self._ensure_instructions(False, log, {})
                return 0
            self._partial = self._partial or {}
            chosen = sorted(u for u in user_ids if u in self.data.histories and u not in self._partial)
            texts = [behaviour_texts(self.protocol, self.data.histories[u], self.template) for u in chosen]
            wanted = [text for text in dict.fromkeys(instructions) if text not in self._adhoc]
            vectors, encoded = encode_with_store(self.encoder, [t for user in texts for t in user] + wanted,
                                                 f"texts of {len(chosen)} user(s)", progress=log is not None,
                                                 prebuild=self.prebuild_command() if log is not None else None)
            first = 0
            for user_id, user_texts in zip(chosen, texts):
                self._partial[user_id] = vectors[first:first + len(user_texts)]
                first += len(user_texts)
            self._adhoc.update(zip(wanted, vectors[first:]))
            if log is not None:
                log(f"embedded {encoded} behaviour and instruction texts of the run's {len(chosen)} user(s) with "
                    f"MiniLM (the others were in the text store; the whole cache is built by "
                    f"`python -m PersonalWAB.build`)")
            return encoded

    def _user_rows(self, user_id: str) -> np.ndarray:
        """A user's rows after `prepare_users`, encoding a user it did not cover."""
        partial = self._partial
        assert partial is not None, "only after prepare_users"
        rows = partial.get(user_id)
        if rows is None:
            texts = behaviour_texts(self.protocol, self.data.histories.get(user_id, []), self.template)
            rows = encode_with_store(self.encoder, texts, "behaviours", progress=False)[0]
            with self._lock:
                partial[user_id] = rows
        return rows

    def _ensure_behaviours(self, force: bool, log: Callable[[str], None] | None,
                           seconds: dict[str, float], encode: bool = True) -> bool:
        users: dict[str, list[int]] = {}
        texts: list[str] = []
        for user_id in sorted(self.data.histories):
            behaviours = self.data.histories[user_id]
            users[user_id] = [len(texts), len(behaviours)]
            texts.extend(behaviour_texts(self.protocol, behaviours, self.template))
        loaded = self._load_or_encode(self.name, "behaviours", texts, {"users": users}, force, log, seconds, encode)
        if loaded is None:
            return False
        matrix, meta = loaded
        self._behaviours = matrix
        self._users = {user_id: (first, count) for user_id, (first, count) in meta["users"].items()}
        self._partial = None
        return True

    def _ensure_instructions(self, force: bool, log: Callable[[str], None] | None,
                             seconds: dict[str, float]) -> None:
        texts = instruction_texts(self.data)
        loaded = self._load_or_encode(self.instructions_name, "instructions", texts, {}, force, log, seconds)
        assert loaded is not None, "with encode=True it encodes what the cache lacks"
        self._instructions = loaded[0]
        self._instruction_rows = {text: row for row, text in enumerate(texts)}

    def _load_or_encode(self, name: str, label: str, texts: list[str], meta: dict[str, Any], force: bool,
                        log: Callable[[str], None] | None, seconds: dict[str, float],
                        encode: bool = True) -> tuple[Any, dict[str, Any]] | None:
        """The cached matrix of `texts` when it matches them, else (with `encode`) encode and cache it."""
        fingerprint = _fingerprint(texts)
        cache_dir = self.data.artifacts.cache_dir
        loaded = None if force else _load(cache_dir, name, fingerprint)
        if loaded is None and encode:
            start = time.perf_counter()
            matrix, encoded = encode_with_store(self.encoder, texts, label, progress=log is not None, reuse=not force,
                                                prebuild=self.prebuild_command() if log is not None else None)
            if log is not None:
                log(f"embedded {encoded} of {len(texts)} {label} with MiniLM into {cache_dir / name}.npy "
                    f"(one-time; the others were in the text store)")
            _save(cache_dir, name, matrix, {"fingerprint": fingerprint, "rows": len(texts), **meta})
            seconds[name] = time.perf_counter() - start
            loaded = _load(cache_dir, name, fingerprint)
        return loaded

    def instruction(self, text: str) -> np.ndarray:
        """The instruction's embedding: from the cache, or encoded live (and kept)
        for an instruction the data does not hold."""
        if self._partial is None:
            self.ensure()
            row = self._instruction_rows.get(text)
            if row is not None and self._instructions is not None:  # ensure() loaded them
                return self._instructions[row]
        vector = self._adhoc.get(text)
        if vector is None:
            vector = self.encoder.encode([text])[0]
            with self._lock:
                self._adhoc[text] = vector
        return vector

    def behaviours(self, user_id: str, count: int | None = None) -> np.ndarray:
        """The user's first `count` behaviour rows (all by default), oldest first."""
        if self._partial is not None:
            rows = self._user_rows(user_id)
        else:
            self.ensure()
            first, total = self._users.get(user_id, (0, 0))
            assert self._behaviours is not None, "ensure() loaded them"
            rows = self._behaviours[first:first + total]
        return rows if count is None else rows[:count]

    def scores(self, user_id: str, instruction: str, count: int) -> np.ndarray:
        """Cosine similarity of the instruction to each of the user's first `count`
        behaviours (the vectors are normalised, so a dot product)."""
        return np.asarray(self.behaviours(user_id, count) @ self.instruction(instruction), dtype=np.float32)


_SHARED: dict[tuple[Path, str], BehaviourEmbeddings] = {}
_SHARED_LOCK = threading.Lock()


def shared_behaviour_embeddings(data: BenchmarkData, protocol: Protocol, template: str = MEMORY_TEMPLATE,
                                precision: str | None = None) -> BehaviourEmbeddings:
    """The one instance of a data directory, protocol, behaviour text and precision (default:
    the one `ranking_precision` set); its caches are loaded lazily."""
    precision = precision or _RANKING_PRECISION
    key = (Path(data.data_dir).resolve(), protocol.fingerprint(template) + precision_suffix(precision))
    with _SHARED_LOCK:
        instance = _SHARED.get(key)
        if instance is None or instance.data is not data:
            instance = _SHARED[key] = BehaviourEmbeddings(data, protocol, template=template, precision=precision)
        return instance


def build_behaviour_embeddings(data: BenchmarkData, protocol: Protocol, *, force: bool = False,
                               log: Callable[[str], None] | None = print, template: str = MEMORY_TEMPLATE,
                               precision: str | None = None) -> dict[str, float]:
    """Build (or load) the data directory's embedding caches for one behaviour text and
    precision; seconds per cache built."""
    return shared_behaviour_embeddings(data, protocol, template, precision).ensure(force=force, log=log)


def reference_agreement(data: BenchmarkData, protocol: Protocol, tasks: list[Task], length: int,
                        reference: Encoder) -> dict[str, Any]:
    """How the cached path's `relevant` memory compares, task by task, with a reference
    encoding of each text on its own (no batch, no padding, no store): whether the top
    `length` lists are equal (same behaviours, same order, ties broken the same way) and
    the largest score difference within them."""
    embeddings = shared_behaviour_embeddings(data, protocol)
    vectors: dict[tuple[str, int], np.ndarray] = {}
    equal, max_diff = 0, 0.0
    for task in tasks:
        user_id = task["user_id"]
        past = data.behaviours_before(user_id, task["timestamp"])
        if not past:
            equal += 1
            continue
        texts = behaviour_texts(protocol, past)
        for i, text in enumerate(texts):
            if (user_id, i) not in vectors:
                vectors[(user_id, i)] = reference.encode([text])[0]
        instruction = reference.encode([task["task"]])[0]
        expected = np.array([vectors[(user_id, i)] @ instruction for i in range(len(past))], dtype=np.float32)
        cached = embeddings.scores(user_id, task["task"], len(past))
        expected_top = np.argsort(-expected, kind="stable")[:length]
        cached_top = np.argsort(-cached, kind="stable")[:length]
        equal += bool(np.array_equal(expected_top, cached_top))
        max_diff = max(max_diff, float(np.abs(expected[cached_top] - cached[cached_top]).max()))
    return {"tasks": len(tasks), "equal_top_lists": equal, "length": length, "max_score_diff": max_diff}
