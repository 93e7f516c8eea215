"""`--user_mode human`: a person types the user's lines in the terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from PersonalWAB.envs.users.base import UserSimulator
from PersonalWAB.errors import FatalError
from PersonalWAB.protocol import Protocol
from PersonalWAB.schema_types import Task, UserProfile

PROMPT = "YOU> "
RULE = "-" * 72


class InputEnded(FatalError):
    """The person ended the input (Ctrl-D, or a piped file ran out): no later task can be
    answered, so the run stops; the task in progress is not recorded and runs again on resume."""


class HumanUser(UserSimulator):
    """Shows the task and the agent's messages; reads one line per turn. The person only
    answers: the agent decides when the conversation ends (its `stop` or the step limit).
    End-of-input (Ctrl-D) stops the run (InputEnded) instead of answering with empty lines."""

    def __init__(self, read: Callable[[str], str] = input, out: TextIO | None = None):
        self.read = read
        self.out = out or sys.stdout
        self.cost = 0.0

    def _print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def reset(self, task: Task, profile: UserProfile, protocol: Protocol) -> None:
        self._print(RULE)
        self._print(f"You play user {task['user_id']} ({task['type']} task).")
        self._print("Your profile: " + "; ".join(f"{k}: {v}" for k, v in profile.items()))
        self._print("What you want (keep the details to yourself; never give the product ID):"
                    f"{protocol.product_block(task['target']['product_info'])}")
        if task["type"] == "review":
            self._print(f"The review you would write: {task['target']['review']['text']}")
        self._print(f"Your request, sent for you: {task['task']}")
        self._print("Type one line whenever the agent writes to you; the agent ends the conversation.")
        self._print(RULE)
        return None

    def reply(self, agent_message: str) -> str:
        self._print(f"AGENT: {agent_message}")
        while True:
            try:
                line = self.read(PROMPT).strip()
            except EOFError:
                self._print()
                raise InputEnded("end of input on the user's turn (--user_mode human): the run stops; the task "
                                 "in progress is not recorded and runs again with --resume_from") from None
            if line:
                return line
            self._print("(type a reply)")
