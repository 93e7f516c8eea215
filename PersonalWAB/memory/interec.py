"""InteRecAgent's user memory: per user, what they like, dislike and expect.

The file is JSON, `{user_id: {"like": [...], "dislike": [...], "expect": [...]}}`. As in
the release, like and dislike hold parent ASINs, and after each task the agent's model
reads the conversation and the store is updated (`InterecMemoryStore.update`): newly
disliked items leave the likes, newly liked ones leave the dislikes, and the expectations
keep the newest `EXPECT_LIMIT`. Lists keep insertion order (the release's sets had none).

The initial file comes from the history split: written by a language model from the
user's past reviews as in the release (`llm_initial_memory`), or, offline, by rating
(`initial_memory`: rated 4 or more -> like, 2 or less -> dislike).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.errors import DataError
from PersonalWAB.schema_types import Behaviour
from PersonalWAB.scratch import atomic_write_text

NEEDS_STORE = ("--agent_memory interecagent needs --interec_memory_file (create one with "
               "scripts/tools/init_interecagent_memory.py)")

if TYPE_CHECKING:
    from PersonalWAB.llm import LLMClient
    from PersonalWAB.protocol import Protocol

KINDS = ("like", "dislike", "expect")
EXPECT_LIMIT = 30
INIT_HISTORY_LIMIT = 200  # the newest history-split reviews an initial profile is written from
INIT_MAX_TOKENS = 5000
LIKE_MIN_RATING = 4.0
DISLIKE_MAX_RATING = 2.0


def _empty() -> dict[str, list[str]]:
    return {kind: [] for kind in KINDS}


def _checked(content: Any, path: Path) -> dict[str, dict[str, list[str]]]:
    if not isinstance(content, dict):
        raise DataError(f"{path}: expected a JSON object mapping user ids to like/dislike/expect lists")
    entries: dict[str, dict[str, list[str]]] = {}
    for user_id, entry in content.items():
        if not isinstance(entry, dict):
            raise DataError(f"{path}: [{user_id!r}]: expected an object with like/dislike/expect lists")
        for kind in KINDS:
            items = entry.get(kind, [])
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise DataError(f"{path}: [{user_id!r}][{kind!r}]: expected a list of strings")
        entries[user_id] = {kind: list(entry.get(kind, [])) for kind in KINDS}
    return entries


def write_memory_file(path: Path | str, entries: dict[str, dict[str, list[str]]]) -> None:
    """Write the whole file atomically (temp file + rename): a reader or a crash
    never sees half a file."""
    atomic_write_text(Path(path), json.dumps(entries, indent=2, ensure_ascii=False))


def read_memory_file(path: Path | str) -> dict[str, dict[str, list[str]]]:
    path = Path(path)
    try:
        return _checked(json.loads(path.read_text(encoding="utf-8")), path)
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None


def _strings(items: Any) -> list[str]:
    """The usable items of a model's list: strings and numbers, as strings."""
    if not isinstance(items, list):
        return []
    return [str(i) for i in items if isinstance(i, (str, int, float)) and not isinstance(i, bool)]


def parse_profile(text: str) -> dict[str, list[str]] | None:
    """The like / dislike / expect lists of a model's JSON answer (code fences and line breaks
    removed first, as the release does), or None when it is not a JSON object."""
    cleaned = text.replace("```json", "").replace("```", "").replace("\n", "")
    start = cleaned.find("{")
    try:
        content = json.loads(cleaned[start:] if start >= 0 else cleaned)
    except json.JSONDecodeError:
        return None
    if not isinstance(content, dict):
        return None
    return {kind: _strings(content.get(kind, [])) for kind in KINDS}


class InterecMemoryStore:
    """The memory file of a run, shared by its worker threads.

    Every update is saved at once, so an interrupted run keeps what it learned.
    With `path=None` the store lives in memory only. Updates from several
    processes on one file are not merged (the last writer wins).
    """

    def __init__(self, path: Path | str | None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, list[str]]] = {}
        if self.path is not None and self.path.exists():
            self._entries = read_memory_file(self.path)

    def get(self, user_id: str) -> dict[str, list[str]]:
        """A copy of the user's lists (empty lists for an unknown user)."""
        with self._lock:
            entry = self._entries.get(user_id) or _empty()
            return {kind: list(entry[kind]) for kind in KINDS}

    def update(self, user_id: str, like: Iterable[str] = (), dislike: Iterable[str] = (),
               expect: Iterable[str] = ()) -> dict[str, list[str]]:
        """Apply what a conversation revealed, in the release's order, and save; returns the new lists."""
        like, dislike, expect = list(like), list(dislike), list(expect)
        with self._lock:
            entry = self._entries.setdefault(user_id, _empty())
            entry["like"] = _merged([i for i in entry["like"] if i not in set(dislike)], like)
            entry["dislike"] = _merged([i for i in entry["dislike"] if i not in set(like)], dislike)
            entry["expect"] = _merged(entry["expect"], expect)[-EXPECT_LIMIT:]
            if self.path is not None:
                write_memory_file(self.path, self._entries)
            return {kind: list(entry[kind]) for kind in KINDS}


def _merged(current: list[str], new: Iterable[str]) -> list[str]:
    """`current` followed by the new items it lacks (exact strings, as a set would)."""
    merged = list(current)
    seen = set(merged)
    for item in new:
        if item not in seen:
            seen.add(item)
            merged.append(item)
    return merged


def history_split(data: BenchmarkData, user_id: str) -> list[Behaviour]:
    """The user's history-split behaviours an initial profile is written from (the newest 200)."""
    return [b for b in data.histories.get(user_id, []) if b.get("split") == "history"][-INIT_HISTORY_LIMIT:]


def initial_memory(data: BenchmarkData) -> dict[str, dict[str, list[str]]]:
    """Offline initial memory, without a model: parent ASINs of history-split products rated
    >= 4 (like) or <= 2 (dislike); no expectations. Test targets are never read."""
    entries = {}
    for user_id in sorted(data.histories):
        history = history_split(data, user_id)
        entries[user_id] = {
            "like": _merged([], (b["product_info"]["parent_asin"] for b in history
                                 if b["review"]["rating"] >= LIKE_MIN_RATING)),
            "dislike": _merged([], (b["product_info"]["parent_asin"] for b in history
                                    if b["review"]["rating"] <= DISLIKE_MAX_RATING)),
            "expect": [],
        }
    return entries


def llm_initial_memory(data: BenchmarkData, client: LLMClient, protocol: Protocol,
                       done: dict[str, dict[str, list[str]]] | None = None, max_concurrency: int = 4,
                       checkpoint: Callable[[dict[str, dict[str, list[str]]]], None] | None = None,
                       progress: Callable[[int], None] | None = None,
                       ) -> tuple[dict[str, dict[str, list[str]]], list[str]]:
    """Initial memory written by a language model, one call per user (temperature 0, up to
    5000 tokens), from the protocol's profile-extraction prompt over the user's history
    split. Users in `done` are kept as they are (resume). Returns the entries and the users
    whose answer was not a JSON object (given empty lists)."""
    entries = dict(done or {})
    todo = [u for u in sorted(data.histories) if u not in entries]
    unreadable: list[str] = []
    lock = threading.Lock()

    def one(user_id: str) -> None:
        prompt = protocol.interecagent_init_prompt(history_split(data, user_id))
        reply = client.complete([{"role": "system", "content": prompt}], max_tokens=INIT_MAX_TOKENS)
        parsed = parse_profile(reply.message.get("content") or "")
        with lock:
            if parsed is None:
                unreadable.append(user_id)
                parsed = _empty()
            entries[user_id] = {"like": parsed["like"], "dislike": parsed["dislike"], "expect": []}
            if checkpoint is not None:
                checkpoint(entries)
            if progress is not None:
                progress(1)

    with ThreadPoolExecutor(max_workers=max(1, max_concurrency)) as pool:
        for future in [pool.submit(one, user_id) for user_id in todo]:
            future.result()
    return {u: entries[u] for u in sorted(entries)}, sorted(unreadable)
