"""What both search backends share: the checks that make them fail alike on bad arguments,
and the index-folder handling that makes their builds atomic and their texts traceable."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError, ToolArgumentError
from PersonalWAB.paths import OFFICIAL_DATA_DIR, ArtifactPaths

# Lucene refuses boolean queries with more clauses than this (one clause per distinct
# term); the bm25s engine applies the same limit so both backends fail alike.
MAX_QUERY_TERMS = 1024
CONTENTS_FILE = "pwab_contents.json"
Render = Callable[[dict[str, Any]], str]


# --------------------------------------------------------------------------- arguments


def check_query(query: Any) -> str:
    """Reject what no backend can search, with the message the agent will read; an empty
    query is searched (and finds nothing), as in the release."""
    if not isinstance(query, str):
        raise ToolArgumentError("query must be a string")
    return query


def check_k(k: Any) -> int:
    """Reject a result count no backend can honour, with the message the agent will read."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ToolArgumentError(f"k must be a positive integer, got {k!r}")
    return k


def too_many_terms() -> ToolArgumentError:
    """The error both backends raise for a query over `MAX_QUERY_TERMS` distinct terms."""
    return ToolArgumentError(f"query has more than {MAX_QUERY_TERMS} distinct terms; shorten it")


# --------------------------------------------------------------------------- index folders


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


def missing_index(index_dir: Path, backend: str, what: str) -> DataError:
    """An unusable index, reported with the command that builds it."""
    return DataError(f"{index_dir}: {what}. Build it with `{_build_command(index_dir, backend)}`.")


def require_products(products: dict[str, dict[str, Any]], index_dir: Path) -> None:
    """Refuse to build an empty index, which neither backend could search."""
    if not products:
        raise DataError(f"{index_dir}: no products to index")


def scratch_dir(target: Path, purpose: str) -> Path:
    """A scratch folder beside `target`, on the same file system so the final rename is atomic;
    named after this process so a later run can remove it if the process is killed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.{purpose}-", dir=target.parent))


def replace_dir(built: Path, target: Path) -> None:
    """Move a finished index into place so readers never see a half-written one."""
    if target.exists():
        retired = target.with_name(f".{target.name}.{os.getpid()}.old-{time.time_ns()}")
        os.replace(target, retired)
        os.replace(built, target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(built, target)


def contents_fingerprint(index_dir: Path) -> str | None:
    """Which texts rendered an index built here; None for an index built elsewhere (the
    official prebuilt one) or an unreadable record."""
    path = Path(index_dir) / CONTENTS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("contents")
    except (OSError, ValueError, AttributeError):
        return None


def record_contents(index_dir: Path, fingerprint: str) -> None:
    """Record which texts rendered the index in `index_dir` (read by `contents_fingerprint`)."""
    (index_dir / CONTENTS_FILE).write_text(json.dumps({"contents": fingerprint}), encoding="utf-8")
