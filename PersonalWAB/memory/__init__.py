"""Which past behaviours an agent may see for a task, and the memory text of its prompt
(`--agent_memory`, `--memory_length`), as the release builds them.

Only behaviours strictly before the task's timestamp are eligible (`past`), so no
target (or anything after it) can leak into the memory. Modes:

- `none`: nothing.
- `last`: the `length` most recent behaviours, newest first.
- `random`: `length` behaviours drawn from the newest-first list. The release draws from
  one generator seeded once per run (`--seed`, default 2024), task after task;
  `ReleaseRandomMemory` replays exactly that sequence for the run's task order.
- `relevant`: the `length` behaviours whose full text (`Protocol.behaviour_block`) is
  closest to the instruction by MiniLM cosine, best first (from the on-disk cache).
- `recmind`: the `length` most recent behaviours, in RecMind's compact form.
- `interecagent`: the `length` most recent behaviours plus the like / dislike / expect
  lists of an `InterecMemoryStore`.
- `taskspe`: PUMA's task-specific memory: the `relevant` top `length`, keeping only the
  fields the chosen function needs; recommendation memory in time order, oldest first.

The release ignored `--memory_length` and always used 10 (`RELEASE_MEMORY_LENGTH`);
this project honours the flag and records any other value as a protocol departure.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from PersonalWAB.data.instruction_files import read_instruction_outputs
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.schema import TASK_FUNCTIONS, TASK_TYPE_OF_FUNCTION
from PersonalWAB.protocol import Protocol
from PersonalWAB.schema_types import Behaviour, Task

MEMORY_MODES = ("none", "last", "random", "relevant", "recmind", "interecagent", "taskspe")
RELEASE_MEMORY_LENGTH = 10
REACT_MEMORY_MODES = ("last", "relevant", "random")  # the modes the release's ReAct agent renders


def past_behaviours(data: BenchmarkData, task: Task) -> list[dict[str, Any]]:
    """The user's behaviours strictly before the task, oldest first."""
    return data.behaviours_before(task["user_id"], task["timestamp"])


def newest_first(behaviours: list[Behaviour]) -> list[dict[str, Any]]:
    """Most recent first; equal timestamps keep their order (a stable sort, as the release's)."""
    return sorted(behaviours, key=lambda b: b["review"]["timestamp"], reverse=True)


class ReleaseRandomMemory:
    """`random` memory as the release draws it: one `random.Random(seed)` consumed by
    `sample(newest_first(past), min(length, len(past)))` for each task run, in the run's
    order (trials in turn, tasks in index order). Precomputed, so concurrency cannot
    change which task gets which draw."""

    def __init__(self, data: BenchmarkData, tasks: list[Task], jobs: Iterable[tuple[int, int]],
                 length: int, seed: int):
        rng = random.Random(seed)
        self._draws: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for trial, task_index in jobs:
            past = newest_first(past_behaviours(data, tasks[task_index]))
            self._draws[(trial, task_index)] = rng.sample(past, min(length, len(past)))

    def draw(self, trial: int, task_index: int) -> list[dict[str, Any]] | None:
        return self._draws.get((trial, task_index))


def run_random_memory(data: BenchmarkData, config: Any) -> ReleaseRandomMemory | None:
    """The run's `random` memory draws (None unless `config.agent_memory` is random), in the
    release's task order: trials in turn, then the split's tasks from `start_index` (shuffle
    does not change it)."""
    if config.agent_memory != "random":
        return None
    tasks = data.split(config.task_split)
    order = [(trial, index) for trial in range(config.num_trials)
             for index in range(config.start_index, config.task_end(len(tasks)))]
    return ReleaseRandomMemory(data, tasks, order, config.memory_length, config.seed)


def most_relevant(data: BenchmarkData, task: Task, past: list[Behaviour], length: int,
                  protocol: Protocol, template: str = "memory.behaviour") -> list[dict[str, Any]]:
    """The `length` behaviours of `past` (a prefix of the user's history) whose `template`
    text is closest to the instruction, best first; equal scores keep the older behaviour first."""
    if not past:
        return []
    from PersonalWAB.memory.embeddings import shared_behaviour_embeddings

    scores = shared_behaviour_embeddings(data, protocol, template).scores(task["user_id"], task["task"], len(past))
    order = np.argsort(-scores, kind="stable")[:length]
    return [past[i] for i in order]


def retrieve_memory(data: BenchmarkData, task: Task, mode: str, length: int, *,
                    protocol: Protocol | None = None, random_draw: list[dict[str, Any]] | None = None,
                    seed: int = 0, task_type: str | None = None) -> list[dict[str, Any]]:
    """Up to `length` of the user's behaviours before the task, in the mode's order.

    `random` uses `random_draw` (the release's draw for this task run) when given, else a
    draw seeded by `seed` and the task. `taskspe` with task type `recommend` puts the
    chosen behaviours in time order, oldest first.
    """
    if mode not in MEMORY_MODES:
        raise ValueError(f"unknown memory {mode!r}; expected one of {MEMORY_MODES}")
    if mode == "none" or length <= 0:
        return []
    past = past_behaviours(data, task)
    if mode in ("last", "recmind", "interecagent"):
        return newest_first(past)[:length]
    if mode == "random":
        if random_draw is not None:
            return random_draw
        rng = random.Random(f"{seed}:{task['user_id']}:{task['timestamp']}")
        return rng.sample(newest_first(past), min(length, len(past)))
    from PersonalWAB.protocol import load_protocol

    chosen = most_relevant(data, task, past, length, protocol or load_protocol())
    if mode == "taskspe" and task_type == "recommend":
        return sorted(chosen, key=lambda b: b["review"]["timestamp"])
    return chosen


def memory_text(protocol: Protocol, data: BenchmarkData, task: Task, mode: str, length: int, *,
                react: bool = False, random_draw: list[dict[str, Any]] | None = None, seed: int = 0,
                preferences: dict[str, list[str]] | None = None, tool_name: str | None = None) -> str | None:
    """The memory appended to an agent's system prompt, or None when nothing is appended.

    Function-calling agents render every mode; the ReAct agent only `last`, `relevant` and
    `random` (other modes add nothing), with its own headers. `taskspe` needs `tool_name`
    (the function PUMA's function file chose) and adds nothing for a user without history;
    `interecagent` needs the user's `preferences` (like / dislike / expect).
    """
    if mode == "none":
        return None
    if react and mode not in REACT_MEMORY_MODES:
        return ""
    task_type = None
    if mode == "taskspe":
        if tool_name not in TASK_TYPE_OF_FUNCTION:
            raise ValueError(f"taskspe memory needs the chosen function, one of {TASK_FUNCTIONS}; got {tool_name!r}")
        task_type = TASK_TYPE_OF_FUNCTION[tool_name]
        if not past_behaviours(data, task):
            return None
    behaviours = retrieve_memory(data, task, mode, length, protocol=protocol, random_draw=random_draw, seed=seed,
                                 task_type=task_type)
    if mode in ("last", "relevant", "random"):
        header = f"react.memory.{mode}.header" if react else f"memory.{mode}.header"
        return protocol.numbered_memory(header, [protocol.behaviour_block(b, i) for i, b in enumerate(behaviours)])
    if mode == "recmind":
        return protocol.numbered_memory("memory.recmind.header",
                                        [protocol.recmind_block(b, i) for i, b in enumerate(behaviours)])
    if mode == "interecagent":
        return protocol.interecagent_memory([protocol.interecagent_block(b) for b in behaviours], preferences or {})
    entries = [protocol.taskspe_entry(b, task_type) for b in behaviours]
    return protocol.taskspe_agent_memory(task_type, tool_name, entries)


def normalise_function_name(output: str) -> str | None:
    """The task function a model's output names (e.g. `search_product_by_query()`,
    ` Add_Product_Review`), or None when it names none or several."""
    text = output.strip().lower()
    named = [name for name in TASK_FUNCTIONS if name in text]
    return named[0] if len(named) == 1 else None


def load_function_file(path: Path | str) -> dict[str, str]:
    """PUMA's function choices: instruction text -> function name.

    The file maps each instruction to a generated output or a list of them (the first
    counts). Outputs that name no task function are left out, so callers fall back to
    their default for them as for instructions the file does not hold.
    """
    functions: dict[str, str] = {}
    for instruction, output in read_instruction_outputs(path, "function").items():
        name = normalise_function_name(output) if isinstance(output, str) else None
        if name is not None:
            functions[instruction] = name
    return functions


def task_function(functions: dict[str, str] | None, instruction: str, default: str) -> str:
    """The function PUMA's file chose for the instruction, else `default`."""
    return (functions or {}).get(instruction, default)
