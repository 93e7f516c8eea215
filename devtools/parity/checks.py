"""The checks of the parity harness, each listed once: its name, whether it runs when none is
named, one line of help, and the class (one module of this package each) that does it. The
command line, the settings' checks and the session read this table; a new check is one module
and one row."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from devtools.parity.check import Check


@dataclass(frozen=True)
class CheckEntry:
    name: str
    runs_by_default: bool
    about: str
    target: str  # "module:Class"

    def load(self) -> Check:
        module, _, cls = self.target.partition(":")
        check: Check = getattr(importlib.import_module(module), cls)()
        return check


CHECKS: tuple[CheckEntry, ...] = (
    CheckEntry("observations", True, "the same actions replayed through both environments: observations, scores, "
                                     "done", "devtools.parity.observations:ObservationsCheck"),
    CheckEntry("first_request", True, "each agent configuration's first model request of every task, by both "
                                      "run.py's", "devtools.parity.first_request:FirstRequestCheck"),
    CheckEntry("multiturn_user", True, "the multi-turn track: the LLM user's requests and the agent's",
               "devtools.parity.multiturn_user:MultiturnUserCheck"),
    CheckEntry("puma", False, "a user's `puma run --recipe release` beside the release's PUMA scripts, step by step "
                              "(trains, generates, re-embeds: run when named)", "devtools.parity.puma:PumaCheck"),
)
BY_NAME = {entry.name: entry for entry in CHECKS}
DEFAULT_CHECKS = tuple(entry.name for entry in CHECKS if entry.runs_by_default)
