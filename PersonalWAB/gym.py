"""A Gymnasium-style interface over the PersonalWAB environment, for RL frameworks that drive
an environment one step at a time.

`PWABGymEnv` follows Gymnasium's `reset(seed=None, options=None) -> (observation, info)` and
`step(action) -> (observation, reward, terminated, truncated, info)` without depending on the
`gymnasium` package. Observations are the text an agent reads (the instruction or the user's
message, then `str()` of what each function returns); an action is a dict
`{"name": function, "arguments": {...}}` over the web functions `info["tools"]` describes
(or `respond` with `{"content": ...}` to message the user).

- **reward**: the step's attempt's Result Acc when its Function Acc is 1, else 0; steps that
  make no attempt (product details, `respond` in the multi-turn track, `stop`) give 0. In the
  multi-turn track a task's benchmark score is its best valid attempt: `info["task_score"]`
  carries it after every step.
- **terminated**: the track's rules ended the task: in the single-turn track the first
  search / recommend / review call, `stop`, or a message to the user; in the multi-turn track
  `stop`.
- **truncated**: the step budget ran out first: the multi-turn track's `max_steps`, or in the
  single-turn track `max_episode_steps` calls that do not end a task (default 10, the
  function-calling agent's limit in the release).

The scoring is the environment's own, so an episode run here scores exactly as `run.py` would
score the same actions.
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.metrics import task_score
from PersonalWAB.schema_types import Task
from PersonalWAB.types import RESPOND, STOP, Action


class GymResetInfo(TypedDict):
    """`reset`'s info: the task, its track and the tool schemas the agent may call."""

    task_index: int
    task: Task
    type: str
    user_id: str
    single_turn: bool
    max_episode_steps: int
    tools: list[dict[str, Any]]


class GymStepInfo(TypedDict):
    """`step`'s info: what the action was and how it scored, and the task's score so far."""

    steps: int
    attempt: bool
    function: str
    function_acc: float
    result_acc: float
    task_score: tuple[float, float]
    user_message: bool

SINGLE_TURN_STEP_LIMIT = 10  # the release's function-calling agent gives up after 10 calls


def reward_of(function_acc: float, result_acc: float) -> float:
    """The reward of one attempt: its Result Acc when it called the right function."""
    return result_acc if function_acc == 1 else 0.0


def parse_action(action: Any) -> Action:
    """An `Action` from `{"name": str, "arguments": dict}` (or an `Action`); a malformed one is refused."""
    if isinstance(action, Action):
        return action
    if not isinstance(action, dict) or not isinstance(action.get("name"), str):
        raise ValueError(f"an action is a dict {{'name': str, 'arguments': dict}}, got {action!r:.200}")
    arguments = action.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ValueError(f"action {action['name']!r}: 'arguments' must be a dict, got {type(arguments).__name__}")
    return Action(action["name"], arguments)


def checked_task_index(value: Any, split: str, count: int) -> int:
    """`value` as a task index of a split of `count` tasks; TypeError or ValueError naming
    task_index and the valid range otherwise (a bool or 1.5 is no index, whatever Python allows)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"task_index must be an integer from 0 to {count - 1} (the {split!r} split has {count} "
                        f"tasks), got {value!r} ({type(value).__name__})")
    index = int(value)
    if not 0 <= index < count:
        raise ValueError(f"task_index {value} is outside the {split!r} split: expected 0 to {count - 1} "
                         f"({count} tasks)")
    return index


class PWABGymEnv:
    """One PersonalWAB environment as an RL environment: each episode is one task of the split.

    `tasks` limits the episodes to those task indices (default: the whole split); `reset`
    draws one at random (seeded by `seed` or `reset(seed=...)`) unless
    `options={"task_index": i}` names it."""

    def __init__(self, env: PWABEnv, tasks: Sequence[int] | None = None, seed: int | None = None,
                 max_episode_steps: int | None = None):
        self.env = env
        self.tasks = list(range(len(env.tasks))) if tasks is None else list(tasks)
        if not self.tasks:
            raise ValueError(f"no tasks to draw episodes from in the {env.task_split!r} split")
        self.tasks = [checked_task_index(i, env.task_split, len(env.tasks)) for i in self.tasks]
        if env.max_steps > 0 and max_episode_steps is not None and max_episode_steps != env.max_steps:
            raise ValueError(f"max_episode_steps {max_episode_steps}: the multi-turn track's budget is the "
                             f"environment's max_steps ({env.max_steps})")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be at least 1, got {max_episode_steps}")
        self.max_episode_steps = env.max_steps if env.max_steps > 0 else (max_episode_steps or SINGLE_TURN_STEP_LIMIT)
        self.tools = env.tools_info()
        self.rng = random.Random(seed)
        self.active = False

    @property
    def task(self) -> Task | None:
        return self.env.task

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, GymResetInfo]:
        """Start an episode: `(observation, info)` with the task, the track and the tool schemas."""
        if seed is not None:
            self.rng = random.Random(seed)
        options = options or {}
        task_index = (checked_task_index(options["task_index"], self.env.task_split, len(self.env.tasks))
                      if "task_index" in options else self.rng.choice(self.tasks))
        observation, reset_info = self.env.reset(task_index)
        self.active = True
        task = reset_info["task"]
        return observation, {"task_index": task_index, "task": task, "type": task["type"],
                             "user_id": task["user_id"], "single_turn": self.env.single_turn,
                             "max_episode_steps": self.max_episode_steps, "tools": self.tools}

    def step(self, action: dict[str, Any] | Action) -> tuple[str, float, bool, bool, GymStepInfo]:
        """Apply one action: `(observation, reward, terminated, truncated, info)`."""
        if not self.active:
            raise RuntimeError("call reset() before step(), and again after an episode ends")
        parsed = parse_action(action)
        observation, (function_acc, result_acc), done, env_info = self.env.step(parsed)
        attempt = env_info["attempt"]
        steps = env_info["steps"]
        terminated = done and (self.env.single_turn or parsed.name == STOP)
        truncated = not terminated and steps >= self.max_episode_steps
        self.active = not (terminated or truncated)
        if not self.active and not self.env.done:  # the single-turn limit is ours: close the env's episode too
            self.env.done = True
        score = task_score([a.function_acc for a in self.env.attempts], [a.result_acc for a in self.env.attempts])
        info: GymStepInfo = {"steps": steps, "attempt": attempt is not None, "function": parsed.name,
                             "function_acc": function_acc, "result_acc": result_acc, "task_score": score,
                             "user_message": parsed.name == RESPOND and not self.env.single_turn}
        return observation, reward_of(function_acc, result_acc), terminated, truncated, info

    def close(self) -> None:
        """Nothing to release: the engines are shared by every environment over the same data."""
        self.active = False


def make(data_dir: str | Path | None = None, task_split: str = "train", max_steps: int = -1,
         user_mode: str = "no", user_model: str | None = None, *, tasks: Sequence[int] | None = None,
         seed: int | None = None, max_episode_steps: int | None = None, **env_settings: Any) -> PWABGymEnv:
    """A `PWABGymEnv` over the data in `data_dir` (built artefacts needed: `python -m
    PersonalWAB.build --data_dir DIR`); `env_settings` go to `get_env` (search_backend,
    protocol, leak_guard, user_api_base). Single-turn by default; `max_steps=N` with a
    `user_mode` (`offline`, `naive`) is the multi-turn track."""
    from PersonalWAB.envs.pwab.env import get_env

    env = get_env("pwab", user_mode, user_model, task_split, max_steps, data_dir=data_dir,
                  seed=seed or 0, **env_settings)
    return PWABGymEnv(env, tasks=tasks, seed=seed, max_episode_steps=max_episode_steps)
