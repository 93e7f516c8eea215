"""The PersonalWAB environment: tau-bench-style reset/step over one task split, with the
release's rules.

- Every call of a function that answers a task type (search / recommend / review, see
  the table in `functions/`) is an attempt, scored and recorded; the agent sees the row's
  `render` of what the function returned (`str()` of a list of result texts, a review
  dict, ...). A function that raises answers `Error: <message>` and, for an action
  function, scores (0, 0). An unknown name answers `Unknown action <name>`. A failure of
  the engines themselves (`EngineError`) is not the agent's: it ends the episode with an
  error, so the task is recorded as errored and run again on resume.
- Single-turn (`max_steps == -1`): the episode ends at the first action function, at
  `stop`, or at a message to the user (answered with the no-user reply and scored
  (0, 0)).
- Multi-turn (`max_steps = N`): tool results go to the agent only; the simulated user
  speaks only when the agent sends a message (`respond`). The user cannot end the
  episode: it ends on the agent's `stop` or after N agent steps.
- The leak guard (an option, off as in the release) masks the target ASIN and long
  copied review spans in user messages before the agent reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from PersonalWAB import trace
from PersonalWAB.engines.shared import Engines
from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS, ToolContext
from PersonalWAB.envs.pwab.scoring import score_attempt
from PersonalWAB.envs.users.base import UserSimulator
from PersonalWAB.errors import EngineError
from PersonalWAB.protocol import Protocol, load_protocol
from PersonalWAB.schema_types import Task
from PersonalWAB.types import RESPOND, STOP, Action, Attempt


class ResetInfo(TypedDict):
    """What `reset` tells the agent beside the first observation."""

    task: Task
    task_index: int


class StepInfo(TypedDict):
    """What `step` tells beside the observation: the attempt the action scored (None for a message
    or a function that is not scored) and the steps taken so far."""

    attempt: Attempt | None
    steps: int


def unencodable(value: Any) -> str | None:
    """Why `value` (tool arguments) cannot be sent on as UTF-8 text, or None when it can."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return str(exc)
    elif isinstance(value, dict):
        return next((r for r in map(unencodable, [*value.keys(), *value.values()]) if r), None)
    elif isinstance(value, (list, tuple)):
        return next((r for r in map(unencodable, value) if r), None)
    return None


class PWABEnv:
    def __init__(self, engines: Engines, task_split: str = "test", user: UserSimulator | None = None,
                 max_steps: int = -1, protocol: Protocol | None = None, leak_guard: bool = False,
                 trial: int = 0):
        if max_steps == 0 or max_steps < -1:
            raise ValueError("max_steps is -1 (single-turn) or a positive step budget (multi-turn)")
        if max_steps > 0 and user is None:
            raise ValueError("the multi-turn track (max_steps > 0) needs a user simulator")
        self.engines = engines
        self.data = engines.data
        self.protocol = protocol or load_protocol()
        self.context = ToolContext(engines, self.protocol)
        self.task_split = task_split
        self.tasks = self.data.split(task_split)
        self.user = user
        self.max_steps = max_steps
        self.leak_guard = leak_guard
        self.trial = trial
        self.functions_info = [function.schema(self.protocol) for function in WEB_FUNCTIONS.values()]
        self.task: Task | None = None
        self.task_index: int | None = None
        self.attempts: list[Attempt] = []
        self.steps = 0
        self.done = True
        self.leak_flags: list[dict[str, Any]] = []  # user messages the leak guard masked

    @property
    def current_task(self) -> Task:
        """The task of the episode under way (RuntimeError before `reset`)."""
        if self.task is None:
            raise RuntimeError("call reset() first: no episode is under way")
        return self.task

    @property
    def single_turn(self) -> bool:
        return self.max_steps == -1

    def tools_info(self, names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """Schemas of the named functions (all of the table by default), in the table's order."""
        return [info for info in self.functions_info if names is None or info["function"]["name"] in names]

    def reset(self, task_index: int) -> tuple[str, ResetInfo]:
        if not 0 <= task_index < len(self.tasks):
            raise IndexError(f"task index {task_index} out of range for the {self.task_split!r} split "
                             f"({len(self.tasks)} tasks)")
        task = self.tasks[task_index]
        self.task = task
        self.task_index = task_index
        self.attempts = []
        self.steps = 0
        self.done = False
        self.leak_flags = []
        observation = self.protocol.first_observation(task)
        if self.user is not None:
            opening = self.user.reset(task, self.data.profile(task["user_id"]), self.protocol)
            if opening is not None:
                observation = self._guard(opening, task)
        return observation, {"task": task, "task_index": task_index}

    def step(self, action: Action | dict[str, Any]) -> tuple[str, list[float], bool, StepInfo]:
        if self.task is None or self.done:
            raise RuntimeError("call reset() before step(), and not after the episode is done")
        if isinstance(action, dict):
            action = Action(action.get("name", ""), action.get("arguments", {}))
        self.steps += 1
        observation, attempt, done = self._dispatch(action, self.task)
        if self.max_steps > 0 and self.steps >= self.max_steps:
            done = True
        self.done = done
        res = [attempt.function_acc, attempt.result_acc] if attempt else [0.0, 0.0]
        trace.record("step", task_index=self.task_index, action=action.to_dict(), observation=observation, res=res,
                     done=done)
        return observation, res, done, {"attempt": attempt, "steps": self.steps}

    def _dispatch(self, action: Action, task: Task) -> tuple[str, Attempt | None, bool]:
        if action.name == RESPOND:
            content = action.arguments.get("content", "") if isinstance(action.arguments, dict) else ""
            if self.single_turn:
                attempt = Attempt(RESPOND, 0.0, 0.0)
                self.attempts.append(attempt)
                return self.protocol.text("env.no_user_reply"), attempt, True
            assert self.user is not None, "a multi-turn episode has a user simulator"
            return self._guard(self.user.reply("" if content is None else str(content)), task), None, False
        function = WEB_FUNCTIONS.get(action.name)
        if function is None:
            return self.protocol.unknown_action(action.name), None, False
        failed, value = False, None
        problem = unencodable(action.arguments)
        if problem is not None:
            failed, observation = True, self.protocol.error(problem)
        else:
            try:
                value = function(self.context, action.arguments)
                observation = function.render(value)
            except EngineError:
                raise
            except Exception as exc:  # the release shows the agent any function error and goes on
                failed, observation = True, self.protocol.error(exc)
        if not function.scored:
            return observation, None, action.name == STOP
        attempt = score_attempt(task, action.name, value, failed, self.engines.embedder)
        self.attempts.append(attempt)
        return observation, attempt, self.single_turn

    def _guard(self, message: str, task: Task) -> str:
        """With the leak guard on, mask the target ASIN and copied review spans in a user message."""
        if not self.leak_guard:
            return message
        from PersonalWAB.envs.users.leak_guard import guard_message

        guarded = guard_message(message, task)
        if guarded.flagged:
            self.leak_flags.append({"step": self.steps, "masked": guarded.masked, "message": guarded.text})
        return guarded.text


def get_env(env_name: str = "pwab", user_mode: str = "no", user_model: str | None = None,
            task_split: str = "test", max_steps: int = -1, *, data_dir: str | Path | None = None,
            search_backend: str = "lucene", user_api_base: str | None = None, seed: int = 0,
            protocol: Protocol | None = None, leak_guard: bool = False) -> PWABEnv:
    """Build the environment over the shared data and engines of `data_dir`
    (default: the official data if placed, else the synthetic default)."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.shared import shared_engines
    from PersonalWAB.envs.users import get_user
    from PersonalWAB.paths import default_data_dir

    if env_name != "pwab":
        raise ValueError(f"unknown env {env_name!r}; the only environment is 'pwab'")
    protocol = protocol or load_protocol()
    engines = shared_engines(load_benchmark_data(data_dir or default_data_dir()), search_backend, protocol)
    user = get_user(user_mode, user_model, user_api_base, seed)
    return PWABEnv(engines, task_split=task_split, user=user, max_steps=max_steps, protocol=protocol,
                   leak_guard=leak_guard)
