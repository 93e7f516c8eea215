"""Fetch the official PersonalWAB release files and check that they are complete.

The release keeps its data with Git LFS in the GitHub repository HongruCai/PersonalWAB;
GitHub's media host serves the real objects, while a plain clone (or the raw host)
gives only small pointer files. Only the standard library is used for the transfer, so
the download works before the heavy requirements are installed.

Every file goes to `<name>.part` first and is renamed into place only once it has
arrived whole, parses, and has the right shape, so an interrupted or bad transfer never
leaves a file the loader would pick up. No checksums are published, so the check after
the download compares the data with the sizes the paper reports.

`--with_protocol` / `--protocol_only` also fetch the release's Python files at the pinned
commit (plain text, from GitHub's raw host) and build the release protocol pack from them
(see `PersonalWAB.protocol.pack`); those files are checked against their known digests.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from PersonalWAB.data import schema
from PersonalWAB.data.loader import (
    INSTRUCTIONS_FILE,
    LFS_POINTER_PREFIX,
    PROFILES_FILE,
    load_benchmark_data,
)
from PersonalWAB.data.published import PUBLISHED_COUNTS, OfficialCounts, count_summary, type_mix
from PersonalWAB.errors import DataError
from PersonalWAB.paths import OFFICIAL_DATA_DIR, REPO_ROOT, ArtifactPaths
from PersonalWAB.outputs import FOLDER, parse_command
from PersonalWAB.settings import setting

DEFAULT_BASE_URL = "https://media.githubusercontent.com/media/HongruCai/PersonalWAB/main"
RAW_BASE_URL = "https://raw.githubusercontent.com"
OFFICIAL_REPOSITORY = "https://github.com/HongruCai/PersonalWAB"
REMOTE_DATA_DIR = "PersonalWAB/envs/pwab/data"
REMOTE_CHECKPOINT = "PersonalWAB/envs/pwab/functions/recommender/checkpoint/pwab.pth"
REMOTE_ITEM_MAP = "PersonalWAB/envs/pwab/functions/recommender/data/1000_ids.json"
PART_PREFIXES = ("all_products", "user_history")
CHUNK_BYTES = 1 << 20

Log = Callable[[str], None]
Check = Callable[[bytes, str], None]
T = TypeVar("T")


# ---------------------------------------------------------------- content checks


def _parse_json(raw: bytes, label: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise DataError(f"{label}: not valid JSON ({exc})") from None


def _json_check(check_shape: Callable[[Any, str], None]) -> Check:
    """A check that parses the bytes and applies one of the schema checks to them."""

    def check(raw: bytes, label: str) -> None:
        check_shape(_parse_json(raw, label), label)

    return check


def _check_item_map(content: Any, label: str) -> None:
    schema.expect_type(content, (dict,), label, "top level")
    for asin, item_id in content.items():
        schema.expect_type(item_id, (int,), label, f"[{asin!r}]")


def _check_checkpoint(raw: bytes, label: str) -> None:
    if not raw:
        raise DataError(f"{label}: empty file")


def _pointer_message(label: str) -> str:
    return (
        f"{label}: the server sent a Git LFS pointer instead of the file. Fetch the real "
        f"files with `git lfs install && git lfs pull` in a clone of {OFFICIAL_REPOSITORY}, "
        "or download the Google Drive copies linked from the project page, place them in the "
        "data folder and check them with `--verify_only`"
    )


# ---------------------------------------------------------------- what to fetch


@dataclass(frozen=True)
class _Wanted:
    """One release file: where it lives in the repository and where it goes here."""

    remote_path: str
    target: Path
    check: Check


def _data_file(dest: Path, name: str, check: Check) -> _Wanted:
    return _Wanted(f"{REMOTE_DATA_DIR}/{name}", dest / name, check)


def _part_check(prefix: str) -> Check:
    shape = schema.check_products_file if prefix == "all_products" else schema.check_history_file
    return _json_check(shape)


def _fixed_files(dest: Path) -> list[_Wanted]:
    return [
        _data_file(dest, PROFILES_FILE, _json_check(schema.check_profiles_file)),
        _data_file(dest, INSTRUCTIONS_FILE, _json_check(schema.check_instructions_file)),
    ]


def _artifact_files(dest: Path) -> list[_Wanted]:
    """The recommender files go where the rest of the project looks for them:
    the official paths for the official data folder, beside the data otherwise."""
    artifacts = ArtifactPaths.for_data_dir(dest)
    return [
        _Wanted(REMOTE_CHECKPOINT, artifacts.checkpoint, _check_checkpoint),
        _Wanted(REMOTE_ITEM_MAP, artifacts.item_map, _json_check(_check_item_map)),
    ]


def _part_number(path: Path) -> int | None:
    match = re.fullmatch(r".+_part_(\d+)\.json", path.name)
    return int(match.group(1)) if match else None


def _local_parts(dest: Path, prefix: str) -> list[int]:
    numbers = (_part_number(p) for p in dest.glob(f"{prefix}_part_*.json"))
    return sorted(n for n in numbers if n is not None)


# ---------------------------------------------------------------- transfer


def _size_text(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _retryable_status(code: int) -> bool:
    return code >= 500 or code in (408, 429)


class HttpFetcher:
    """HTTP access with retries: network errors and 5xx are retried with exponential
    backoff, a 404 is an answer (it ends part probing), other statuses are final."""

    def __init__(self, base_url: str, timeout: float, retries: int, backoff: float, log: Log) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = max(retries, 0)  # a negative count still means one attempt
        self.backoff = backoff
        self.log = log

    def url(self, remote_path: str) -> str:
        return f"{self.base_url}/{urllib.parse.quote(remote_path)}"

    def _retrying(self, url: str, action: Callable[[], T]) -> T | None:
        """Run `action` until it succeeds; None when the server answers 404."""
        for attempt in range(self.retries + 1):
            try:
                return action()
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                if not _retryable_status(exc.code):
                    raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from None
                error = f"HTTP {exc.code} {exc.reason}"
            except urllib.error.URLError as exc:
                error = str(exc.reason)
            except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                error = str(exc) or type(exc).__name__
            if attempt < self.retries:
                delay = self.backoff * 2**attempt
                self.log(f"  {url}: {error}; retrying in {delay:g}s")
                time.sleep(delay)
        raise DataError(f"{url}: failed after {self.retries + 1} attempts; last error: {error}")

    def exists(self, remote_path: str) -> bool:
        """Ask for the headers only: is the file still part of the release?"""
        url = self.url(remote_path)

        def head() -> bool:
            try:
                with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=self.timeout):
                    return True
            except urllib.error.HTTPError as exc:
                if exc.code not in (405, 501):
                    raise
            # The server refuses HEAD: open a GET, read its status, hang up before the body.
            with urllib.request.urlopen(url, timeout=self.timeout):
                return True

        return bool(self._retrying(url, head))

    def download(self, remote_path: str, part: Path, max_lines: int | None = None) -> int | None:
        """Stream the file into `part`; its size, or None when the server has no such file.
        With `max_lines`, only the file's first lines are kept (a sample of a line-per-record file)."""
        url = self.url(remote_path)
        return self._retrying(url, lambda: self._stream(url, part, max_lines))

    def _stream(self, url: str, part: Path, max_lines: int | None = None) -> int:
        lines_left = max_lines
        with urllib.request.urlopen(url, timeout=self.timeout) as response:
            announced = response.headers.get("Content-Length")
            size = 0
            with part.open("wb") as out:
                while chunk := response.read(CHUNK_BYTES):
                    if lines_left is not None:
                        chunk, lines_left = _first_lines(chunk, lines_left)
                    out.write(chunk)
                    size += len(chunk)
                    if lines_left == 0:
                        break
                out.flush()
                os.fsync(out.fileno())
        if max_lines is None and announced is not None and size != int(announced):
            # http.client returns a short body without complaint when the peer hangs up.
            raise ConnectionError(f"transfer ended after {size} of {announced} bytes")
        return size


def _first_lines(chunk: bytes, wanted: int) -> tuple[bytes, int]:
    """The part of `chunk` up to its `wanted`-th newline, and how many lines are still wanted."""
    position = -1
    for _ in range(wanted):
        position = chunk.find(b"\n", position + 1)
        if position < 0:
            return chunk, wanted - chunk.count(b"\n")
    return chunk[: position + 1], 0


def _local_problem(wanted: _Wanted) -> str | None:
    """Why a file already in place cannot be kept, or None when it is a valid copy."""
    raw = wanted.target.read_bytes()
    if raw.startswith(LFS_POINTER_PREFIX):
        return f"{wanted.target} is a Git LFS pointer"
    try:
        wanted.check(raw, str(wanted.target))
    except DataError as exc:
        return str(exc)
    return None


def _download(fetcher: HttpFetcher, wanted: _Wanted) -> int | None:
    """Fetch one file and move it into place only if it is whole and well formed."""
    url = fetcher.url(wanted.remote_path)
    wanted.target.parent.mkdir(parents=True, exist_ok=True)
    part = wanted.target.with_name(wanted.target.name + ".part")
    try:
        size = fetcher.download(wanted.remote_path, part)
        if size is None:
            return None
        raw = part.read_bytes()
        try:
            if raw.startswith(LFS_POINTER_PREFIX):
                raise DataError(_pointer_message(url))
            wanted.check(raw, url)
        except DataError as exc:
            raise DataError(f"{exc}; {wanted.target.name} was not saved") from None
        os.replace(part, wanted.target)
        return size
    finally:
        part.unlink(missing_ok=True)


def _place(fetcher: HttpFetcher, wanted: _Wanted, *, force: bool, probe: bool, report: dict[str, list[str]]) -> bool:
    """Make `wanted.target` a valid copy of the release file; False when the server lacks it.

    A valid copy already in place is kept (unless `force`); when `probe` is set the
    server is still asked whether the file exists, so a part dropped from the release
    is noticed instead of silently merged.
    """
    name = wanted.target.name
    if wanted.target.exists() and not force:
        problem = _local_problem(wanted)
        if problem is None:
            if probe and not fetcher.exists(wanted.remote_path):
                return False
            fetcher.log(f"  {name}: {_size_text(wanted.target.stat().st_size)} already present, kept")
            report["kept"].append(name)
            return True
        fetcher.log(f"  {name}: present but unusable ({problem}); fetching it again")
    started = time.monotonic()
    size = _download(fetcher, wanted)
    if size is None:
        return False
    fetcher.log(f"  {name}: {_size_text(size)} downloaded in {time.monotonic() - started:.1f}s")
    report["downloaded"].append(name)
    return True


def _place_parts(fetcher: HttpFetcher, dest: Path, prefix: str, *, force: bool, report: dict[str, list[str]]) -> None:
    """Fetch `<prefix>_part_1.json`, `_part_2`, ... until the server answers 404.

    The number of parts is not published, so probing is the only way to find it. A
    local part beyond the last one the server has would be merged by the loader, so it
    is reported rather than left in silently.
    """
    number = 1
    while _place(
        fetcher,
        _data_file(dest, f"{prefix}_part_{number}.json", _part_check(prefix)),
        force=force,
        probe=True,
        report=report,
    ):
        number += 1
    count = number - 1
    if count == 0:
        raise DataError(f"{fetcher.url(f'{REMOTE_DATA_DIR}/{prefix}_part_1.json')}: not found (404); check --base_url")
    stale = [n for n in _local_parts(dest, prefix) if n > count]
    if stale:
        raise DataError(
            f"{dest}: holds {prefix}_part_{stale[0]}.json but the release has only parts 1-{count}; "
            "remove the extra parts (the loader merges every part it finds)"
        )


def _place_required(fetcher: HttpFetcher, wanted: _Wanted, *, force: bool, report: dict[str, list[str]]) -> None:
    if not _place(fetcher, wanted, force=force, probe=False, report=report):
        raise DataError(f"{fetcher.url(wanted.remote_path)}: not found (404); check --base_url")


# ---------------------------------------------------------------- verification


def _contiguous_parts(dest: Path, prefix: str) -> int:
    numbers = _local_parts(dest, prefix)
    if numbers != list(range(1, len(numbers) + 1)):
        raise DataError(
            f"{dest}: {prefix}_part_*.json should be numbered 1..N without gaps, found parts {numbers}"
        )
    return len(numbers)


def _count_problems(summary: Mapping[str, Any], expected: OfficialCounts, dest: Path) -> list[str]:
    problems = []
    if summary["users"] != expected.users:
        problems.append(f"{dest / PROFILES_FILE}: {summary['users']:,} users, the release has {expected.users:,}")
    for split in ("train", "test"):
        if summary[split] != getattr(expected, split):
            problems.append(
                f"{dest / INSTRUCTIONS_FILE}: {summary[split]:,} {split} instructions, "
                f"the release has {getattr(expected, split):,}"
            )
    if summary["test_types"] != type_mix(expected.test_types):
        problems.append(
            f"{dest / INSTRUCTIONS_FILE}: test instruction types {summary['test_types']}, "
            f"the release has {type_mix(expected.test_types)}"
        )
    return problems


def verify_official(
    dest: Path | str = OFFICIAL_DATA_DIR,
    expected: OfficialCounts | None = None,
    *,
    with_artifacts: bool = False,
) -> dict[str, Any]:
    """Check a folder of official files: shapes, cross-references and published counts.

    `expected` defaults to `PUBLISHED_COUNTS`. Raises DataError naming the file and
    what is wrong; returns a summary of the counts, with `warnings` for oddities that
    do not make the data unusable.
    """
    dest = Path(dest)
    expected = expected or PUBLISHED_COUNTS
    parts = {prefix: _contiguous_parts(dest, prefix) for prefix in PART_PREFIXES}
    data = load_benchmark_data(dest)
    if data.is_synthetic:
        raise DataError(f"{dest}: holds synthetic data (it has a synthetic manifest), not the official release")
    summary: dict[str, Any] = {
        "dest": str(dest),
        "product_parts": parts["all_products"],
        "history_parts": parts["user_history"],
        **count_summary(data),
        "behaviours": sum(len(b) for b in data.histories.values()),
        "products": len(data.products),
        "warnings": list(data.warnings),
    }
    problems = _count_problems(summary, expected, dest)
    if problems:
        raise DataError("the data does not match the published release:\n  " + "\n  ".join(problems))
    if summary["products"] != expected.products:
        summary["warnings"].append(
            f"{summary['products']:,} products in all_products_part_*.json, the paper reports "
            f"{expected.products:,} (the catalogue parts may have changed)"
        )
    if with_artifacts:
        for wanted in _artifact_files(dest):
            problem = _local_problem(wanted) if wanted.target.exists() else f"{wanted.target}: file not found"
            if problem:
                raise DataError(problem)
    return summary


# ---------------------------------------------------------------- entry points


def _print_log(line: str) -> None:
    print(line, flush=True)


def download_official(
    dest: Path | str = OFFICIAL_DATA_DIR,
    *,
    base_url: str = DEFAULT_BASE_URL,
    with_artifacts: bool = False,
    force: bool = False,
    timeout: float = 60.0,
    retries: int = 3,
    backoff: float = 1.0,
    expected: OfficialCounts | None = None,
    log: Log = _print_log,
) -> dict[str, Any]:
    """Fetch the release files into `dest` (and the recommender files when asked), then verify.

    Returns `verify_official`'s summary plus the names `downloaded` and `kept`.
    """
    dest = Path(dest)
    fetcher = HttpFetcher(base_url, timeout, retries, backoff, log)
    report: dict[str, list[str]] = {"downloaded": [], "kept": []}
    log(f"fetching the official PersonalWAB data from {fetcher.base_url} into {dest}")
    for wanted in _fixed_files(dest):
        _place_required(fetcher, wanted, force=force, report=report)
    for prefix in PART_PREFIXES:
        _place_parts(fetcher, dest, prefix, force=force, report=report)
    if with_artifacts:
        for wanted in _artifact_files(dest):
            _place_required(fetcher, wanted, force=force, report=report)
    summary = verify_official(dest, expected, with_artifacts=with_artifacts)
    return {**summary, **report}


def download_protocol(dest: Path | str, *, base_url: str | None = None, timeout: float = 60.0, retries: int = 3,
                      backoff: float = 1.0, log: Log = _print_log) -> Path:
    """Fetch the release's Python files at the pinned commit and build the protocol pack
    from them (`dest/release_protocol.json`); the files are checked against their digests."""
    import tempfile

    from PersonalWAB.protocol import DEFAULT_PACK
    from PersonalWAB.protocol.pack import build_pack, describe, release_file_paths, write_pack
    from PersonalWAB.protocol.spec import RELEASE_COMMIT, RELEASE_REPOSITORY

    fetcher = HttpFetcher(base_url or f"{RAW_BASE_URL}/{RELEASE_REPOSITORY}/{RELEASE_COMMIT}", timeout, retries,
                       backoff, log)
    log(f"fetching the release's texts (commit {RELEASE_COMMIT[:7]}) from {fetcher.base_url}")
    with tempfile.TemporaryDirectory(prefix="pwab-release-") as tmp:
        for remote in release_file_paths():
            target = Path(tmp) / remote
            target.parent.mkdir(parents=True, exist_ok=True)
            if fetcher.download(remote, target) is None:
                raise DataError(f"{fetcher.url(remote)}: not found (HTTP 404)")
        out = write_pack(build_pack(tmp), Path(dest) / DEFAULT_PACK.name)
    log(describe(json.loads(out.read_text(encoding="utf-8")), out))
    return out


def _print_summary(summary: Mapping[str, Any]) -> None:
    types = ", ".join(f"{kind} {count:,}" for kind, count in summary["test_types"].items())
    print(
        f"verified {summary['dest']}: {summary['users']:,} users, {summary['behaviours']:,} behaviours "
        f"({summary['history_parts']} parts), {summary['products']:,} products ({summary['product_parts']} parts), "
        f"{summary['train']:,} train / {summary['test']:,} test instructions (test: {types})"
    )
    for warning in summary["warnings"]:
        print(f"warning: {warning}")


@dataclass
class DownloadSettings:
    """The flags of `python -m PersonalWAB.data download`."""

    out: Path = setting(OFFICIAL_DATA_DIR, "data folder to fill (with --verify_only: to check); another folder keeps "
                                           "the official data elsewhere (give run.py the same --data_dir)", metavar="DIR", aliases=("dest",),
                        default_text=f"the official data folder, {OFFICIAL_DATA_DIR.relative_to(REPO_ROOT)}")
    base_url: str = setting(DEFAULT_BASE_URL, "where the release's Git LFS files are served; change it to use a mirror")
    with_artifacts: bool = setting(False, "also fetch the release's SASRec checkpoint pwab.pth and its item map "
                                          "1000_ids.json, so runs use the official recommender instead of training one")
    force: bool = setting(False, "fetch files again even when a valid copy is present (a copy you suspect)")
    timeout: float = setting(60.0, "seconds to wait on the network per request; raise it on a slow link")
    retries: int = setting(3, "extra attempts after a network error or a server error (5xx)")
    verify_only: bool = setting(False, "fetch nothing: only check the files already in --out")
    with_protocol: bool = setting(False, "also build the release protocol pack (the release's prompts and tool "
                                         "texts) from the release's files at the pinned commit")
    protocol_only: bool = setting(False, "only build the release protocol pack, fetching no data")
    protocol_base_url: str | None = setting(None, "where the release's Python files are served; change it to use a "
                                                  "mirror", default_text="raw.githubusercontent.com at the pinned "
                                                                         "commit")


def holds_release_data(folder: Path) -> bool:
    """Whether a folder holds the release's data files (a download to verify or complete) and no
    data of this project's making (a manifest of the synthetic generator or the construction)."""
    from PersonalWAB.paths import CONSTRUCTION_MANIFEST, SYNTHETIC_MANIFEST

    if (folder / SYNTHETIC_MANIFEST).exists() or (folder / CONSTRUCTION_MANIFEST).exists():
        return False
    return (folder / INSTRUCTIONS_FILE).exists() or any(folder.glob(f"{PART_PREFIXES[0]}_part_*.json"))


def main(argv: list[str] | None = None) -> int:
    """`python -m PersonalWAB.data download`: fetch and verify the official data."""
    args = parse_command([DownloadSettings], argv, {"out": FOLDER}, own=lambda _: holds_release_data,
                         description="Fetch the official PersonalWAB data (and optionally its recommender and "
                                     "protocol pack) and check it is complete.")[0]
    if args.protocol_only:
        download_protocol(args.out, base_url=args.protocol_base_url, timeout=args.timeout, retries=args.retries)
        return 0
    if args.verify_only:
        summary = verify_official(args.out, with_artifacts=args.with_artifacts)
    else:
        summary = download_official(
            args.out,
            base_url=args.base_url,
            with_artifacts=args.with_artifacts,
            force=args.force,
            timeout=args.timeout,
            retries=args.retries,
        )
    _print_summary(summary)
    if args.with_protocol:
        download_protocol(args.out, base_url=args.protocol_base_url, timeout=args.timeout, retries=args.retries)
    return 0
