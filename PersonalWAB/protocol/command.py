"""`python -m PersonalWAB.data protocol`: build the release protocol pack from a checkout of
the original release, check its texts have the shapes the renderers expect, and write it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.cli import check_command_outputs
from PersonalWAB.protocol import DEFAULT_PACK, check_shapes, texts_from_pack
from PersonalWAB.protocol.pack import build_pack, describe, write_pack
from PersonalWAB.protocol.spec import RELEASE_COMMIT, RELEASE_REPOSITORY
from PersonalWAB.settings import parse, setting


@dataclass
class ProtocolSettings:
    """The flags of `python -m PersonalWAB.data protocol`."""

    release_dir: Path = setting(None, f"a checkout of {RELEASE_REPOSITORY} at commit {RELEASE_COMMIT[:7]}: the "
                                      "files the pack's texts are read from", required=True, kind=Path, metavar="DIR")
    out: Path | None = setting(None, "pack file to write; another path keeps the default pack as it is (give run.py "
                                     "--protocol_file with it)", kind=Path, metavar="FILE",
                               default_text=str(DEFAULT_PACK))
    unpinned: bool = setting(False, "accept release files that differ from the pinned commit (the pack is marked "
                                    "unpinned, and runs with it are not the release's)")


def main(argv: list[str] | None = None) -> int:
    args = parse(ProtocolSettings, argv, description=__doc__)
    check_command_outputs(args, {"out": False})
    out = args.out or DEFAULT_PACK
    pack = build_pack(args.release_dir, allow_unpinned=args.unpinned)
    check_shapes(texts_from_pack(pack), str(args.release_dir))
    write_pack(pack, out)
    print(describe(pack, out))
    return 0
