"""Run a command while competing CPU-bound processes keep the machine busy.

    python scripts/tools/under_load.py --busy 2 -- bash scripts/test.sh

The exit status is the command's. Used to check that the test suite (which has no
wall-clock assertions) and the one-time builds hold up on a loaded machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # devtools/ lives at the repository root

from devtools.cpu_load import competing_processes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=2, help="competing CPU-bound processes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    with competing_processes(args.busy):
        return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
