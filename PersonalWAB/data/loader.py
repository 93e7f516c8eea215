"""Load the benchmark's four data files into one shared, read-only object.

`load_benchmark_data` returns the same `BenchmarkData` for the same directory on
every call (thread-safe), so tasks and worker threads never hold copies.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import marshal
import os
import re
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PersonalWAB.data import schema
from PersonalWAB.data.published import count_summary, matches_published_counts
from PersonalWAB.errors import DataError
from PersonalWAB.gc_pause import exempt_from_collection, gc_paused
from PersonalWAB.paths import (CONSTRUCTION_MANIFEST, SYNTHETIC_MANIFEST, UNREADABLE_CACHE, ArtifactPaths,
                             warn_unusable_cache)
from PersonalWAB.schema_types import Behaviour, Product, Task, UserProfile

try:
    import orjson

    def _parse(raw: bytes) -> Any:
        return orjson.loads(raw)

    def _compact(content: Any) -> bytes:
        return orjson.dumps(content)

except ImportError:  # orjson is in requirements.txt; the stdlib parser is the fallback

    def _parse(raw: bytes) -> Any:
        return json.loads(raw)

    def _compact(content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode()


LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
INSTRUCTIONS_FILE = "user_instructions.json"
PROFILES_FILE = "user_profiles.json"
PRODUCT_PARTS = "all_products_part_*.json"
HISTORY_PARTS = "user_history_part_*.json"
# A key the synthetic generator writes into each entry of the profiles file beside "user_profile"
# (the release's code reads only that one): the files say they are synthetic even when the
# manifest is gone, so they are never taken for the official data.
SYNTHETIC_MARKER = "synthetic_data"
OFFICIAL_PARTS = 2  # the release cuts its products and its histories into two parts each
FULL_SCALE = "full"  # the synthetic scale with the published counts


def read_json(path: Path, digest: Any = None) -> Any:
    """Parse one JSON file, naming it (and spotting Git LFS pointers) on failure; its name
    and bytes go into `digest` (a hashlib object) when one is given."""
    raw = _read_bytes(path)
    if digest is not None:
        _digest_file(digest, path, raw)
    return parse_json_bytes(path, raw)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None


def _digest_file(digest: Any, path: Path, raw: bytes) -> None:
    digest.update(f"{path.name}\0{len(raw)}\0".encode())
    digest.update(raw)


def parse_json_bytes(path: Path, raw: bytes, warnings: list[str] | None = None) -> Any:
    """The JSON in `raw` (the bytes of `path`, named in any error). With `warnings`, a key
    given twice in one object (the parser keeps the last) is added to it."""
    if raw.startswith(LFS_POINTER_PREFIX):
        raise DataError(
            f"{path}: is a Git LFS pointer, not the data. Fetch the real files with "
            "`git lfs pull` in a clone of the official repository, or run "
            "`bash scripts/download_data.sh`."
        )
    try:
        content = _parse(raw)
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise DataError(f"{path}: not valid JSON (nested deeper than the parser allows)") from None
    if warnings is not None:
        warnings.extend(duplicate_key_warnings(path, raw, content))
    return content


_KEY_END = re.compile(rb'(?<!\\)"\s*:')  # a key's end, in a file with spaces before its colons


def _key_count(content: Any) -> int:
    """How often `":` occurs in `content` written compactly: once per key, and once per quote
    followed by a colon inside a text (escaped, as in the file)."""
    return _compact(content).count(b'":')


def duplicate_key_warnings(path: Path, raw: bytes, content: Any) -> list[str]:
    """One warning per key given twice in one object of the file. Cheap unless there is one:
    the keys in the text are counted against the keys parsed; only when the text holds more
    is it parsed again to name them."""
    written = raw.count(b'":')
    parsed = _key_count(content)
    if written < parsed:  # a file written with spaces before the colons
        written = len(_KEY_END.findall(raw)) + raw.count(b'\\":')
    if written <= parsed:
        return []
    repeated: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        counts = Counter(key for key, _ in pairs)
        repeated.extend(key for key, n in counts.items() if n > 1)
        return dict(pairs)

    try:
        json.loads(raw, object_pairs_hook=pairs_hook)
    except RecursionError:
        return [f"{path}: some JSON object gives one key twice; only the last value is used"]
    return [f"{path}: key {key!r} is given twice in one object{_places(raw, key)}; only the last value is used"
            for key in dict.fromkeys(repeated)]


def _places(raw: bytes, key: str) -> str:
    """Where a repeated key stands in the file, when it occurs as a key no more than twice."""
    pattern = re.compile(re.escape(json.dumps(key, ensure_ascii=False).encode()) + rb"\s*:")
    offsets = [match.start() for match in pattern.finditer(raw)]
    return f" (at bytes {offsets[0]} and {offsets[1]})" if len(offsets) == 2 else ""


def _part_number(path: Path) -> int:
    match = re.search(r"_part_(\d+)\.json$", path.name)
    return int(match.group(1)) if match else 0


def _missing_part_numbers(parts: list[Path]) -> list[int]:
    """Numbers absent between the first part (1, or 0 where a part 0 exists) and the last."""
    numbers = {_part_number(part) for part in parts}
    return [n for n in range(min(1, *numbers), max(numbers) + 1) if n not in numbers]


def _check_parts_complete(data_dir: Path, pattern: str, parts: list[Path]) -> None:
    """Refuse a set of part files with a gap: its products or histories would be missing
    without a word, and every score depending on them would be wrong."""
    missing = _missing_part_numbers(parts)
    if missing:
        names = ", ".join(pattern.replace("*", str(n)) for n in missing)
        raise DataError(
            f"{data_dir}: {names} missing (found {', '.join(p.name for p in parts)}); a part left out loses "
            "its entries. Restore it (`bash scripts/download_data.sh` fetches the official files) or "
            "renumber the parts you mean to use from 1 without gaps"
        )


def _part_files(data_dir: Path, pattern: str) -> list[Path]:
    parts = sorted(data_dir.glob(pattern), key=_part_number)
    if not parts:
        raise DataError(f"{data_dir}: no files matching {pattern!r}")
    _check_parts_complete(data_dir, pattern, parts)
    return parts


def _merged_parts(parts: list[Path], raw: dict[Path, bytes], warnings: list[str],
                  extend_lists: bool = False) -> dict[str, Any]:
    """One dict from all part files (their bytes in `raw`), in part order. With
    `extend_lists` (user histories) a key found in several parts gets all their entries,
    not only the last part's; otherwise (products) a key found again replaces the earlier
    entry, with a warning naming both parts."""
    merged: dict[str, Any] = {}
    read: list[tuple[Path, dict[str, Any]]] = []
    for part in parts:
        content = parse_json_bytes(part, raw[part], warnings)
        schema.expect_type(content, (dict,), str(part), "top level")
        if not extend_lists:
            warnings.extend(_repeated_key_warnings(read, part, content))
        for key, value in content.items():
            if extend_lists and isinstance(merged.get(key), list) and isinstance(value, list):
                merged[key] = merged[key] + value
            else:
                merged[key] = value
        read.append((part, content))
    return merged


def _repeated_key_warnings(read: list[tuple[Path, dict[str, Any]]], part: Path,
                           content: dict[str, Any]) -> list[str]:
    """A warning for each part read before `part` that holds some of its keys."""
    warnings = []
    for earlier, earlier_content in read:
        shared = earlier_content.keys() & content.keys()
        if shared:
            example = min(shared)
            warnings.append(f"{len(shared)} ASIN(s) are in both {earlier} and {part} (e.g. {example!r}); "
                            f"the entries of {part.name} are used")
    return warnings


@dataclass
class DataFiles:
    """The bytes of a data directory's files, read once: hashed for the parsed-data cache's
    key and the fingerprints, and parsed only when that cache does not hold them."""

    data_dir: Path
    product_parts: list[Path]
    history_parts: list[Path]
    raw: dict[Path, bytes]
    fingerprint: str  # sha256 over the four data files' names and bytes (`BenchmarkData.fingerprint`)
    products_fingerprint: str  # the same over the product parts alone: what a search index holds
    behaviours_fingerprint: str  # the same over the product and history parts: what the recommender learns from

    @classmethod
    def read(cls, data_dir: Path) -> DataFiles:
        product_parts = _part_files(data_dir, PRODUCT_PARTS)
        history_parts = _part_files(data_dir, HISTORY_PARTS)
        digest = hashlib.sha256()
        raw: dict[Path, bytes] = {}
        products_fingerprint = behaviours_fingerprint = ""
        for path in [*product_parts, *history_parts, data_dir / INSTRUCTIONS_FILE, data_dir / PROFILES_FILE]:
            raw[path] = _read_bytes(path)
            _digest_file(digest, path, raw[path])
            if path == product_parts[-1]:
                products_fingerprint = digest.hexdigest()
            if path == history_parts[-1]:
                behaviours_fingerprint = digest.hexdigest()
        for name in (SYNTHETIC_MANIFEST, CONSTRUCTION_MANIFEST):
            with contextlib.suppress(FileNotFoundError):
                raw[data_dir / name] = (data_dir / name).read_bytes()
        return cls(data_dir, product_parts, history_parts, raw, digest.hexdigest(), products_fingerprint,
                   behaviours_fingerprint)

    def cache_key(self) -> list[Any]:
        """What the parsed data depends on: the files' content (not their size or modification
        time, which an edit in place can keep), the manifests' and the loader's version."""
        manifests = [[path.name, hashlib.sha256(self.raw[path]).hexdigest()]
                     for path in sorted(self.raw) if path.name in (SYNTHETIC_MANIFEST, CONSTRUCTION_MANIFEST)]
        return [PARSED_CACHE_VERSION, sys.version, self.fingerprint, manifests]

    def json(self, name: str, warnings: list[str] | None = None) -> Any:
        """The parsed content of one of the directory's files, None when it is absent."""
        path = self.data_dir / name
        return parse_json_bytes(path, self.raw[path], warnings) if path in self.raw else None

    def manifest(self, name: str) -> dict[str, Any] | None:
        """A synthetic or construction manifest (a JSON object; its `source` a text), or None
        when the data has none."""
        manifest = self.json(name)
        if manifest is not None:
            path = str(self.data_dir / name)
            schema.expect_type(manifest, (dict,), path, "top level")
            if "source" in manifest:
                schema.expect_type(manifest["source"], (str,), path, "source")
        return manifest


@dataclass
class BenchmarkData:
    """Products, user histories, profiles and instructions of one data directory."""

    data_dir: Path
    products: dict[str, Product]
    histories: dict[str, list[Behaviour]]
    profiles: dict[str, UserProfile]
    tasks: dict[str, list[Task]]
    synthetic_manifest: dict[str, Any] | None = None
    construction_manifest: dict[str, Any] | None = None
    synthetic_marker: str | None = None  # the SYNTHETIC_MARKER of the profiles file, when an entry has one
    parts: tuple[int, int] = (0, 0)  # how many product and history part files the data has
    warnings: list[str] = field(default_factory=list)
    fingerprint: str = ""  # sha256 over the data files' names and bytes: which data a result was run on
    products_fingerprint: str = ""  # the same over the product parts: which products a search index holds
    behaviours_fingerprint: str = ""  # the same over the product and history parts: what SASRec learns from
    _history_times: dict[str, list[int]] = field(default_factory=dict, repr=False)

    @property
    def is_synthetic(self) -> bool:
        return self.synthetic_manifest is not None

    @property
    def is_official(self) -> bool:
        """The release's files: no manifest of this project's and no synthetic marker, the
        published counts of users and instructions, both parts of the products and histories, a
        history for every user and every task's target in the catalogue (not merely files
        without a manifest)."""
        return self.not_official_because() is None

    def not_official_because(self) -> str | None:
        """Why the data is not taken for the official release (None: it is)."""
        if self.synthetic_manifest is not None or self.construction_manifest is not None:
            return "it has a manifest of this project's generator or construction pipeline"
        if self.synthetic_marker is not None:
            return f"its {PROFILES_FILE} carries the synthetic generator's marker ({SYNTHETIC_MARKER!r})"
        if not matches_published_counts(self):
            return "its users and instructions differ from the published counts"
        if self.parts != (OFFICIAL_PARTS, OFFICIAL_PARTS):
            return (f"it has {self.parts[0]} product and {self.parts[1]} history part file(s); the release has "
                    f"{OFFICIAL_PARTS} of each")
        without = [user_id for user_id in self.profiles if not self.histories.get(user_id)]
        if without:
            return f"{len(without)} user(s) have no history (e.g. {without[0]!r}): a history part is missing"
        absent = sum(task["target"]["product_info"]["parent_asin"] not in self.products
                     for split in self.tasks.values() for task in split)
        if absent:
            return f"{absent} task target(s) are not in the product catalogue: a product part is missing"
        return None

    @property
    def source(self) -> str:
        """`official`, the manifest's description of generated or constructed data, or `custom`."""
        if self.construction_manifest is not None:
            return str(self.construction_manifest.get("source", "constructed"))
        if self.synthetic_manifest is None:
            return "official" if self.is_official else "custom"
        return f"synthetic(scale={self.synthetic_manifest.get('scale')}, seed={self.synthetic_manifest.get('seed')})"

    @property
    def artifacts(self) -> ArtifactPaths:
        return ArtifactPaths.for_data_dir(self.data_dir)

    def split(self, name: str) -> list[Task]:
        if name not in self.tasks:
            raise DataError(f"unknown task split {name!r}; expected one of {sorted(self.tasks)}")
        return self.tasks[name]

    def behaviours_before(self, user_id: str, timestamp: int) -> list[Behaviour]:
        """The user's behaviours strictly before `timestamp`, oldest first."""
        behaviours = self.histories.get(user_id, [])
        cut = bisect.bisect_left(self._history_times.get(user_id, []), timestamp)
        return behaviours[:cut]

    def profile(self, user_id: str) -> UserProfile:
        try:
            return self.profiles[user_id]
        except KeyError:
            raise DataError(f"{self.data_dir / PROFILES_FILE}: no profile for user {user_id!r}") from None


PARSED_CACHE = "parsed_data.marshal"
PARSED_CACHE_VERSION = 5  # bump when `_parse_and_check` changes what it builds
_CACHED_FIELDS = ("products", "histories", "profiles", "tasks", "synthetic_manifest", "construction_manifest",
                  "synthetic_marker", "parts",
                  "warnings", "fingerprint", "products_fingerprint", "behaviours_fingerprint", "_history_times")


def _read_parsed_cache(data_dir: Path, key: list[Any]) -> BenchmarkData | None:
    """The validated data of an earlier load of the same file contents.

    `marshal` (not pickle: reading it runs no code) of plain dicts and lists loads in a
    fraction of the time of parsing and checking the JSON again. A file that is not such a
    cache is named in a warning and rebuilt."""
    path = ArtifactPaths.for_data_dir(data_dir).cache_dir / PARSED_CACHE
    try:
        stored = marshal.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except UNREADABLE_CACHE as exc:
        warn_unusable_cache(path, f"unreadable parsed-data cache ({exc})")
        return None
    if not isinstance(stored, dict) or not isinstance(stored.get("fields"), dict):
        warn_unusable_cache(path, "not a parsed-data cache")
        return None
    if stored.get("key") != key:  # other data, or an earlier loader version
        return None
    if set(stored["fields"]) != set(_CACHED_FIELDS):
        warn_unusable_cache(path, "not a parsed-data cache of this loader")
        return None
    return BenchmarkData(data_dir=data_dir, **stored["fields"])


def _write_parsed_cache(data: BenchmarkData, key: list[Any]) -> None:
    """Keep the validated data for the next load; a read-only data directory just goes without."""
    fields = {name: getattr(data, name) for name in _CACHED_FIELDS}
    path = ArtifactPaths.for_data_dir(data.data_dir).cache_dir / PARSED_CACHE
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(marshal.dumps({"key": key, "fields": fields}))
        os.replace(tmp, path)


def _load(data_dir: Path) -> BenchmarkData:
    """The directory's data: from the parsed-data cache when it was built from the same file
    contents, else parsed, checked and cached."""
    if not data_dir.is_dir():
        raise DataError(
            f"{data_dir}: data directory not found. Generate synthetic data with "
            "`python -m PersonalWAB.data synthetic --scale small --out DIR` or fetch the "
            "official files with `bash scripts/download_data.sh`."
        )
    files = DataFiles.read(data_dir)
    key = files.cache_key()
    with gc_paused():
        data = _read_parsed_cache(data_dir, key)
        if data is None:
            data = _parse_and_check(files)
            _write_parsed_cache(data, key)
        exempt_from_collection(data)
    return data


def _parse_and_check(files: DataFiles) -> BenchmarkData:
    data_dir, product_files, history_files = files.data_dir, files.product_parts, files.history_parts
    warnings: list[str] = []
    products = _merged_parts(product_files, files.raw, warnings)
    histories = _merged_parts(history_files, files.raw, warnings, extend_lists=True)
    instructions = files.json(INSTRUCTIONS_FILE, warnings)
    profile_entries = files.json(PROFILES_FILE, warnings)
    schema.check_products_file(products, ", ".join(str(p) for p in product_files))
    schema.check_history_file(histories, ", ".join(str(p) for p in history_files))
    warnings.extend(schema.repeated_behaviours(histories, ", ".join(str(p) for p in history_files)))
    schema.check_instructions_file(instructions, str(data_dir / INSTRUCTIONS_FILE))
    schema.check_profiles_file(profile_entries, str(data_dir / PROFILES_FILE))

    for split in ("train", "test"):
        for i, task in enumerate(instructions[split]):
            if task["user_id"] not in profile_entries:
                raise DataError(
                    f"{data_dir / INSTRUCTIONS_FILE}: [{split!r}][{i}].user_id: "
                    f"{task['user_id']!r} has no entry in {PROFILES_FILE}"
                )
        absent = [i for i, task in enumerate(instructions[split])
                  if task["target"]["product_info"]["parent_asin"] not in products]
        if absent:
            example = instructions[split][absent[0]]["target"]["product_info"]["parent_asin"]
            warnings.append(
                f"{INSTRUCTIONS_FILE}: {len(absent)} {split!r} task(s) have a target ASIN missing from the "
                f"product catalogue (e.g. task {absent[0]}: {example!r}); search and recommend tasks among "
                "them cannot be solved"
            )
        duplicates = [text for text, n in Counter(t["task"] for t in instructions[split]).items() if n > 1]
        if duplicates:
            warnings.append(
                f"{INSTRUCTIONS_FILE}: {len(duplicates)} instruction texts repeat in the {split!r} split "
                f"(e.g. {duplicates[0][:80]!r}); files keyed by instruction text keep one entry for them"
            )

    history_times: dict[str, list[int]] = {}
    unordered = []
    for user_id, behaviours in histories.items():
        times = [b["review"]["timestamp"] for b in behaviours]
        if times != sorted(times):
            unordered.append(user_id)
            behaviours.sort(key=lambda b: b["review"]["timestamp"])
        history_times[user_id] = sorted(times)
    if unordered:
        warnings.append(
            f"{len(unordered)} user(s)' history is not in time order in the files (e.g. {unordered[0]!r}); "
            "memory follows time order, the release numbered memory by file order"
        )

    manifest = files.manifest(SYNTHETIC_MANIFEST)
    built = files.manifest(CONSTRUCTION_MANIFEST)
    marker = next((entry[SYNTHETIC_MARKER] for entry in profile_entries.values() if SYNTHETIC_MARKER in entry), None)
    data = BenchmarkData(
        data_dir=data_dir,
        products=products,
        histories=histories,
        profiles={uid: entry["user_profile"] for uid, entry in profile_entries.items()},
        tasks={"train": instructions["train"], "test": instructions["test"]},
        synthetic_manifest=manifest,
        construction_manifest=built,
        synthetic_marker=None if marker is None else str(marker),
        parts=(len(product_files), len(history_files)),
        warnings=warnings,
        fingerprint=files.fingerprint,
        products_fingerprint=files.products_fingerprint,
        behaviours_fingerprint=files.behaviours_fingerprint,
        _history_times=history_times,
    )
    if manifest is not None:
        check_against_manifest(data)
    elif built is None and marker is None:
        check_release_parts(data)
    return data


def check_release_parts(data: BenchmarkData) -> None:
    """Refuse data taken for the release (no manifest of this project's, the release's published
    users and instructions) that lacks one of the release's part files: the products or histories
    it held are gone without a word, and the data would pass for merely custom."""
    if not matches_published_counts(data):
        return
    for pattern, count in ((PRODUCT_PARTS, data.parts[0]), (HISTORY_PARTS, data.parts[1])):
        if count < OFFICIAL_PARTS:
            names = ", ".join(pattern.replace("*", str(n)) for n in range(count + 1, OFFICIAL_PARTS + 1))
            raise DataError(f"{data.data_dir}: {names} missing: the data has the release's published users and "
                            f"instructions, and the release comes in {OFFICIAL_PARTS} such parts. Restore it (`bash "
                            "scripts/download_data.sh` fetches the official files)")


# What a synthetic manifest counts of the profile and part files, and how to count it in the
# loaded data (the instructions are one file: a part cannot go missing there).
MANIFEST_COUNTS = {
    "users": lambda data: len(data.profiles),
    "products": lambda data: len(data.products),
    "behaviours": lambda data: sum(len(behaviours) for behaviours in data.histories.values()),
}


def _count_hint(data: BenchmarkData, name: str, more: bool) -> str:
    """Why a count may differ from the manifest's: a part missing (fewer), entries given twice (more)."""
    if name == "behaviours" and more:
        repeated = schema.repeated_behaviours(data.histories, HISTORY_PARTS)
        if repeated:
            return f": {len(repeated)} behaviour(s) are given twice (a part or an entry copied?), e.g. {repeated[0]}"
    parts = PRODUCT_PARTS if name == "products" else HISTORY_PARTS if name == "behaviours" else None
    if parts is None:
        return ""
    found = ", ".join(p.name for p in sorted(data.data_dir.glob(parts)))
    return f"; found {found}: " + ("entries added after it was generated?" if more else "is a part missing?")


def check_against_manifest(data: BenchmarkData) -> None:
    """Refuse synthetic data that is not what its manifest says: a part file gone (half the
    behaviours or products, silently) or a manifest edited to claim the published scale."""
    manifest = data.synthetic_manifest or {}
    path = data.data_dir / SYNTHETIC_MANIFEST
    recorded = manifest.get("counts")
    counts: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    for name, count in MANIFEST_COUNTS.items():
        expected, found = counts.get(name), count(data)
        if isinstance(expected, int) and expected != found:
            raise DataError(f"{data.data_dir}: holds {found} {name} where {path} says {expected}"
                            f"{_count_hint(data, name, found > expected)}")
    if manifest.get("scale") == FULL_SCALE and not matches_published_counts(data):
        summary = count_summary(data)
        raise DataError(f"{path}: scale {FULL_SCALE!r} has the published counts, but the data holds "
                        f"{summary['users']} users and {summary['train']}/{summary['test']} train/test instructions; "
                        "the manifest does not describe these files")


_CACHE: dict[Path, BenchmarkData] = {}
_CACHE_LOCK = threading.Lock()


def load_benchmark_data(data_dir: Path | str, reload: bool = False) -> BenchmarkData:
    """The shared data object of `data_dir`, loaded and validated on first use (and again
    with `reload`, for a program that has just rewritten the files)."""
    key = Path(data_dir).resolve()
    with _CACHE_LOCK:
        if reload or key not in _CACHE:
            _CACHE[key] = _load(key)
        return _CACHE[key]
