"""Run a command while competing CPU-bound processes keep the machine busy.

    python scripts/tools/under_load.py --busy 2 -- bash scripts/test.sh

The exit status is the command's. Used to check that the test suite (which has no
wall-clock assertions) and the one-time builds hold up on a loaded machine.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # devtools/ lives at the repository root

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.errors import DataError  # noqa: E402
from PersonalWAB.settings import parse, setting  # noqa: E402
from devtools.doubles.cpu_load import competing_processes  # noqa: E402


@dataclass
class UnderLoadSettings:
    """How busy the machine is made, and the command run meanwhile."""

    busy: int = setting(2, "competing CPU-bound processes (one per core keeps the machine fully loaded)")
    command: list[str] = setting(list, "the command to run, after --", positional=True, nargs="...",
                                 metavar="COMMAND", factory=list)


def main(argv: list[str] | None = None) -> int:
    args = parse(UnderLoadSettings, argv, prog="scripts/tools/under_load.py", description=__doc__)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise DataError("give the command to run after --")
    with competing_processes(args.busy):
        return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(run_command(main))
