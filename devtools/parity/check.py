"""What a check of the parity harness is: something that prepares the inputs both sides read, runs
the release's side (in its worker process, devtools/parity/release/) beside this project's, and
compares what they produced, item by item. Each check is one module of this package with one
class following `Check`, listed once in devtools/parity/checks.py.

The two sides of a check run side by side rather than one after the other (the release in its
own process while the project works in this one, or both as subprocesses), which is why `run`
covers both; `compare` only reads what they left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from devtools.parity.compare import Tally
from devtools.parity.mirror import ReleaseRunner


@dataclass
class Session:
    """What every check is given: the settings (devtools.parity.settings.ParitySettings, paths
    absolute), the runner of the release's mirror, the work folder, the split's tasks and the
    ones compared, and where progress goes."""

    settings: Any
    runner: ReleaseRunner
    work: Path
    repo_root: Path
    split_tasks: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    log: Callable[[str], None] = print


@dataclass
class Outcome:
    """One check's result: its items by name (what the report holds of each), the summary lines
    it prints, whether everything compared was identical, and what else the report keeps."""

    report: dict[str, Any]
    lines: list[str]
    identical: bool
    extra: dict[str, Any] = field(default_factory=dict)  # top-level report entries (e.g. the libraries)


class Check(Protocol):
    """One comparison between the release and this project (its name, whether it runs by
    default and its help line are its row in devtools/parity/checks.py)."""

    def prepare(self, session: Session) -> Any:
        """The inputs both sides read (task files, scripted models, a stand-in model)."""

    def run(self, session: Session, prepared: Any) -> Any:
        """Both sides, side by side, on the prepared inputs; what each produced."""

    def compare(self, session: Session, prepared: Any, ran: Any) -> Outcome:
        """The items: what differs, what was compared."""


def run_check(check: Check, session: Session) -> Outcome:
    """Prepare, run both sides, compare."""
    prepared = check.prepare(session)
    return check.compare(session, prepared, check.run(session, prepared))


def tally_report(items: dict[str, Tally]) -> dict[str, Any]:
    return {label: tally.to_dict() for label, tally in items.items()}
