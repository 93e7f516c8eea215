"""InteRecAgent's user memory: per user, what they like, dislike and expect.

The file is JSON, `{user_id: {"like": [...], "dislike": [...], "expect": [...]}}`.
An LLM agent updates a user's lists after each task (`InterecMemoryStore.update`);
`initial_memory` seeds the file from training data without any model
(`scripts/tools/init_interecagent_memory.py`).

Lists keep their order (oldest first), drop repeats (ignoring case and spacing) and
keep only the newest `max_items`, so prompts stay bounded over a long run.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterable

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.product_text import format_price
from PersonalWAB.errors import DataError

KINDS = ("like", "dislike", "expect")
MAX_ITEMS = 30
LIKE_MIN_RATING = 4.0
DISLIKE_MAX_RATING = 2.0
TRAINING_SPLITS = ("history", "train")
EXPECT_WORDS = 12
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def _key(item: str) -> str:
    return " ".join(item.split()).casefold()


def merge_items(current: list[str], new: Iterable[str], limit: int) -> list[str]:
    """`current` followed by the new items it lacks, keeping the newest `limit`."""
    merged = list(current)
    seen = {_key(item) for item in merged}
    for item in new:
        text = " ".join(str(item).split())
        if text and _key(text) not in seen:
            seen.add(_key(text))
            merged.append(text)
    return merged[-limit:] if limit > 0 else []


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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def format_preferences(entry: dict[str, list[str]]) -> str:
    """The three lists as prompt lines."""
    labels = {"like": "Likes", "dislike": "Dislikes", "expect": "Expects"}
    return "\n".join(f"{labels[kind]}: {'; '.join(entry.get(kind, [])) or '(none yet)'}" for kind in KINDS)


class InterecMemoryStore:
    """The memory file of a run, shared by its worker threads.

    Every update is saved at once, so an interrupted run keeps what it learned.
    With `path=None` the store lives in memory only. Updates from several
    processes on one file are not merged (the last writer wins).
    """

    def __init__(self, path: Path | str | None, max_items: int = MAX_ITEMS):
        self.path = Path(path) if path is not None else None
        self.max_items = max_items
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, list[str]]] = {}
        if self.path is not None and self.path.exists():
            try:
                content = json.loads(self.path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise DataError(f"{self.path}: not valid JSON ({exc})") from None
            self._entries = _checked(content, self.path)

    def get(self, user_id: str) -> dict[str, list[str]]:
        """A copy of the user's lists (empty lists for an unknown user)."""
        with self._lock:
            entry = self._entries.get(user_id) or _empty()
            return {kind: list(entry[kind]) for kind in KINDS}

    def update(self, user_id: str, like: Iterable[str] = (), dislike: Iterable[str] = (),
               expect: Iterable[str] = ()) -> dict[str, list[str]]:
        """Add items to the user's lists and save; returns the new lists.

        Liking an item removes it from the dislikes and vice versa, so the lists
        never contradict each other.
        """
        like, dislike = [str(i) for i in like], [str(i) for i in dislike]
        with self._lock:
            entry = self._entries.setdefault(user_id, _empty())
            entry["like"] = [i for i in entry["like"] if _key(i) not in {_key(d) for d in dislike}]
            entry["dislike"] = [i for i in entry["dislike"] if _key(i) not in {_key(k) for k in like}]
            for kind, items in (("like", like), ("dislike", dislike), ("expect", expect)):
                entry[kind] = merge_items(entry[kind], items, self.max_items)
            if self.path is not None:
                write_memory_file(self.path, self._entries)
            return {kind: list(entry[kind]) for kind in KINDS}

    def format(self, user_id: str) -> str:
        return format_preferences(self.get(user_id))


def product_summary(product: dict[str, Any]) -> str:
    """A liked/disliked item: its title and the attributes a preference hangs on."""
    price = format_price(product.get("price"))
    attributes = [product.get("store", ""), product.get("main_category", ""),
                  "" if price == "unknown" else f"${price}", product.get("parent_asin", "")]
    return f"{product.get('title', '')} ({', '.join(a for a in attributes if a)})"


def expect_phrase(instruction: str) -> str:
    """A short phrase of what the user asked for: the instruction's first sentence,
    cut to `EXPECT_WORDS` words."""
    first = _SENTENCE_END.split(instruction.strip(), maxsplit=1)[0]
    return " ".join(first.rstrip(".!?").split()[:EXPECT_WORDS])


def initial_memory(data: BenchmarkData, max_items: int = MAX_ITEMS) -> dict[str, dict[str, list[str]]]:
    """Seed lists from training data only, without a model.

    likes / dislikes: products of the user's `history` and `train` behaviours rated
    >= 4 / <= 2 (oldest first, the newest `max_items` kept); expects: short phrases
    from the user's train-split search and recommendation instructions (review
    instructions name a product already bought, not something wanted).
    """
    entries = {user_id: _empty() for user_id in sorted(data.histories)}
    for user_id, behaviours in data.histories.items():
        known = [b for b in behaviours if b.get("split") in TRAINING_SPLITS]
        liked = [product_summary(b["product_info"]) for b in known if b["review"]["rating"] >= LIKE_MIN_RATING]
        disliked = [product_summary(b["product_info"]) for b in known
                    if b["review"]["rating"] <= DISLIKE_MAX_RATING]
        entries[user_id]["like"] = merge_items([], liked, max_items)
        entries[user_id]["dislike"] = merge_items([], disliked, max_items)
    for task in sorted(data.tasks.get("train", []), key=lambda t: t["timestamp"]):
        if task["type"] != "review":
            entry = entries.setdefault(task["user_id"], _empty())
            entry["expect"] = merge_items(entry["expect"], [expect_phrase(task["task"])], max_items)
    return entries
