"""Data command line: `python -m PersonalWAB.data {synthetic,download,validate,protocol} ...`."""

from __future__ import annotations

import argparse
import sys

from PersonalWAB.errors import DataError
from PersonalWAB.cli import check_command_outputs

# Each command's output: a folder (True) or a file (False); checked before any work.
OUTPUTS = {"synthetic": {"out": True}, "download": {"dest": True}, "protocol": {"out": False}}


def _validate(args: argparse.Namespace) -> int:
    from PersonalWAB.data.loader import load_benchmark_data

    data = load_benchmark_data(args.data_dir)
    counts = {split: len(tasks) for split, tasks in data.tasks.items()}
    print(
        f"{data.data_dir}: valid ({data.source}); {len(data.profiles)} users, "
        f"{sum(len(b) for b in data.histories.values())} behaviours, {len(data.products)} products, "
        f"tasks {counts}"
    )
    for warning in data.warnings:
        print(f"warning: {warning}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.data import download, synthetic

    parser = argparse.ArgumentParser(prog="python -m PersonalWAB.data", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    synthetic.add_arguments(commands.add_parser("synthetic", help="write a synthetic PersonalWAB"))
    download.add_arguments(commands.add_parser("download", help="fetch and verify the official data"))
    validate = commands.add_parser("validate", help="check a data directory's files")
    validate.add_argument("--data_dir", required=True)
    validate.set_defaults(func=_validate)
    from PersonalWAB.protocol import command as protocol_command

    protocol_command.add_arguments(commands.add_parser(
        "protocol", help="build the release protocol pack from a checkout of the original release"))
    args = parser.parse_args(argv)
    try:
        check_command_outputs(args, OUTPUTS.get(args.command, {}))
        return args.func(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from PersonalWAB.cli import run_command

    sys.exit(run_command(main))
