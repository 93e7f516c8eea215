"""What a command may write: outputs it can write at all (`output_problem`: not a device, FIFO
or folder, in a folder that can be made), and the one output rule every command's outputs pass.

A command writes an output only where
- nothing is yet (a new path, or an empty folder);
- it wrote what is there itself, as its record says: the ledger `.pwab-outputs.json` in the
  output's folder (which command wrote each file, with the file's size and time as it left
  them, so a file edited or replaced since is no longer its own), or the command's own record
  (a PUMA step's `*.puma_run.json`, a synthetic data folder's manifest: `own`); or
- `--overwrite` is given;
and never where one of its own inputs is (any other path its settings name), `--overwrite` or not.

`claim_outputs` checks a command's outputs against the rule before any work, with one line
naming the flag, the path and the fault. While the command runs (inside `command_scope`, which
`PersonalWAB.cli.run_command` opens around every command), the writer holds to it as well:
`write_output` writes a file of a claimed output (or a file inside a claimed container folder:
a report's pages, a plot's figures) only by the same rule and records it in the ledger, and
`PersonalWAB.scratch.atomic_write_bytes`, under every file the project writes, never replaces
one of the command's inputs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from PersonalWAB import scratch
from PersonalWAB.errors import DataError
from PersonalWAB.settings import flag_name, is_setting, parse_many, setting, spec_of

# What an output setting names: a file; a folder the command fills as one whole (a data folder,
# a model); or a folder of separate files the command names itself (a report's pages).
FILE, FOLDER, CONTAINER = "file", "folder", "container"
LEDGER = ".pwab-outputs.json"
OVERWRITE_HELP = "replace an output this command did not write (never one of its inputs)"


@dataclass
class Claim:
    """The outputs of the running command and what may be written there."""

    command: str
    overwrite: bool
    outputs: dict[Path, str]  # absolute path -> FILE, FOLDER or CONTAINER
    own: Callable[[Path], bool] | None = None
    flags: dict[Path, str] = field(default_factory=dict)


_scope_open = False
_claim: Claim | None = None


@contextlib.contextmanager
def command_scope() -> Iterator[None]:
    """While a command runs: its claim and its inputs hold for the writer, and go with it. As
    it ends (however, but a kill), the outputs it claimed that exist are noted in the ledger as
    its own, so running it again writes them again (a folder it filled part of included)."""
    global _scope_open, _claim
    saved = (_scope_open, _claim, scratch.protected_inputs())
    _scope_open, _claim = True, None
    scratch.protect_inputs({})
    try:
        yield
    finally:
        claim = _claim
        _scope_open, _claim = saved[0], saved[1]
        scratch.protect_inputs(saved[2])
        if claim is not None:
            _record_claimed(claim)


def _record_claimed(claim: Claim) -> None:
    for path, kind in claim.outputs.items():
        if kind != CONTAINER and _exists(path) and not written_by(path, claim.command):
            with contextlib.suppress(OSError, DataError):  # a folder gone read-only: the note is only a convenience
                record_written(path, claim.command)


def command_name(settings: Any) -> str:
    """What the ledger calls the command of `settings` (its settings class: one per command), by
    the module's own name also when it runs as `python -m MODULE` (where it is `__main__`)."""
    cls = type(settings)
    module = cls.__module__
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name if spec is not None else module
    return f"{module}.{cls.__qualname__}"


# ---------------------------------------------------------------- writable at all


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
    problem = scratch.output_file_problem(path)
    if problem:  # a FIFO or device would be replaced by the rename that writes the file
        return f"{flag} {path}: {problem}"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{flag} {path}: the file is not writable (permission denied)"
    return _creatable_problem(path, flag, path.parent)


def check_output(path: Path | str | None, flag: str, folder: bool = False) -> None:
    """Raise DataError naming `flag` when `path` (if given) cannot be written."""
    problem = None if path is None else output_problem(path, flag, folder)
    if problem:
        raise DataError(problem)


# ---------------------------------------------------------------- the ledger


def _ledger_of(folder: Path) -> dict[str, Any]:
    try:
        content = json.loads((folder / LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none, or unreadable: nothing in the folder counts as a command's own
    return content if isinstance(content, dict) else {}


def _stamp(path: Path) -> dict[str, Any]:
    """What tells the output a command left from one put there since: a folder's identity (its
    contents change as the command fills it), a file's size and time."""
    status = path.stat()
    if path.is_dir():
        return {"device": status.st_dev, "inode": status.st_ino}
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns}


def record_written(path: Path, command: str) -> None:
    """Note in the ledger beside `path` that `command` wrote it (as it is now). A note lost to
    two commands writing the same folder at once only makes that file foreign: safe."""
    path = Path(path).absolute()
    ledger = _ledger_of(path.parent)
    ledger[path.name] = {"command": command, **_stamp(path)}
    scratch.atomic_write_text(path.parent / LEDGER, json.dumps(ledger, indent=1, sort_keys=True))


def written_by(path: Path, command: str) -> bool:
    """Whether the ledger says `command` wrote `path`, and it is unchanged since (a folder: as named)."""
    path = Path(path).absolute()
    entry = _ledger_of(path.parent).get(path.name)
    if not isinstance(entry, dict) or entry.get("command") != command:
        return False
    try:
        return {key: value for key, value in entry.items() if key != "command"} == _stamp(path)
    except OSError:
        return False


# ---------------------------------------------------------------- inputs


def _paths_in(value: Any) -> list[Path]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [Path(one) for one in values if isinstance(one, (str, os.PathLike)) and str(one)]


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name no file system takes (a NUL byte, too long)
        return False


def command_inputs(settings: Iterable[Any], outputs: Iterable[str] = (), writes: Iterable[str] = ()) -> list[
        tuple[str, Path]]:
    """(flag, path) of every existing path the settings name other than the outputs and the
    settings the command also writes (`writes`: a file resumed in place, a memory it updates)."""
    skip = {*outputs, *writes}
    found = []
    for one in settings:
        if not is_dataclass(one):
            continue
        for item in fields(one):
            if item.name in skip or not is_setting(item):
                continue
            spec = spec_of(item)
            named = (spec.metavar or item.name.upper()) if spec.positional else f"--{flag_name(item)}"
            found += [(named, path) for path in _paths_in(getattr(one, item.name, None)) if _exists(path)]
    return found


def same_path(a: Path, b: Path) -> bool:
    """Whether two names are one file or folder (links and relative names followed)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return Path(os.path.abspath(a)) == Path(os.path.abspath(b))


def input_problem(path: Path, flag: str, inputs: Iterable[tuple[str, Path]]) -> str | None:
    """Why `path` may not be written: it is one of the command's inputs (None: it is none)."""
    for input_flag, input_path in inputs:
        if same_path(path, input_path):
            return (f"{flag} {path}: is also this command's input ({input_flag} {input_path}); an input is never "
                    "written over, --overwrite or not: name a new path")
    return None


# ---------------------------------------------------------------- the claim


def _foreign_entry(folder: Path) -> str | None:
    """A visible entry of `folder` (its ledger and scratch aside), or None when it holds none."""
    try:
        for entry in sorted(folder.iterdir()):
            if entry.name != LEDGER and not scratch.SCRATCH_NAME.match(entry.name):
                return entry.name
    except OSError:
        return None
    return None


def _made_here(path: Path, command: str, own: Callable[[Path], bool] | None) -> bool:
    return written_by(path, command) or (own is not None and own(path))


def claim_outputs(settings: Any, outputs: Mapping[str, str], *, also: Iterable[Any] = (), writes: Iterable[str] = (),
                  own: Callable[[Path], bool] | None = None, overwrite: bool | None = None) -> None:
    """Check the outputs `settings` name (attribute -> FILE, FOLDER or CONTAINER) by the output
    rule, before any work: each must be writable, none may be an input (any other path of
    `settings` or of the command's other settings `also`, less `writes`), and an existing one
    must be the command's own (`own`, or the ledger) unless `--overwrite`. While a command runs,
    the claim and the inputs then hold for the writer. Raises DataError naming the flag."""
    flags = {item.name: f"--{flag_name(item)}" for item in fields(settings) if is_setting(item)}
    command = command_name(settings)
    overwrite = bool(getattr(settings, "overwrite", False)) if overwrite is None else overwrite
    inputs = command_inputs([settings, *also], outputs, writes)
    claim = Claim(command, overwrite, {}, own)
    for attribute, kind in outputs.items():
        value = getattr(settings, attribute, None)
        if value is None or not str(value):
            continue
        path, flag = Path(value), flags.get(attribute, f"--{attribute}")
        problem = output_problem(path, flag, folder=kind != FILE) or input_problem(path, flag, inputs)
        if problem:
            raise DataError(problem)
        if not overwrite and kind == FILE and path.exists() and not _made_here(path, command, own):
            raise DataError(f"{flag} {path}: already exists and this command did not write it (it has no record of "
                            "it); pass --overwrite to replace it, or choose another path")
        if not overwrite and kind == FOLDER and path.is_dir() and not _made_here(path, command, own):
            entry = _foreign_entry(path)
            if entry is not None:
                raise DataError(f"{flag} {path}: holds files this command did not write (e.g. {entry}); pass "
                                "--overwrite to write into it, or choose a new or empty folder")
        claim.outputs[path.absolute()] = kind
        claim.flags[path.absolute()] = flag
    if _scope_open:
        global _claim
        _claim = claim
    hold_inputs(inputs)


def hold_inputs(inputs: Iterable[tuple[str, Path]]) -> None:
    """While the command runs, the writer never replaces these files ((flag, path) each)."""
    if _scope_open:
        scratch.protect_inputs({path: flag for flag, path in inputs})


# ---------------------------------------------------------------- the writer


def _claimed(path: Path) -> tuple[Claim, str] | None:
    """The running command's claim on `path` and the flag naming it, when `path` is one of its
    output files or a file of one of its container folders."""
    if _claim is None:
        return None
    if _claim.outputs.get(path) == FILE:
        return _claim, _claim.flags[path]
    if _claim.outputs.get(path.parent) == CONTAINER:
        return _claim, _claim.flags[path.parent]
    return None


def write_output(path: Path | str, content: bytes | str) -> None:
    """Write a command's output file whole (the one atomic writer) by the output rule: not over
    a file the command did not write unless --overwrite, never over one of its inputs; the file
    is then noted in the ledger as the command's."""
    path = Path(path).absolute()
    claimed = _claimed(path)
    if claimed is not None:
        claim, flag = claimed
        if not claim.overwrite and path.exists() and not _made_here(path, claim.command, claim.own):
            raise DataError(f"{flag}: {path} already exists and this command did not write it; pass --overwrite to "
                            "replace it, or choose another folder")
    data = content.encode("utf-8", "backslashreplace") if isinstance(content, str) else content
    scratch.atomic_write_bytes(path, data)
    if claimed is not None:
        record_written(path, claimed[0].command)


@dataclass
class OutputChoice:
    """The flag of every command that writes outputs: the output rule's one way past it."""

    overwrite: bool = setting(False, OVERWRITE_HELP)


def parse_command(classes: Sequence[type], argv: Sequence[str] | None, outputs: Mapping[str, str], *,
                  own: Callable[[Any], Callable[[Path], bool]] | None = None, writes: Iterable[str] = (),
                  fill: Callable[[Any], None] | None = None, **parser_options: Any) -> list[Any]:
    """The settings of a command that writes outputs (one instance per class of `classes`, its
    `--overwrite` beside them), its outputs (attributes of the first) claimed by the output rule
    before any work. `own(settings)`: what tells the command's own earlier outputs, where they
    carry a record of their own; `fill(settings)`: sets an output whose default depends on the
    other settings, so that it is claimed too."""
    *parsed, choice = parse_many([*classes, OutputChoice], argv, **parser_options)
    if fill is not None:
        fill(parsed[0])
    claim_outputs(parsed[0], outputs, also=parsed[1:], writes=writes, own=own(parsed[0]) if own else None,
                  overwrite=choice.overwrite)
    return parsed
