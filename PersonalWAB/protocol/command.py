"""`python -m PersonalWAB.data protocol`: build the release protocol pack from a checkout of
the original release, check its texts have the shapes the renderers expect, and write it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.errors import DataError
from PersonalWAB.outputs import FILE, parse_command
from PersonalWAB.protocol import DEFAULT_PACK, check_shapes, texts_from_pack
from PersonalWAB.protocol.pack import build_pack, describe, read_pack, write_pack
from PersonalWAB.protocol.spec import RELEASE_COMMIT, RELEASE_REPOSITORY
from PersonalWAB.settings import setting


@dataclass
class ProtocolSettings:
    """The flags of `python -m PersonalWAB.data protocol`."""

    release_dir: Path = setting(Path, f"a checkout of {RELEASE_REPOSITORY} at commit {RELEASE_COMMIT[:7]}: the "
                                      "files the pack's texts are read from", required=True, metavar="DIR")
    out: Path | None = setting(None, "pack file to write; another path keeps the default pack as it is (give run.py "
                                     "--protocol_file with it)", metavar="FILE",
                               default_text=str(DEFAULT_PACK))
    unpinned: bool = setting(False, "accept release files that differ from the pinned commit (the pack is marked "
                                    "unpinned, and runs with it are not the release's)")


def is_pack(path: Path) -> bool:
    """Whether `path` is a protocol pack (this command's output, rebuilt in place)."""
    try:
        read_pack(path)
    except DataError:
        return False
    return True


def _default_pack(settings: ProtocolSettings) -> None:
    settings.out = settings.out or DEFAULT_PACK


def main(argv: list[str] | None = None) -> int:
    args = parse_command([ProtocolSettings], argv, {"out": FILE}, own=lambda _: is_pack, fill=_default_pack,
                         description=__doc__)[0]
    out = args.out or DEFAULT_PACK
    pack = build_pack(args.release_dir, allow_unpinned=args.unpinned)
    check_shapes(texts_from_pack(pack), str(args.release_dir))
    write_pack(pack, out)
    print(describe(pack, out))
    return 0
