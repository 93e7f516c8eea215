"""`python -m PersonalWAB.reproduce ...` = `pwab reproduce ...`."""

import sys

from PersonalWAB.cli import run_command
from PersonalWAB.reproduce.cli import cli

if __name__ == "__main__":
    sys.exit(run_command(cli))
