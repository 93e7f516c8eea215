"""Which libraries each side of the parity harness ran on.

The release's PUMA code runs on the libraries of its time, installed into a folder of their
own (`scripts/tools/install_release_libs.sh DIR`, `release_parity.py --release_libs DIR`):
each release command reports the versions it imported (the `libs_out` of release_worker.py's request). The
project's side runs in this process and in subprocesses of the same Python: its versions are
read here. Both go into the report and one summary line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devtools.release_mirror import ParityError, ReleaseRunner
from devtools.release_worker import LIBRARIES, RELEASE_LIBRARIES, library_versions

INSTALL_COMMAND = "bash scripts/tools/install_release_libs.sh DIR"


def check_release_libs(folder: str | None) -> None:
    """The release-era folder is given and holds every library the worker takes from it."""
    if not folder:
        raise ParityError("the puma check runs the release's PUMA code on the libraries of its time (transformers "
                          f"4.45, TRL 0.11, ...): install them once with `{INSTALL_COMMAND}` and pass "
                          "--release_libs DIR (or set PWAB_RELEASE_LIBS)")
    path = Path(folder)
    if not path.is_dir():
        raise ParityError(f"--release_libs {folder}: not a directory (install the release's libraries there with "
                          f"`{INSTALL_COMMAND.replace('DIR', folder)}`)")
    missing = [name for name in RELEASE_LIBRARIES if not (path / name).is_dir()]
    if missing:
        raise ParityError(f"--release_libs {folder}: no {', '.join(missing)} package in it (install them with "
                          f"`{INSTALL_COMMAND.replace('DIR', folder)}`)")


def release_versions(commands: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Per library, the versions the release's commands imported (more than one means they differed)."""
    versions: dict[str, list[str]] = {}
    for imported in commands.values():
        for name, found in imported.items():
            if found and found["version"] not in versions.setdefault(name, []):
                versions[name].append(found["version"])
    return {name: versions[name] for name in LIBRARIES if name in versions}


def report(runner: ReleaseRunner) -> dict[str, Any]:
    """The project's versions, the release's (merged over its commands) and per release command."""
    commands = runner.libraries()
    project = library_versions(load=True)
    return {"project": {name: found["version"] for name, found in project.items() if found},
            "release": release_versions(commands), "release_libs": runner.release_libs,
            "release_commands": commands}


def summary_line(libraries: dict[str, Any]) -> str:
    def listed(versions: dict[str, Any]) -> str:
        return ", ".join(f"{name} {'/'.join(v) if isinstance(v, list) else v}" for name, v in versions.items())

    return (f"libraries: release {listed(libraries['release']) or 'none reported'} "
            f"(from {libraries['release_libs']}); project {listed(libraries['project'])}")
