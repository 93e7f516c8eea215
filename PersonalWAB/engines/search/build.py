"""Build the search indexes of one data directory.

    python -m PersonalWAB.engines.search.build --data_dir DIR \\
        [--backend lucene|bm25s|all] [--threads 2] [--out PATH]

Indexes go where the engines look for them (`engines.search.search_index_dir`: one folder per
product-text and product fingerprint) unless `--out` says otherwise; a rebuilt index
replaces the old one only once complete, and Ctrl-C discards it at once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.cli import leave
from PersonalWAB.engines.search import BACKENDS, build_index, search_index_dir
from PersonalWAB.engines.search.common import CONTENTS_FILE, is_prebuilt
from PersonalWAB.errors import DataError
from PersonalWAB.paths import default_data_dir
from PersonalWAB.outputs import FOLDER, parse_command
from PersonalWAB.settings import setting


@dataclass
class IndexSettings:
    """The flags of `python -m PersonalWAB.engines.search.build`."""

    data_dir: Path | None = setting(None, "data folder whose products to index", metavar="DIR",
                                    default_text="the official data when placed, else data/synthetic/small")
    backend: str = setting("all", "index(es) to build: lucene (the release's engine, through Anserini; needs Java), "
                                  "bm25s (pure Python) or all", choices=(*BACKENDS, "all"))
    threads: int = setting(2, "Anserini indexing threads (lucene only); more is faster on a big catalogue")
    out: Path | None = setting(None, "folder to write the index into instead of where the engines look for it "
                                     "(only with a single --backend)", metavar="DIR",
                               aliases=("index_dir",))
    protocol_file: str | None = setting(None, "release protocol pack whose product text the index holds",
                                        metavar="FILE",
                                        default_text="the default pack when placed, else the project's texts")


def _settings(argv: list[str] | None) -> IndexSettings:
    settings: IndexSettings = parse_command(
        [IndexSettings], argv, {"out": FOLDER}, own=lambda _: is_index,
        prog="python -m PersonalWAB.engines.search.build",
        description="Build the BM25 search indexes (Lucene through Anserini, bm25s) of a data directory.")[0]
    if settings.out is not None and settings.backend == "all":
        raise DataError("--out needs --backend lucene or --backend bm25s (one index per folder)")
    if settings.threads < 1:
        raise DataError(f"--threads must be at least 1, got {settings.threads}")
    return settings


def is_index(folder: Path) -> bool:
    """Whether a folder is a search index this command built (rebuilt in place, as a whole)."""
    return (folder / CONTENTS_FILE).is_file()


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.protocol import load_protocol

    try:
        args = _settings(argv)
        protocol = load_protocol(args.protocol_file)
        data = load_benchmark_data(args.data_dir or default_data_dir())
        backends = BACKENDS if args.backend == "all" else (args.backend,)
        for backend in backends:
            index_dir = args.out or search_index_dir(data, backend, protocol)
            if is_prebuilt(index_dir):
                print(f"{backend}: the official prebuilt index {index_dir} is used as it is; not rebuilt")
                continue
            report = build_index(backend, data.products, index_dir, protocol.product_block,
                                 protocol.contents_fingerprint, threads=args.threads,
                                 products_fingerprint=data.products_fingerprint)
            print(f"{backend}: {report['documents']} documents indexed into {report['index_dir']} "
                  f"in {report['seconds']:.1f} s")
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the index being built was discarded; nothing was changed", file=sys.stderr)
        leave(130)  # the build is stopped and cleaned up: nothing is left to tear down but the data
    return 0


if __name__ == "__main__":
    from PersonalWAB.cli import run_command

    sys.exit(run_command(main))
