"""Build the search indexes of one data directory.

    python -m PersonalWAB.engines.search.build --data_dir DIR \
        [--backend lucene|bm25s|all] [--threads 2] [--index_dir PATH]

Indexes go where the engines look for them (`engines.search.search_index_dir`: one folder per
product-text and product fingerprint) unless `--index_dir` says otherwise; a rebuilt index
replaces the old one only once complete, and Ctrl-C discards it at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PersonalWAB.cli import leave
from PersonalWAB.engines.search import BACKENDS, build_index, search_index_dir
from PersonalWAB.engines.search.common import is_prebuilt
from PersonalWAB.errors import DataError
from PersonalWAB.paths import default_data_dir


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m PersonalWAB.engines.search.build",
        description="Build the BM25 search indexes (Lucene through Anserini, bm25s) of a data directory.",
    )
    parser.add_argument("--data_dir", type=Path, default=None,
                        help="data directory (default: the official data when placed, else data/synthetic/small)")
    parser.add_argument("--backend", choices=(*BACKENDS, "all"), default="all")
    parser.add_argument("--threads", type=int, default=2, help="Anserini indexing threads")
    parser.add_argument("--index_dir", type=Path, default=None,
                        help="where to write the index (only with a single --backend)")
    parser.add_argument("--protocol_file", default=None,
                        help="release protocol pack whose product text the index holds (default: the default "
                             "pack when placed, else the project's texts)")
    args = parser.parse_args(argv)
    if args.index_dir is not None and args.backend == "all":
        parser.error("--index_dir needs --backend lucene or --backend bm25s")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.protocol import load_protocol

    try:
        protocol = load_protocol(args.protocol_file)
        data = load_benchmark_data(args.data_dir or default_data_dir())
        backends = BACKENDS if args.backend == "all" else (args.backend,)
        for backend in backends:
            index_dir = args.index_dir or search_index_dir(data, backend, protocol)
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
