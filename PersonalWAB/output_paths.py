"""Output paths (`--out`, `--output`, `--output_dir`, ...) checked before a command does any
work, so a folder that cannot be made or a file that cannot be written is named at once
instead of failing with a traceback after minutes of work."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _creatable_problem(path: Path, flag: str, folder: Path) -> str | None:
    """Why files cannot be written in `folder` (made where missing), or None."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        return f"{flag} {path}: {existing} is a file, so no folder can be made there"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{flag} {path}: cannot create or write files in {existing} (permission denied)"
    return None


def output_problem(path: Path | str, flag: str, folder: bool = False) -> str | None:
    """Why `path` cannot be written as the output `flag` names (a file, or with `folder` a
    folder to write files into), or None when it can."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            return f"{flag} {path}: is a file, not a folder"
        return _creatable_problem(path, flag, path)
    if path.is_dir():
        return f"{flag} {path}: is a folder; name a file"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{flag} {path}: the file is not writable (permission denied)"
    return _creatable_problem(path, flag, path.parent)


def check_output(path: Path | str | None, flag: str, folder: bool = False) -> None:
    """Raise DataError naming `flag` when `path` (if given) cannot be written."""
    problem = None if path is None else output_problem(path, flag, folder)
    if problem:
        raise DataError(problem)


def os_error_text(exc: OSError) -> str:
    """An OSError as one line that names its file: `PATH: reason`."""
    if exc.filename is None:
        return exc.strerror or str(exc)
    names = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
    return f"{names}: {exc.strerror or exc}"


def check_command_outputs(args: Any, outputs: dict[str, bool]) -> None:
    """Check the outputs a command's parsed `args` name: attribute -> whether it is a folder."""
    for attribute, folder in outputs.items():
        check_output(getattr(args, attribute, None), f"--{attribute}", folder)
