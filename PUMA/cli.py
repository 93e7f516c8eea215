"""Argparse flags from the step configs' dataclass fields (one flag per field), the steps'
output paths checked before any work, and how a step ends on bad input."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any, Callable, TypeVar

from PersonalWAB.cli import BAD_INPUT, check_output, run_command
from PersonalWAB.errors import DataError

T = TypeVar("T")
# A step's settings problems are ValueErrors naming the flag (e.g. --recipe, an input another
# recipe made): one line and exit 2, like a DataError or an output that cannot be written.
STEP_BAD_INPUT = (*BAD_INPUT, ValueError)
# The config fields that name a step's output: folder (True) or file (False).
OUTPUT_FIELDS = {"output_dir": True, "out_dir": True, "output_file": False}


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per field; --help shows each default once (a None default stands for "not
    given", and shows nothing)."""
    for f in fields(cls):
        default = f.default
        shown = None if default is None else "(default: %(default)s)"
        if isinstance(default, bool):
            parser.add_argument(f"--{f.name}", action=argparse.BooleanOptionalAction, default=default, help=shown)
        elif isinstance(default, int):
            parser.add_argument(f"--{f.name}", type=int, default=default, help=shown)
        elif isinstance(default, float):
            parser.add_argument(f"--{f.name}", type=float, default=default, help=shown)
        else:
            parser.add_argument(f"--{f.name}", default=default, help=shown)


def config_from_args(cls: type[T], args: Any) -> T:
    return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


def check_step_outputs(config: Any) -> None:
    """Raise DataError naming the flag of an output the step could not write, before it
    loads a model or data."""
    for name, folder in OUTPUT_FIELDS.items():
        if hasattr(config, name):
            check_output(getattr(config, name), f"--{name}", folder)


def parse_config(cls: type[T], argv: list[str] | None, prog: str, doc: str | None) -> T:
    """The step's settings from `argv`, its outputs checked."""
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_arguments(parser, cls)
    config = config_from_args(cls, parser.parse_args(argv))
    check_step_outputs(config)
    return config


def run_step(main: Callable[[list[str] | None], int | None]) -> int:
    """`python -m PUMA.<step>`: the step's exit status, bad input in one line (exit 2)."""
    return run_command(main, None, STEP_BAD_INPUT)


def nonempty_split(data: Any, name: str, flag: str) -> list[dict[str, Any]]:
    """The tasks of split `name`, or a DataError naming `flag` when it is unknown or empty
    (checked before a step's long work: the memory embedding, building the engines)."""
    if name not in data.tasks:
        raise DataError(f"{flag} {name!r}: no such split; expected one of {', '.join(sorted(data.tasks))}")
    tasks = data.split(name)
    if not tasks:
        raise DataError(f"{flag} {name}: the {name!r} split of {data.data_dir} has no tasks")
    return tasks
