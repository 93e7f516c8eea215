"""Where data and derived artefacts live.

The official release keeps its data and prebuilt artefacts inside the package tree;
any other data directory (synthetic data, a copy of the official files) keeps its
derived artefacts beside the data, so nothing generated is ever written over
official files.
"""

from __future__ import annotations

import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
PWAB_DIR = PACKAGE_DIR / "envs" / "pwab"
OFFICIAL_DATA_DIR = PWAB_DIR / "data"
OFFICIAL_INDEX_DIR = PWAB_DIR / "functions" / "search" / "indexes"
OFFICIAL_CHECKPOINT = PWAB_DIR / "functions" / "recommender" / "checkpoint" / "pwab.pth"
OFFICIAL_ITEM_MAP = PWAB_DIR / "functions" / "recommender" / "data" / "1000_ids.json"
DEFAULT_SYNTHETIC_DIR = REPO_ROOT / "data" / "synthetic" / "small"

SYNTHETIC_MANIFEST = "synthetic_manifest.json"
CONSTRUCTION_MANIFEST = "construction_manifest.json"


@dataclass(frozen=True)
class ArtifactPaths:
    """Derived artefacts of one data directory (indexes, recommender, caches).

    Search indexes built here live one per folder under `lucene_indexes` / `bm25s_indexes`,
    each named by what it was built from (`engines.search.index_dir_for`), so indexes of
    other product texts or products sit beside each other and a build never replaces one a
    run is reading. `prebuilt_lucene_index` is the official release's own index (official
    data only), used as it is."""

    lucene_indexes: Path
    bm25s_indexes: Path
    checkpoint: Path
    item_map: Path
    cache_dir: Path
    prebuilt_lucene_index: Path | None = None

    def index_root(self, backend: str) -> Path:
        """The folder that holds `backend`'s indexes built here."""
        return self.lucene_indexes if backend == "lucene" else self.bm25s_indexes

    @classmethod
    def for_data_dir(cls, data_dir: Path | str) -> ArtifactPaths:
        data_dir = Path(data_dir).resolve()
        if data_dir == OFFICIAL_DATA_DIR.resolve():
            return cls(
                lucene_indexes=PWAB_DIR / "functions" / "search" / "lucene_indexes",
                bm25s_indexes=PWAB_DIR / "functions" / "search" / "bm25s_index",
                checkpoint=OFFICIAL_CHECKPOINT,
                item_map=OFFICIAL_ITEM_MAP,
                cache_dir=REPO_ROOT / "data" / "cache" / "official",
                prebuilt_lucene_index=OFFICIAL_INDEX_DIR,
            )
        return cls(
            lucene_indexes=data_dir / "indexes" / "lucene",
            bm25s_indexes=data_dir / "indexes" / "bm25s",
            checkpoint=data_dir / "recommender" / "pwab.pth",
            item_map=data_dir / "recommender" / "1000_ids.json",
            cache_dir=data_dir / "cache",
        )


def remove_derived_artifacts(data_dir: Path | str) -> None:
    """Indexes, the trained recommender and caches built from earlier data would silently
    disagree with new files, so they go when a directory's data changes (the item map is
    left to the writer of the data)."""
    import shutil

    artifacts = ArtifactPaths.for_data_dir(data_dir)
    sidecar = artifacts.checkpoint.with_name(artifacts.checkpoint.name + ".json")
    for stale in (artifacts.lucene_indexes, artifacts.bm25s_indexes, artifacts.checkpoint, sidecar,
                  artifacts.cache_dir):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()


# What reading a damaged cache file (truncated, overwritten, not what its name says) can raise:
# numpy's .npy/.npz readers, json and marshal between them.
UNREADABLE_CACHE = (OSError, EOFError, ValueError, TypeError, KeyError, AttributeError, zipfile.BadZipFile,
                    zlib.error)


def warn_unusable_cache(path: Path, why: str) -> None:
    """Name a cache file that cannot be used; the caller rebuilds it (a cache never stops a run)."""
    print(f"warning: {path}: {why}; rebuilding it", file=sys.stderr, flush=True)


def default_data_dir() -> Path:
    """The official data when it has been placed, else the bundled synthetic default."""
    if any(OFFICIAL_DATA_DIR.glob("user_instructions.json")):
        return OFFICIAL_DATA_DIR
    return DEFAULT_SYNTHETIC_DIR
