"""Model answers kept on disk, so a rerun, a resume or a second agent that sends a request
already answered does not pay for it again.

An answer is keyed by the SHA-256 of the whole request as sent (model route, api_base,
messages, tools and every sampling setting; never the key or the timeout), the trial and
task it was made for, and how many identical requests that task made before it. So the
trials of a task at temperature 1 still sample independently, a request repeated within a
task is asked again as it would be without the cache, and a rerun replays every task's
answers in the order they came: a cache hit changes neither the requests made nor what the
model sees, and gives the record the first run wrote.

The store is one SQLite file (`responses.sqlite3`) in write-ahead-log mode: each answer is
committed the moment it arrives, so workers in threads or processes share it and a run
killed at any point keeps every answer it received. Only successful answers are kept; an
error is asked again. A damaged store (a page the disk or a copy broke) is refused when it is
opened, naming the file and the ways on (`--cache off`, or a new store); an entry that is not
a JSON answer is asked again and replaced, with a warning, never failing the task. The cache
is used inside a task's `task_scope`, which the runner opens around every task run; calls
outside one are not cached by the client. The construction tools
keep their answers in the same store under keys of their own (`PersonalWAB.construct.llm_cache`).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError
from PersonalWAB.metrics import record_saved_usd
from PersonalWAB.schema_types import Record

CACHE_FILE = "responses.sqlite3"
ENV_VAR = "PWAB_CACHE"
OFF = "off"
SCHEMA_VERSION = 1
# request fields that do not change the answer
UNKEYED = frozenset({"api_key", "timeout", "num_retries"})
BUSY_TIMEOUT_S = 60.0


def cache_folder(setting: str | None, default: Path | None = None) -> Path | None:
    """The cache folder a run uses: the `--cache` setting, else $PWAB_CACHE, else `default`;
    None when the cache is off (`--cache off`, or nothing given and no default)."""
    chosen = setting or os.environ.get(ENV_VAR) or (str(default) if default is not None else None)
    if chosen is None or chosen.strip().lower() == OFF:
        return None
    return Path(chosen).expanduser()


class ResponseCache:
    """The answers in `folder/responses.sqlite3`; one connection per thread and process."""

    def __init__(self, folder: Path | str, warn: Callable[[str], None] | None = None):
        self.folder = Path(folder)
        self.path = self.folder / CACHE_FILE
        self._local = threading.local()
        self._warn = warn or (lambda line: print(f"warning: {line}", file=sys.stderr))
        self._unreadable: set[str] = set()  # keys whose entry is no answer: replaced when asked again
        self._lock = threading.Lock()
        if self.folder.exists() and not self.folder.is_dir():
            raise DataError(f"response cache {self.folder}: not a folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            problems = [row[0] for row in self._connection().execute("PRAGMA quick_check(3)").fetchall()]
        except (OSError, sqlite3.Error) as exc:
            raise self.damaged(exc) from None
        if problems != ["ok"]:
            raise self.damaged("; ".join(problems))

    def damaged(self, problem: object) -> DataError:
        """The one-line refusal of a store that cannot be read, with the ways on."""
        return DataError(f"response cache {self.path}: cannot be used ({problem}); run with --cache off, or move the "
                         "file away to start a new cache (its answers are then asked and paid again)")

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (a forked process opens its own)."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: nothing committed is lost to a kill
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise sqlite3.DatabaseError(f"its format is version {version}, this project reads {SCHEMA_VERSION}")
        connection.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        if version == 0:
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._local.held = (os.getpid(), connection)
        return connection

    def get(self, key: str) -> dict[str, Any] | None:
        """The answer stored under `key`, if any (an entry that is not a JSON answer counts as none)."""
        try:
            row = self._connection().execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self.damaged(exc) from None
        if row is None:
            return None
        try:
            reply = json.loads(row[0])
        except (TypeError, ValueError):
            reply = None
        if isinstance(reply, dict):
            return reply
        with self._lock:
            first = not self._unreadable
            self._unreadable.add(key)
        if first:
            self._warn(f"response cache {self.path}: an entry is not a JSON answer (a damaged write?); its call is "
                       "asked again and the entry replaced (further such entries are treated alike, silently)")
        return None

    def put(self, key: str, reply: dict[str, Any]) -> None:
        """Store an answer at once; the first answer stored under a key stays (an unreadable one is replaced)."""
        verb = "REPLACE" if key in self._unreadable else "IGNORE"
        try:
            self._connection().execute(f"INSERT OR {verb} INTO replies (key, reply) VALUES (?, ?)",
                                       (key, json.dumps(reply, ensure_ascii=False, sort_keys=True)))
        except sqlite3.DatabaseError as exc:
            raise self.damaged(exc) from None

    def __len__(self) -> int:
        return int(self._connection().execute("SELECT COUNT(*) FROM replies").fetchone()[0])


def request_digest(params: dict[str, Any]) -> str:
    """SHA-256 of a request's keyed fields in canonical JSON."""
    keyed = {name: value for name, value in params.items() if name not in UNKEYED}
    text = json.dumps(keyed, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class TaskScope:
    """One task run's use of the cache: where its answers are keyed, and what it was spared."""

    cache: ResponseCache
    trial: int
    task_id: int
    hits: int = 0
    saved_usd: float = 0.0
    _asked: dict[str, int] = field(default_factory=dict)

    def key(self, params: dict[str, Any]) -> str:
        """The key of the next call of this request in this task (each repeat its own)."""
        digest = request_digest(params)
        occurrence = self._asked.get(digest, 0)
        self._asked[digest] = occurrence + 1
        return hashlib.sha256(f"{digest}/{self.trial}/{self.task_id}/{occurrence}".encode()).hexdigest()

    def hit(self, usd: float) -> None:
        self.hits += 1
        self.saved_usd += usd


_current: contextvars.ContextVar[TaskScope | None] = contextvars.ContextVar("pwab_cache_scope", default=None)


def current_scope() -> TaskScope | None:
    """The scope of the task this thread is running, if the run has a cache."""
    return _current.get()


@contextmanager
def task_scope(cache: ResponseCache | None, trial: int, task_id: int) -> Iterator[TaskScope | None]:
    """Model calls made in this block (in this thread) are answered from `cache` when they can
    be, and stored in it otherwise; nothing is cached when `cache` is None."""
    if cache is None:
        yield None
        return
    scope = TaskScope(cache, trial, task_id)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def cache_totals(records: list[Record]) -> dict[str, Any] | None:
    """What the cache spared `records` (`hits`: calls it answered; `saved_usd`: their cost, not
    paid); None when none of them used a cache."""
    used = [record for record in records if "cache_hits" in record["info"]]
    if not used:
        return None
    return {"hits": sum(int(record["info"].get("cache_hits") or 0) for record in used),
            "saved_usd": sum(map(record_saved_usd, used))}
