"""`--user_mode human`: a person types the user's lines in the terminal."""

from __future__ import annotations

import sys
from typing import Any, Callable, TextIO

from PersonalWAB.envs.users.base import UserSimulator
from PersonalWAB.protocol import Protocol

PROMPT = "YOU> "
RULE = "-" * 72


class HumanUser(UserSimulator):
    """Shows the task and the agent's messages; reads one line per turn. The person only
    answers: the agent decides when the conversation ends (its `stop` or the step limit).
    End-of-input (Ctrl-D) answers with an empty line from then on."""

    def __init__(self, read: Callable[[str], str] = input, out: TextIO | None = None):
        self.read = read
        self.out = out or sys.stdout
        self.cost = 0.0
        self.closed = False

    def _print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def reset(self, task: dict[str, Any], profile: dict[str, str], protocol: Protocol) -> None:
        self.closed = False
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
        if self.closed:
            return ""
        while True:
            try:
                line = self.read(PROMPT).strip()
            except EOFError:
                self._print("\n(end of input: your further replies are empty)")
                self.closed = True
                return ""
            if line:
                return line
            self._print("(type a reply)")
