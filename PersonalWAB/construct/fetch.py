"""Fetch Amazon Reviews 2023 raw files for the categories asked for, for users with internet.

Files stream from the Hugging Face hub (`McAuley-Lab/Amazon-Reviews-2023`, public, no
token needed) to `<name>.part` and are renamed into place only when whole, with the
project's HTTP fetcher (retries with backoff on network errors and 5xx). A file already
fetched whole is kept. `max_lines` fetches only the first lines of each file, a sample
for trying the pipeline; such files are recorded as partial and fetched again in full by
a later call without it. `RAW/fetch_manifest.json` records what came from where.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PersonalWAB.data import amazon_raw
from PersonalWAB.data.download import HttpFetcher
from PersonalWAB.data.layout import json_bytes, write_atomic
from PersonalWAB.errors import DataError

FETCH_MANIFEST = "fetch_manifest.json"
Log = Callable[[str], None]


def _manifest(raw_dir: Path) -> dict[str, Any]:
    path = raw_dir / FETCH_MANIFEST
    if not path.exists():
        return {"files": {}}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); delete it to fetch again") from None


def fetch_categories(categories: list[str], raw_dir: Path | str, *, base_url: str = amazon_raw.HF_BASE_URL,
                     max_lines: int | None = None, reviews: bool = True, meta: bool = True, force: bool = False,
                     timeout: float = 120.0, retries: int = 5, log: Log = print) -> dict[str, Any]:
    """Place the review and/or metadata files of `categories` under `raw_dir`; returns the fetch manifest."""
    unknown = [c for c in categories if c not in amazon_raw.CATEGORIES]
    if unknown or not categories:
        raise DataError(f"--categories: unknown or missing {', '.join(unknown) or 'categories'}; "
                        f"known: {', '.join(amazon_raw.CATEGORIES)}")
    if max_lines is not None and max_lines < 1:
        raise DataError(f"--max_lines must be at least 1, got {max_lines}")
    raw_dir = Path(raw_dir)
    fetcher = HttpFetcher(base_url, timeout, retries, 2.0, log)
    manifest = _manifest(raw_dir)
    wanted = [name for c in categories for name, keep in
              ((amazon_raw.review_file(c), reviews), (amazon_raw.meta_file(c), meta)) if keep]
    for relative in wanted:
        target = raw_dir / relative
        record = manifest["files"].get(relative)
        whole = (record is not None and record["complete"] and target.is_file()
                 and target.stat().st_size == record["bytes"])
        if whole and not force:
            log(f"{relative}: already fetched ({record['bytes']:,} bytes), kept")
            continue
        first_lines = f" (first {max_lines:,} lines)" if max_lines else ""
        log(f"{relative}: fetching from {fetcher.url(relative)}{first_lines}")
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        try:
            size = fetcher.download(relative, part, max_lines=max_lines)
            if size is None:
                raise DataError(f"{fetcher.url(relative)}: not found (HTTP 404)")
            os.replace(part, target)
        finally:
            part.unlink(missing_ok=True)
        manifest["files"][relative] = {
            "url": fetcher.url(relative), "bytes": size, "complete": max_lines is None,
            "max_lines": max_lines, "fetched": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        write_atomic(raw_dir / FETCH_MANIFEST, json_bytes(manifest))
        log(f"{relative}: {size:,} bytes")
    return manifest
