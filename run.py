"""Evaluate an agent on PersonalWAB: `python run.py --help`."""

import sys

from PersonalWAB.cli import run_command
from PersonalWAB.runner.cli import cli

if __name__ == "__main__":
    sys.exit(run_command(cli))
