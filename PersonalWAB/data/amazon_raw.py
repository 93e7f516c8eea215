"""The Amazon Reviews 2023 raw files (McAuley Lab) that PersonalWAB was built from.

Layout (as on the Hugging Face hub, `McAuley-Lab/Amazon-Reviews-2023`):
`raw/review_categories/<Category>.jsonl` (one review per line) and
`raw/meta_categories/meta_<Category>.jsonl` (one product per line); a `.jsonl.gz` copy
(as served by the lab's own site) is read the same way. This module names the files,
streams their records (the big categories hold tens of millions of lines, so nothing is
read whole) while taking each file's SHA-256 on the way, and turns a raw record into the
review and product fields of the official PersonalWAB layout. The synthetic generator
writes its world in this format, so the construction pipeline is tested offline.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError

_loads: Callable[[str | bytes], Any]
try:
    import orjson

    _loads = orjson.loads
except ImportError:  # orjson is in requirements.txt; the stdlib parser is the fallback
    _loads = json.loads

HF_BASE_URL = "https://huggingface.co/datasets/McAuley-Lab/Amazon-Reviews-2023/resolve/main"
REVIEW_DIR = "raw/review_categories"
META_DIR = "raw/meta_categories"
# all_categories.txt of the release (33 categories and "Unknown").
CATEGORIES = (
    "All_Beauty", "Amazon_Fashion", "Appliances", "Arts_Crafts_and_Sewing", "Automotive", "Baby_Products",
    "Beauty_and_Personal_Care", "Books", "CDs_and_Vinyl", "Cell_Phones_and_Accessories",
    "Clothing_Shoes_and_Jewelry", "Digital_Music", "Electronics", "Gift_Cards", "Grocery_and_Gourmet_Food",
    "Handmade_Products", "Health_and_Household", "Health_and_Personal_Care", "Home_and_Kitchen",
    "Industrial_and_Scientific", "Kindle_Store", "Magazine_Subscriptions", "Movies_and_TV", "Musical_Instruments",
    "Office_Products", "Patio_Lawn_and_Garden", "Pet_Supplies", "Software", "Sports_and_Outdoors",
    "Subscription_Boxes", "Tools_and_Home_Improvement", "Toys_and_Games", "Unknown", "Video_Games",
)
# The five categories the paper sampled its users from.
PAPER_CATEGORIES = (
    "Electronics", "Home_and_Kitchen", "Grocery_and_Gourmet_Food", "Clothing_Shoes_and_Jewelry",
    "Health_and_Household",
)
REVIEW_FIELDS = ("rating", "title", "text", "images", "asin", "parent_asin", "user_id", "timestamp",
                 "helpful_vote", "verified_purchase")
META_FIELDS = ("main_category", "title", "average_rating", "rating_number", "features", "description", "price",
               "images", "videos", "store", "categories", "details", "parent_asin", "bought_together")
_CHUNK = 1 << 20


def review_file(category: str) -> str:
    """The review file of a category, relative to the raw folder."""
    return f"{REVIEW_DIR}/{category}.jsonl"


def meta_file(category: str) -> str:
    """The metadata file of a category, relative to the raw folder."""
    return f"{META_DIR}/meta_{category}.jsonl"


def category_file_name(label: str) -> str:
    """A display name ("Clothing, Shoes & Jewelry") as the file stem ("Clothing_Shoes_and_Jewelry")."""
    return "_".join(label.replace("&", "and").replace(",", " ").split())


def locate(raw_dir: Path | str, relative: str) -> Path:
    """The file as `.jsonl`, else as `.jsonl.gz`; a clear error naming both when neither is there."""
    plain = Path(raw_dir) / relative
    for candidate in (plain, plain.with_name(plain.name + ".gz")):
        if candidate.is_file():
            return candidate
    raise DataError(f"{plain}: not found (nor {plain.name}.gz); fetch it with "
                    f"`python -m PersonalWAB.construct fetch --out {raw_dir} --categories ...`")


@dataclass
class FileDigest:
    """What a full read of one raw file saw: its size, SHA-256 and record count."""

    path: str
    bytes: int = 0
    sha256: str = ""
    records: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "sha256": self.sha256, "records": self.records}


class _HashingReader(io.RawIOBase):
    """Passes a file's bytes through while hashing and counting them."""

    def __init__(self, handle: io.BufferedReader) -> None:
        self._handle = handle
        self.hash = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._handle.read(len(buffer))
        self.hash.update(data)
        self.size += len(data)
        buffer[: len(data)] = data
        return len(data)


def iter_records(path: Path, digest: FileDigest | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of every non-blank line, streamed; `digest` is filled in at the end.

    A line that is not a JSON object stops the read with the file and line named (a
    truncated download shows up here rather than as missing users later).
    """
    with open(path, "rb") as handle:
        hashing = _HashingReader(handle)
        raw: Any = io.BufferedReader(hashing, buffer_size=_CHUNK)
        stream = gzip.GzipFile(fileobj=raw) if path.name.endswith(".gz") else raw
        count = 0
        try:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    record = _loads(line)
                except ValueError as exc:
                    raise DataError(f"{path}:{number}: not valid JSON ({exc})") from None
                if not isinstance(record, dict):
                    raise DataError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
                count += 1
                yield number, record
        except (OSError, EOFError) as exc:  # a damaged gzip stream
            raise DataError(f"{path}: cannot be read ({exc})") from None
        while raw.read(_CHUNK):  # hash any bytes gzip left unread
            pass
    if digest is not None:
        digest.bytes, digest.sha256, digest.records = hashing.size, hashing.hash.hexdigest(), count


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _text_or_null(value: Any) -> str | None:
    """`store` and `main_category` stay null, as the official files keep them (schema.py)."""
    return None if value is None else str(value)


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    return [_text(item) for item in value]


def price_of(value: Any) -> float | str | None:
    """A raw price as the official layout keeps it: a number, or null / "None" when unknown.

    Raw prices are numbers, null, "None" or now and then text such as "$12.99" or
    "from 9.99"; text with no number in it becomes "None".
    """
    if value is None or value == "None":
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        cleaned = value.replace(",", "").replace("$", " ")
        for token in cleaned.split():
            try:
                return float(token)
            except ValueError:
                continue
    return "None"


def _details(value: Any, where: str) -> dict[str, Any]:
    """Details are an object in the raw files (a JSON string in some converted copies)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise DataError(f"{where}.details: is text but not a JSON object") from None
    if not isinstance(value, dict):
        raise DataError(f"{where}.details: expected an object, got {type(value).__name__}")
    return value


def _required_str(record: dict[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value:
        raise DataError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
    return value


def review_keys(record: dict[str, Any], where: str) -> tuple[str, str, int]:
    """(user_id, parent_asin, timestamp in ms) of a raw review, checked."""
    timestamp = record.get("timestamp")
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        raise DataError(f"{where}: 'timestamp' must be milliseconds since the epoch, got {timestamp!r}")
    return _required_str(record, "user_id", where), _required_str(record, "parent_asin", where), int(timestamp)


def to_review(record: dict[str, Any], where: str) -> dict[str, Any]:
    """The official review fields of a raw review."""
    user_id, parent_asin, timestamp = review_keys(record, where)
    rating = record.get("rating")
    if isinstance(rating, bool) or not isinstance(rating, (int, float)):
        raise DataError(f"{where}: 'rating' must be a number, got {rating!r}")
    return {"rating": float(rating), "title": _text(record.get("title")), "text": _text(record.get("text")),
            "parent_asin": parent_asin, "timestamp": timestamp}


def to_product(record: dict[str, Any], where: str) -> dict[str, Any]:
    """The official product fields of a raw metadata record (images, videos and
    bought_together are dropped; unknown values get the official layout's empty forms, which
    for store and main_category is null)."""
    rating_number = record.get("rating_number")
    average = record.get("average_rating")
    return {
        "main_category": _text_or_null(record.get("main_category")),
        "title": _text(record.get("title")),
        "average_rating": float(average) if isinstance(average, (int, float)) else 0.0,
        "rating_number": int(rating_number) if isinstance(rating_number, (int, float)) else 0,
        "features": _strings(record.get("features")),
        "description": _strings(record.get("description")),
        "price": price_of(record.get("price")),
        "store": _text_or_null(record.get("store")),
        "categories": _strings(record.get("categories")),
        "details": _details(record.get("details"), where),
        "parent_asin": _required_str(record, "parent_asin", where),
    }
