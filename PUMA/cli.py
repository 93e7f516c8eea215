"""Argparse flags from the step configs' dataclass fields (one flag per field)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


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


def parse_config(cls: type[T], argv: list[str] | None, prog: str, doc: str | None) -> T:
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_arguments(parser, cls)
    return config_from_args(cls, parser.parse_args(argv))
