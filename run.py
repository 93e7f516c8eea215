"""Evaluate an agent on PersonalWAB: `python run.py --help`."""

from PersonalWAB.runner.cli import cli

if __name__ == "__main__":
    cli()
