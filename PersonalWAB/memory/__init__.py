"""Which past behaviours an agent may see for a task, and the memory text of its prompt
(`--agent_memory`, `--memory_length`), as the release builds them.

Each mode is a row of the table in `PersonalWAB.memory.modes` (how it selects and
renders, its texts, what it needs first); this module reads the row. Only behaviours
strictly before the task's timestamp are eligible, so no target can leak into the memory.

The release ignored `--memory_length` and always used 10 (`RELEASE_MEMORY_LENGTH`);
this project honours the flag and records any other value as a protocol departure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PersonalWAB.data.instruction_files import read_instruction_outputs
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.schema import TASK_FUNCTIONS, TASK_TYPE_OF_FUNCTION
from PersonalWAB.memory.base import (MemoryMode, MemoryRequest, memory_tokens, most_relevant, newest_first,
                                     past_behaviours, within_budget)
from PersonalWAB.memory.modes import MEMORY_MODES, memory_mode
from PersonalWAB.memory.modes.random import ReleaseRandomMemory
from PersonalWAB.protocol import Protocol, fill_steps
from PersonalWAB.schema_types import Behaviour, Task

RELEASE_MEMORY_LENGTH = 10

__all__ = ["MEMORY_MODES", "RELEASE_MEMORY_LENGTH", "MemoryMode", "MemoryRequest", "ReleaseRandomMemory",
           "load_function_file", "memory_mode", "memory_text", "memory_tokens", "most_relevant", "newest_first",
           "normalise_function_name", "past_behaviours", "retrieve_memory", "run_random_memory", "system_prompt",
           "task_function"]


def run_random_memory(data: BenchmarkData, config: Any) -> ReleaseRandomMemory | None:
    """The run's draws (None unless `config.agent_memory` draws per run, as `random` does), in
    the release's task order: trials in turn, then the split's tasks from `start_index`
    (shuffle does not change it)."""
    if not memory_mode(config.agent_memory).run_draws:
        return None
    tasks = data.split(config.task_split)
    order = [(trial, index) for trial in range(config.num_trials)
             for index in range(config.start_index, config.task_end(len(tasks)))]
    return ReleaseRandomMemory(data, tasks, order, config.memory_length, config.seed)


def _select(mode: MemoryMode, request: MemoryRequest) -> list[Behaviour]:
    """The mode's choice, cut to the request's token budget when it has one."""
    return [] if request.length <= 0 else within_budget(request, mode.select(request))


def retrieve_memory(data: BenchmarkData, task: Task, mode: str, length: int, *,
                    protocol: Protocol | None = None, random_draw: list[Behaviour] | None = None,
                    seed: int = 0, task_type: str | None = None, tokens: int | None = None) -> list[Behaviour]:
    """Up to `length` of the user's behaviours before the task, in the mode's order, within
    `tokens` (a token budget) when given.

    `random` uses `random_draw` (the release's draw for this task run) when given, else a
    draw seeded by `seed` and the task. `taskspe` with task type `recommend` puts the
    chosen behaviours in time order, oldest first.
    """
    from PersonalWAB.protocol import load_protocol

    row = memory_mode(mode)
    return _select(row, MemoryRequest(data, task, length, protocol or load_protocol(), random_draw=random_draw,
                                      seed=seed, task_type=task_type, tokens=tokens))


def memory_text(protocol: Protocol, data: BenchmarkData, task: Task, mode: str, length: int, *,
                react: bool = False, random_draw: list[Behaviour] | None = None, seed: int = 0,
                preferences: dict[str, list[str]] | None = None, tool_name: str | None = None,
                tokens: int | None = None) -> str | None:
    """The memory appended to an agent's system prompt, or None when nothing is appended.

    Function-calling agents render every mode; the ReAct agent only the modes whose row
    says so (others add nothing), with its own headers. A mode that needs the chosen
    function (`taskspe`) needs `tool_name`; `interecagent` the user's `preferences`
    (like / dislike / expect). `tokens`: the memory's token budget (`within_budget`).
    """
    row = memory_mode(mode)
    if react and not row.react:
        return ""
    task_type = TASK_TYPE_OF_FUNCTION.get(tool_name or "")
    if row.chosen_function and task_type is None:
        raise ValueError(f"{mode} memory needs the chosen function, one of {TASK_FUNCTIONS}; got {tool_name!r}")
    request = MemoryRequest(data, task, length, protocol, react=react, random_draw=random_draw, seed=seed,
                            preferences=preferences, tool_name=tool_name, task_type=task_type, tokens=tokens)
    return row.render(request, _select(row, request))


def system_prompt(protocol: Protocol, mode: str, max_steps: int) -> str:
    """The function-calling agents' system prompt before memory: the mode's own (RecMind,
    InteRecAgent and task-specific memory have theirs), single- or multi-turn by the track."""
    row = memory_mode(mode)
    return fill_steps(row.text(protocol, row.system[0] if max_steps == -1 else row.system[1]), max_steps)


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
