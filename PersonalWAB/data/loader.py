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
from PersonalWAB.data.published import matches_published_counts
from PersonalWAB.errors import DataError
from PersonalWAB.gc_pause import gc_paused
from PersonalWAB.paths import CONSTRUCTION_MANIFEST, SYNTHETIC_MANIFEST, ArtifactPaths

try:
    import orjson

    def _parse(raw: bytes) -> Any:
        return orjson.loads(raw)

except ImportError:  # orjson is in requirements.txt; the stdlib parser is the fallback

    def _parse(raw: bytes) -> Any:
        return json.loads(raw)


LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
INSTRUCTIONS_FILE = "user_instructions.json"
PROFILES_FILE = "user_profiles.json"
PRODUCT_PARTS = "all_products_part_*.json"
HISTORY_PARTS = "user_history_part_*.json"


def read_json(path: Path, digest: Any = None) -> Any:
    """Parse one JSON file, naming it (and spotting Git LFS pointers) on failure; its name
    and bytes go into `digest` (a hashlib object) when one is given."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    if digest is not None:
        digest.update(f"{path.name}\0{len(raw)}\0".encode())
        digest.update(raw)
    if raw.startswith(LFS_POINTER_PREFIX):
        raise DataError(
            f"{path}: is a Git LFS pointer, not the data. Fetch the real files with "
            "`git lfs pull` in a clone of the official repository, or run "
            "`bash scripts/download_data.sh`."
        )
    try:
        return _parse(raw)
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None


def _part_number(path: Path) -> int:
    match = re.search(r"_part_(\d+)\.json$", path.name)
    return int(match.group(1)) if match else 0


def _merged_parts(data_dir: Path, pattern: str, digest: Any,
                  extend_lists: bool = False) -> tuple[dict[str, Any], list[Path]]:
    """One dict from all part files, in part order. With `extend_lists` (user histories) a
    key found in several parts gets all their entries, not only the last part's."""
    parts = sorted(data_dir.glob(pattern), key=_part_number)
    if not parts:
        raise DataError(f"{data_dir}: no files matching {pattern!r}")
    merged: dict[str, Any] = {}
    for part in parts:
        content = read_json(part, digest)
        schema.expect_type(content, (dict,), str(part), "top level")
        for key, value in content.items():
            if extend_lists and isinstance(merged.get(key), list) and isinstance(value, list):
                merged[key] = merged[key] + value
            else:
                merged[key] = value
    return merged, parts


@dataclass
class BenchmarkData:
    """Products, user histories, profiles and instructions of one data directory."""

    data_dir: Path
    products: dict[str, dict[str, Any]]
    histories: dict[str, list[dict[str, Any]]]
    profiles: dict[str, dict[str, str]]
    tasks: dict[str, list[dict[str, Any]]]
    synthetic_manifest: dict[str, Any] | None = None
    construction_manifest: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    fingerprint: str = ""  # sha256 over the data files' names and bytes: which data a result was run on
    _history_times: dict[str, list[int]] = field(default_factory=dict, repr=False)

    @property
    def is_synthetic(self) -> bool:
        return self.synthetic_manifest is not None

    @property
    def is_official(self) -> bool:
        """The release's files: no manifest of this project's and the published counts of users and
        instructions (not merely files without a manifest)."""
        return self.synthetic_manifest is None and self.construction_manifest is None \
            and matches_published_counts(self)

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

    def split(self, name: str) -> list[dict[str, Any]]:
        if name not in self.tasks:
            raise DataError(f"unknown task split {name!r}; expected one of {sorted(self.tasks)}")
        return self.tasks[name]

    def behaviours_before(self, user_id: str, timestamp: int) -> list[dict[str, Any]]:
        """The user's behaviours strictly before `timestamp`, oldest first."""
        behaviours = self.histories.get(user_id, [])
        cut = bisect.bisect_left(self._history_times.get(user_id, []), timestamp)
        return behaviours[:cut]

    def profile(self, user_id: str) -> dict[str, str]:
        try:
            return self.profiles[user_id]
        except KeyError:
            raise DataError(f"{self.data_dir / PROFILES_FILE}: no profile for user {user_id!r}") from None


PARSED_CACHE = "parsed_data.marshal"
PARSED_CACHE_VERSION = 1  # bump when `_parse_and_check` changes what it builds


def _files_key(data_dir: Path) -> list[list[Any]]:
    """Name, size and modification time of every data file: a changed file changes the key."""
    names = [p.name for pattern in (PRODUCT_PARTS, HISTORY_PARTS) for p in data_dir.glob(pattern)]
    names += [INSTRUCTIONS_FILE, PROFILES_FILE, SYNTHETIC_MANIFEST, CONSTRUCTION_MANIFEST]
    key = []
    for name in sorted(names):
        with contextlib.suppress(FileNotFoundError):
            stat = (data_dir / name).stat()
            key.append([name, stat.st_size, stat.st_mtime_ns])
    return key


def _cache_key(data_dir: Path) -> list[Any]:
    return [PARSED_CACHE_VERSION, sys.version, _files_key(data_dir)]


def _read_parsed_cache(data_dir: Path, key: list[Any]) -> BenchmarkData | None:
    """The validated data of an earlier load when its files have not changed since.

    `marshal` (not pickle: reading it runs no code) of plain dicts and lists loads in a
    fraction of the time of parsing and checking the JSON again."""
    path = ArtifactPaths.for_data_dir(data_dir).cache_dir / PARSED_CACHE
    try:
        with gc_paused():
            stored = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key:
        return None
    return BenchmarkData(data_dir=data_dir, **stored["fields"])


def _write_parsed_cache(data: BenchmarkData, key: list[Any]) -> None:
    """Keep the validated data for the next load; a read-only data directory just goes without."""
    fields = {name: getattr(data, name) for name in (
        "products", "histories", "profiles", "tasks", "synthetic_manifest", "construction_manifest",
        "warnings", "fingerprint", "_history_times")}
    path = ArtifactPaths.for_data_dir(data.data_dir).cache_dir / PARSED_CACHE
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(marshal.dumps({"key": key, "fields": fields}))
        os.replace(tmp, path)


def _load(data_dir: Path) -> BenchmarkData:
    """The directory's data: from the parsed-data cache when its files are unchanged, else
    parsed, checked and cached."""
    if not data_dir.is_dir():
        raise DataError(
            f"{data_dir}: data directory not found. Generate synthetic data with "
            "`python -m PersonalWAB.data synthetic --scale small --out DIR` or fetch the "
            "official files with `bash scripts/download_data.sh`."
        )
    key = _cache_key(data_dir)
    data = _read_parsed_cache(data_dir, key)
    if data is None:
        with gc_paused():
            data = _parse_and_check(data_dir)
        _write_parsed_cache(data, key)
    return data


def _parse_and_check(data_dir: Path) -> BenchmarkData:
    digest = hashlib.sha256()
    products, product_files = _merged_parts(data_dir, PRODUCT_PARTS, digest)
    histories, history_files = _merged_parts(data_dir, HISTORY_PARTS, digest, extend_lists=True)
    instructions = read_json(data_dir / INSTRUCTIONS_FILE, digest)
    profile_entries = read_json(data_dir / PROFILES_FILE, digest)
    schema.check_products_file(products, ", ".join(str(p) for p in product_files))
    schema.check_history_file(histories, ", ".join(str(p) for p in history_files))
    schema.check_instructions_file(instructions, str(data_dir / INSTRUCTIONS_FILE))
    schema.check_profiles_file(profile_entries, str(data_dir / PROFILES_FILE))

    warnings: list[str] = []
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

    manifest_path = data_dir / SYNTHETIC_MANIFEST
    manifest = read_json(manifest_path) if manifest_path.exists() else None
    built_path = data_dir / CONSTRUCTION_MANIFEST
    built = read_json(built_path) if built_path.exists() else None
    return BenchmarkData(
        data_dir=data_dir,
        products=products,
        histories=histories,
        profiles={uid: entry["user_profile"] for uid, entry in profile_entries.items()},
        tasks={"train": instructions["train"], "test": instructions["test"]},
        synthetic_manifest=manifest,
        construction_manifest=built,
        warnings=warnings,
        fingerprint=digest.hexdigest(),
        _history_times=history_times,
    )


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
