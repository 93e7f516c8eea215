"""The PersonalWAB environment: tau-bench-style reset/step over one task split.

Single-turn (`max_steps == -1`): the task ends at the first action function, or
with (0, 0) on a message to the user. Multi-turn (`max_steps > 0`): every action
function call is a scored attempt, the simulated user sees the results and
replies, and the episode ends on `stop`, on the user's STOP token or after
`max_steps` agent steps. Every user message passes the leak guard (target
ASIN and copied review spans masked) before the agent reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PersonalWAB.data.product_text import product_to_text
from PersonalWAB.envs.pwab.engines import Engines
from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS, FunctionOutput
from PersonalWAB.envs.pwab.scoring import score_attempt
from PersonalWAB.envs.user import STOP_TOKEN, UserSimulator
from PersonalWAB.envs.users.leak_guard import guard_message
from PersonalWAB.errors import ToolArgumentError
from PersonalWAB.types import RESPOND, STOP, Action, Attempt

BASE_TOOLS = ("search_product_by_query", "get_recommendations_by_history", "add_product_review", "stop")
DETAILS_TOOL = "get_product_details_by_asin"
RESPOND_SCHEMA = {
    "type": "function",
    "function": {
        "name": RESPOND,
        "description": "Send a message to the user.",
        "parameters": {
            "type": "object",
            "properties": {"content": {"type": "string", "description": "The message."}},
            "required": ["content"],
        },
    },
}


def first_observation(task: dict[str, Any], opening: str | None = None) -> str:
    """`USER <id>: <instruction>`, with the product's details for review tasks."""
    text = f"USER {task['user_id']}: {opening if opening is not None else task['task']}"
    if task["type"] == "review":
        text += f"\n\nProduct details:\n{product_to_text(task['target']['product_info'])}"
    return text


class PWABEnv:
    def __init__(self, engines: Engines, task_split: str = "test", user: UserSimulator | None = None,
                 max_steps: int = -1, offer_details: bool = False):
        if max_steps == 0 or max_steps < -1:
            raise ValueError("max_steps is -1 (single-turn) or a positive step budget (multi-turn)")
        if max_steps > 0 and user is None:
            raise ValueError("the multi-turn track (max_steps > 0) needs a user simulator")
        self.engines = engines
        self.data = engines.data
        self.task_split = task_split
        self.tasks = self.data.split(task_split)
        self.user = user
        self.max_steps = max_steps
        names = BASE_TOOLS + ((DETAILS_TOOL,) if offer_details else ())
        self.tools_info = [WEB_FUNCTIONS[name].schema for name in names]
        self.task: dict[str, Any] | None = None
        self.attempts: list[Attempt] = []
        self.steps = 0
        self.done = True
        self.leak_flags: list[dict[str, Any]] = []  # user messages the leak guard masked

    @property
    def single_turn(self) -> bool:
        return self.max_steps == -1

    def reset(self, task_index: int) -> tuple[str, dict[str, Any]]:
        if not 0 <= task_index < len(self.tasks):
            raise IndexError(f"task index {task_index} out of range for the {self.task_split!r} split "
                             f"({len(self.tasks)} tasks)")
        self.task = self.tasks[task_index]
        self.attempts = []
        self.steps = 0
        self.done = False
        self.leak_flags = []
        opening = None
        if self.user is not None:
            opening = self._guard(self.user.reset(self.task, self.data.profile(self.task["user_id"])))
        return first_observation(self.task, opening), {"task": self.task, "task_index": task_index}

    def step(self, action: Action | dict[str, Any]) -> tuple[str, list[float], bool, dict[str, Any]]:
        if self.task is None or self.done:
            raise RuntimeError("call reset() before step(), and not after the episode is done")
        if isinstance(action, dict):
            action = Action(action.get("name", ""), action.get("arguments", {}))
        self.steps += 1
        observation, attempt, done = self._dispatch(action)
        if self.max_steps > 0 and self.steps >= self.max_steps:
            done = True
        self.done = done
        res = [attempt.function_acc, attempt.result_acc] if attempt else [0.0, 0.0]
        return observation, res, done, {"attempt": attempt, "steps": self.steps}

    def _dispatch(self, action: Action) -> tuple[str, Attempt | None, bool]:
        if action.name == RESPOND:
            if self.single_turn:
                return "", None, True
            arguments = action.arguments
            content = arguments.get("content", "") if isinstance(arguments, dict) else arguments
            return self._user_turn(str(content))
        if action.name == STOP:
            return "Task finished.", None, True
        function = WEB_FUNCTIONS.get(action.name)
        if function is None or (action.name == DETAILS_TOOL and
                                WEB_FUNCTIONS[DETAILS_TOOL].schema not in self.tools_info):
            return f"Unknown action {action.name}", None, False
        output: FunctionOutput | None
        try:
            output = function(self.engines, action.arguments)
            observation = output.text
        except ToolArgumentError as exc:
            output, observation = None, f"Error: {exc}"
        if not function.ends_task:
            return observation, None, False
        attempt = score_attempt(self.task, action.name, output, self.engines.embedder)
        self.attempts.append(attempt)
        if self.single_turn:
            return observation, attempt, True
        reply, _, done = self._user_turn(observation)
        return f"{observation}\n\nUSER: {reply}", attempt, done

    def _user_turn(self, message: str) -> tuple[str, None, bool]:
        reply = self.user.reply(message)
        done = STOP_TOKEN in reply
        return self._guard(reply), None, done

    def _guard(self, message: str) -> str:
        """Mask the target ASIN and copied review spans before the agent reads a user message."""
        guarded = guard_message(message, self.task)
        if guarded.flagged:
            self.leak_flags.append({"step": self.steps, "masked": guarded.masked, "message": guarded.text})
        return guarded.text


def get_env(env_name: str = "pwab", user_mode: str = "no", user_model: str | None = None,
            task_split: str = "test", max_steps: int = -1, *, data_dir: str | Path | None = None,
            search_backend: str = "lucene", offer_details: bool = False, user_api_base: str | None = None,
            seed: int = 0) -> PWABEnv:
    """Build the environment over the shared data and engines of `data_dir`
    (default: the official data if placed, else the synthetic default)."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.envs.pwab.engines import shared_engines
    from PersonalWAB.envs.user import get_user
    from PersonalWAB.paths import default_data_dir

    if env_name != "pwab":
        raise ValueError(f"unknown env {env_name!r}; the only environment is 'pwab'")
    engines = shared_engines(load_benchmark_data(data_dir or default_data_dir()), search_backend)
    user = get_user(user_mode, user_model, user_api_base, seed)
    return PWABEnv(engines, task_split=task_split, user=user, max_steps=max_steps, offer_details=offer_details)
