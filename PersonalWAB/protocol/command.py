"""`python -m PersonalWAB.data protocol`: build the release protocol pack from a checkout of
the original release, check its texts have the shapes the renderers expect, and write it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PersonalWAB.protocol import DEFAULT_PACK, check_shapes, texts_from_pack
from PersonalWAB.protocol.pack import build_pack, describe, write_pack
from PersonalWAB.protocol.spec import RELEASE_COMMIT, RELEASE_REPOSITORY


def _run(args: Any) -> int:
    out = Path(args.out) if args.out else DEFAULT_PACK
    pack = build_pack(args.release_dir, allow_unpinned=args.unpinned)
    check_shapes(texts_from_pack(pack), str(args.release_dir))
    write_pack(pack, out)
    print(describe(pack, out))
    return 0


def add_arguments(parser: Any) -> None:
    """Flags of `python -m PersonalWAB.data protocol`."""
    parser.add_argument("--release_dir", required=True, type=Path,
                        help=f"a checkout of {RELEASE_REPOSITORY} at commit {RELEASE_COMMIT[:7]}")
    parser.add_argument("--out", type=Path, default=None, help=f"pack file to write (default {DEFAULT_PACK})")
    parser.add_argument("--unpinned", action="store_true",
                        help="accept files that differ from the pinned commit (the pack is marked unpinned)")
    parser.set_defaults(func=_run)
