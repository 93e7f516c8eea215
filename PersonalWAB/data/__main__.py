"""Data command line: `python -m PersonalWAB.data {synthetic,download,validate,protocol} ...`."""

from __future__ import annotations

import sys

from PersonalWAB.cli import dispatch

# command -> ("module:function" run with the remaining arguments, one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "synthetic": ("PersonalWAB.data.synthetic:main", "write a synthetic PersonalWAB"),
    "download": ("PersonalWAB.data.download:main", "fetch and verify the official data"),
    "validate": ("PersonalWAB.data.validate:main", "check a data directory's files"),
    "protocol": ("PersonalWAB.protocol.command:main",
                 "build the release protocol pack from a checkout of the original release"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("python -m PersonalWAB.data", "Write, fetch and check PersonalWAB data.", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
