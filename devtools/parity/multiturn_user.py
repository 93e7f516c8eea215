"""The `multiturn_user` check: the multi-turn track with the LLM user (`--user_mode naive
--max_steps 3`), both run.py's against scripted servers: every task's user-simulator requests and
the agent's (devtools/parity/requests.py reads and compares them)."""

from __future__ import annotations

from typing import Any

from devtools.parity.check import Outcome, Session
from devtools.parity.requests import (MULTITURN_VARIANT, RunSetup, all_identical, multiturn_result, report,
                                      run_both, run_setup, summary_lines)


class MultiturnUserCheck:
    """The multi-turn track: the LLM user's requests and the agent's, from both run.py's."""

    def prepare(self, session: Session) -> RunSetup:
        return run_setup(session)

    def run(self, session: Session, setup: RunSetup) -> dict[str, Any]:
        session.log(f"multiturn_user: running both run.py's with the LLM user on {len(session.tasks)} task(s) ...")
        return run_both(setup, session.runner, "multiturn_user", MULTITURN_VARIANT, multiturn=True)

    def compare(self, session: Session, setup: RunSetup, run: dict[str, Any]) -> Outcome:
        result = multiturn_result(setup, session.tasks, run)
        return Outcome({"multiturn_user": report(result)}, summary_lines("multiturn_user", result),
                       all_identical(result))
