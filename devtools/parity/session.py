"""One parity session: settings checked, the release mirrored, the chosen checks run
(devtools/parity/checks.py lists them), one report. The command line is
scripts/tools/release_parity.py; docs/fidelity.md says what is compared."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devtools.parity.check import Session, run_check
from devtools.parity.checks import BY_NAME
from devtools.parity.mirror import PINNED_COMMIT, ParityError, ReleaseRunner, build_mirror, data_sources
from devtools.parity.settings import ParitySettings, load_tasks


def release_pack(settings: ParitySettings, work: Path, log: Callable[[str], None]) -> str:
    """The release protocol pack built from `--release_dir` (the release's own texts: both sides
    must read them, or the project's side would compare its own), and the data's Lucene index
    for its texts when missing, built once into the data folder as `pwab build --protocol_file`
    would. Returns the pack's path."""
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.search import search_index_dir
    from PersonalWAB.errors import DataError
    from PersonalWAB.protocol import load_protocol
    from PersonalWAB.protocol.pack import build_pack, write_pack

    path = work / "release_protocol.json"
    log(f"no --protocol_file: building the release protocol pack from {settings.release_dir} into {path}")
    try:
        write_pack(build_pack(settings.release_dir), path)
        data = load_benchmark_data(settings.data_dir)
        protocol = load_protocol(path)
        if not search_index_dir(data, "lucene", protocol).exists():
            log(f"building the Lucene index of {settings.data_dir} for the release's product texts (once) ...")
            build_artifacts(data, ("lucene",), recommender=False, protocol=protocol, log=log)
    except DataError as exc:
        raise ParityError(f"--release_dir {settings.release_dir}: {exc}") from None
    return str(path)


def run_session(settings: ParitySettings, scratch: Path, repo_root: Path,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the chosen checks (`settings` settled: paths absolute); the report says per check what
    was compared and what differed."""
    work = Path(settings.work_dir) if settings.work_dir else scratch
    work.mkdir(parents=True, exist_ok=True)
    if settings.protocol_file is None:
        settings = dataclasses.replace(settings, protocol_file=release_pack(settings, work, log))
        data_sources(Path(settings.data_dir), settings.protocol_file)
    split_tasks = load_tasks(Path(settings.data_dir))[settings.split]
    tasks = split_tasks[:settings.limit] if settings.limit else split_tasks
    mirror = build_mirror(settings.release_dir, settings.data_dir, parent=work, protocol_file=settings.protocol_file)
    runner = ReleaseRunner(mirror, list(settings.extra_path), sys.executable, settings.timeout_s)
    commit_note = ("" if mirror.commit in (None, PINNED_COMMIT) else
                   f" (warning: HEAD {mirror.commit[:7]} is not the pinned {PINNED_COMMIT[:7]})")
    log(f"release: {mirror.release_dir}{commit_note}; data: {settings.data_dir}; split {settings.split}, "
        f"{len(tasks)} task(s)")
    report: dict[str, Any] = {
        "release": {"dir": str(mirror.release_dir), "commit": mirror.commit, "pinned_commit": PINNED_COMMIT,
                    "py_sha256": mirror.fingerprint},
        "data_dir": settings.data_dir, "split": settings.split, "tasks": len(tasks),
        "agent_model": settings.agent_model, "user_model": settings.user_model,
        "protocol_file": settings.protocol_file, "checks": {}}
    identical = True
    session = Session(settings, runner, work, repo_root, split_tasks, tasks, log)
    try:
        for name in settings.chosen_checks:
            outcome = run_check(BY_NAME[name].load(), session)
            for line in outcome.lines:
                log(line)
            report["checks"].update(outcome.report)
            report.update(outcome.extra)
            identical &= outcome.identical
    finally:
        if settings.work_dir is None:
            mirror.remove()
    report["identical"] = identical
    log("parity: " + ("everything compared is identical" if identical else "differences found (see above)"))
    return report
