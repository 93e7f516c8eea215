"""The `first_request` check: each agent configuration (`requests.VARIANTS`) run by the release's
run.py and this project's side by side, each against its own scripted model server playing the
same deterministic model; every task's first request body compared (devtools/parity/requests.py
reads and compares the requests)."""

from __future__ import annotations

from typing import Any

from devtools.parity.check import Outcome, Session
from devtools.parity.requests import (VARIANTS, RunSetup, all_identical, first_request_result, report, run_both,
                                      run_setup, summary_lines)


class FirstRequestCheck:
    """Each agent configuration's first model request of every task, from both run.py's."""

    def prepare(self, session: Session) -> RunSetup:
        return run_setup(session)

    def run(self, session: Session, setup: RunSetup) -> dict[str, dict[str, Any]]:
        runs = {}
        for name in session.settings.variant_names:
            session.log(f"first_request[{name}]: running both run.py's on {len(session.tasks)} task(s) ...")
            runs[name] = run_both(setup, session.runner, name, VARIANTS[name], multiturn=False)
        return runs

    def compare(self, session: Session, setup: RunSetup, runs: dict[str, dict[str, Any]]) -> Outcome:
        results = {f"first_request[{name}]": first_request_result(setup, session.tasks, name, run)
                   for name, run in runs.items()}
        return Outcome({label: report(result) for label, result in results.items()},
                       [line for label, result in results.items() for line in summary_lines(label, result)],
                       all(all_identical(result) for result in results.values()))
