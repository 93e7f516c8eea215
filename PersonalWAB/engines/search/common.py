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
from PersonalWAB.paths import OFFICIAL_DATA_DIR, OFFICIAL_INDEX_DIR, ArtifactPaths
from PersonalWAB.schema_types import Product
from PersonalWAB.scratch import remove_stale

# Lucene refuses boolean queries with more clauses than this (one clause per distinct
# term); the bm25s engine applies the same limit so both backends fail alike.
MAX_QUERY_TERMS = 1024
CONTENTS_FILE = "pwab_contents.json"
Render = Callable[[Product], str]


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
    for data_dir in (OFFICIAL_DATA_DIR, index_dir.parent.parent.parent):
        root = ArtifactPaths.for_data_dir(data_dir).index_root(backend)
        if is_prebuilt(index_dir) or index_dir.parent.resolve() == root.resolve():
            return f"bash scripts/tools/build_search_index.sh --data_dir {data_dir} --backend {backend}"
    return (
        f"bash scripts/tools/build_search_index.sh --data_dir DATA_DIR --backend {backend} "
        f"--out {index_dir}"
    )


def missing_index(index_dir: Path, backend: str, what: str) -> DataError:
    """An unusable index, reported with the command that builds it."""
    return DataError(f"{index_dir}: {what}. Build it with `{_build_command(index_dir, backend)}`.")


def require_products(products: dict[str, Product], index_dir: Path) -> None:
    """Refuse to build an empty index, which neither backend could search."""
    if not products:
        raise DataError(f"{index_dir}: no products to index")


def scratch_dir(target: Path, purpose: str) -> Path:
    """A scratch folder beside `target`, on the same file system so the final rename is atomic;
    named after this process so a later run can remove it if the process is killed (as this
    one removes what killed builds left here)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.{purpose}-", dir=target.parent))


def replace_dir(built: Path, target: Path) -> None:
    """Move a finished index into place so readers never see a half-written one. An index
    that is already there is retired by a rename and then deleted: a run that has it open
    keeps reading its open files (POSIX keeps an open file's data until it is closed)."""
    if target.exists():
        retired = target.with_name(f".{target.name}.{os.getpid()}.old-{time.time_ns()}")
        os.replace(target, retired)
        os.replace(built, target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(built, target)


def is_prebuilt(index_dir: Path) -> bool:
    """Whether `index_dir` is the official release's own Lucene index (used as it is)."""
    return Path(index_dir).resolve() == OFFICIAL_INDEX_DIR.resolve()


def index_dir_for(artifacts: ArtifactPaths, backend: str, contents: str, products: str) -> Path:
    """The index a run reads whose products (`products`: `BenchmarkData.products_fingerprint`)
    are rendered by the texts of fingerprint `contents`: the official prebuilt Lucene index
    when it is placed, else the folder built here for exactly these two."""
    prebuilt = artifacts.prebuilt_lucene_index
    if backend == "lucene" and prebuilt is not None and prebuilt.is_dir() and any(prebuilt.iterdir()):
        return prebuilt
    return artifacts.index_root(backend) / f"{contents[:16]}-{products[:16]}"


def index_record(index_dir: Path) -> dict[str, Any]:
    """What an index built here records about its source ({} for the official prebuilt one
    or an unreadable record)."""
    try:
        record = json.loads((Path(index_dir) / CONTENTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def index_mismatch(index_dir: Path, contents: str, products: str) -> str | None:
    """Why the index in `index_dir` does not hold these products rendered by these texts
    (None: it does, or it is the official prebuilt index). An index whose record names no
    products (built before records had them) is judged by its texts alone."""
    if is_prebuilt(index_dir):
        return None
    record = index_record(index_dir)
    if record.get("contents") != contents:
        return "built from other product texts"
    if record.get("products") not in (None, "", products):
        return "built from other products"
    return None


def record_contents(index_dir: Path, contents: str, products: str = "") -> None:
    """Record which texts rendered the index in `index_dir` and from which products
    (read by `index_record`)."""
    (index_dir / CONTENTS_FILE).write_text(json.dumps({"contents": contents, "products": products}),
                                           encoding="utf-8")
