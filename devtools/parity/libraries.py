"""Which libraries each side of the parity harness ran on.

The release's PUMA code runs on the libraries of its time, installed into a folder of their
own (`scripts/tools/install_release_libs.sh DIR`, `release_parity.py --release_libs DIR`):
each release command reports the versions it imported (the `libs_out` of the release worker's
request, release/worker.py). The project's steps record the versions they ran on in their records
(`libraries`), which the report merges the same way. Both go into the report and one summary line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devtools.parity.mirror import ParityError, ReleaseRunner
from devtools.parity.release.worker import LIBRARIES, RELEASE_LIBRARIES, library_versions

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


def project_versions(run_dir: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    """Per library, the versions the project's steps ran on, as each step's record says (more than
    one means they differed); and per record."""
    import json

    records = {str(path.relative_to(run_dir)): json.loads(path.read_text(encoding="utf-8")).get("libraries", {})
               for path in sorted(run_dir.rglob("*puma_run.json"))}
    versions: dict[str, list[str]] = {}
    for found in records.values():
        for name, version in found.items():
            if version not in versions.setdefault(name, []):
                versions[name].append(version)
    return {name: versions[name] for name in LIBRARIES if name in versions}, records


def report(runner: ReleaseRunner, run_dir: Path | None = None) -> dict[str, Any]:
    """The project's versions (from its steps' records when its run is given, else this
    process's), the release's (merged over its commands) and per command and step."""
    commands = runner.libraries()
    if run_dir is not None and run_dir.is_dir():
        project, steps = project_versions(run_dir)
    else:
        project = {name: [found["version"]] for name, found in library_versions(load=True).items() if found}
        steps = {}
    return {"project": project, "project_steps": steps, "release": release_versions(commands),
            "release_libs": runner.release_libs, "release_commands": commands}


def summary_line(libraries: dict[str, Any]) -> str:
    def listed(versions: dict[str, Any]) -> str:
        return ", ".join(f"{name} {'/'.join(v) if isinstance(v, list) else v}" for name, v in versions.items())

    return (f"libraries: release {listed(libraries['release']) or 'none reported'} "
            f"(from {libraries['release_libs']}); project {listed(libraries['project'])}")
