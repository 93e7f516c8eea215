"""`--user_mode human`: a person types the user's lines in the terminal."""

from __future__ import annotations

import sys
from typing import Any, Callable, TextIO

from PersonalWAB.data.product_text import product_to_text
from PersonalWAB.envs.user import STOP_TOKEN, UserSimulator

PROMPT = "YOU> "
RULE = "-" * 72


class HumanUser(UserSimulator):
    """Shows the task and the agent's messages; reads one line per turn.

    End the conversation with a line holding ###STOP### (or `stop`), or with
    end-of-input (Ctrl-D), which ends it politely.
    """

    def __init__(self, read: Callable[[str], str] = input, out: TextIO | None = None):
        self.read = read
        self.out = out or sys.stdout
        self.cost = 0.0

    def _print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def reset(self, task: dict[str, Any], profile: dict[str, str]) -> str:
        self._print(RULE)
        self._print(f"You play user {task['user_id']} ({task['type']} task).")
        self._print("Your profile: " + "; ".join(f"{k}: {v}" for k, v in profile.items()))
        self._print(f"What you want (keep the details to yourself; never give the product ID):\n"
                    f"{product_to_text(task['target']['product_info'])}")
        if task["type"] == "review":
            self._print(f"The review you would write: {task['target']['review']['text']}")
        self._print(f"Your opening line, sent for you: {task['task']}")
        self._print(f"Type one line per turn. Type {STOP_TOKEN} (or stop) when satisfied; Ctrl-D also ends.")
        self._print(RULE)
        return task["task"]

    def reply(self, agent_message: str) -> str:
        self._print(f"AGENT: {agent_message}")
        while True:
            try:
                line = self.read(PROMPT).strip()
            except EOFError:
                self._print("\n(end of input: the conversation ends here, thank you)")
                return f"Thanks, that's all for now. {STOP_TOKEN}"
            if line.lower() in ("stop", "quit", "exit"):
                return f"Thanks, that's all. {STOP_TOKEN}"
            if line:
                return line
            self._print(f"(type a reply, or {STOP_TOKEN} to end)")
