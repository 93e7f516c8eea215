"""What every memory mode is built from: the user's past behaviours for one task
(`MemoryRequest`), the shared orderings (newest first, most relevant), and the row a mode
has in the table (`MemoryMode`, see `PersonalWAB.memory.modes`).

Only behaviours strictly before the task's timestamp are eligible (`MemoryRequest.past`),
so no target (or anything after it) can leak into the memory.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.protocol import Protocol, own_texts_note
from PersonalWAB.protocol.spec import TEXTS
from PersonalWAB.schema_types import Behaviour, Task

Behaviours = list[Behaviour]
# The function-calling system prompt of the tracks (single-turn, multi-turn); some modes have their own pair.
TRACK_SYSTEM = ("system.single_turn", "system.multi_turn")


def past_behaviours(data: BenchmarkData, task: Task) -> Behaviours:
    """The user's behaviours strictly before the task, oldest first."""
    return data.behaviours_before(task["user_id"], task["timestamp"])


def newest_first(behaviours: Behaviours) -> Behaviours:
    """Most recent first; equal timestamps keep their order (a stable sort, as the release's)."""
    return sorted(behaviours, key=lambda b: b["review"]["timestamp"], reverse=True)


_PRICING_STAND_IN = False  # set by `ranked_by_recency_for_pricing`


@contextmanager
def ranked_by_recency_for_pricing() -> Iterator[None]:
    """Within it, memory that ranks by MiniLM takes the newest behaviours instead: a cost
    estimate renders prompts with as many behaviour texts as the run's memory holds (what
    its price depends on) without encoding any."""
    global _PRICING_STAND_IN
    before, _PRICING_STAND_IN = _PRICING_STAND_IN, True
    try:
        yield
    finally:
        _PRICING_STAND_IN = before


def most_relevant(data: BenchmarkData, task: Task, past: Behaviours, length: int,
                  protocol: Protocol, template: str = "memory.behaviour") -> Behaviours:
    """The `length` behaviours of `past` (a prefix of the user's history) whose `template`
    text is closest to the instruction by MiniLM cosine, best first; equal scores keep the
    older behaviour first."""
    if not past:
        return []
    if _PRICING_STAND_IN:
        return newest_first(past)[:length]
    from PersonalWAB.memory.embeddings import shared_behaviour_embeddings

    scores = shared_behaviour_embeddings(data, protocol, template).scores(task["user_id"], task["task"], len(past))
    order = np.argsort(-scores, kind="stable")[:length]
    return [past[i] for i in order]


def most_similar_to(data: BenchmarkData, task: Task, past: Behaviours, length: int, protocol: Protocol,
                    query: Callable[[Any], np.ndarray]) -> Behaviours:
    """The `length` behaviours of `past` closest by MiniLM cosine to the vector `query(embeddings)`
    (the data's cached `BehaviourEmbeddings`), best first; equal scores keep the older first."""
    if not past:
        return []
    if _PRICING_STAND_IN:
        return newest_first(past)[:length]
    from PersonalWAB.memory.embeddings import shared_behaviour_embeddings

    embeddings = shared_behaviour_embeddings(data, protocol)
    scores = np.asarray(embeddings.behaviours(task["user_id"], len(past)) @ query(embeddings), dtype=np.float32)
    order = np.argsort(-scores, kind="stable")[:length]
    return [past[i] for i in order]


def within_budget(request: MemoryRequest, behaviours: Behaviours) -> Behaviours:
    """The longest prefix of `behaviours` whose memory blocks (`memory.behaviour`, numbered as the
    memory shows them) fit in `request.tokens` cl100k_base tokens (all of them without a budget)."""
    if request.tokens is None:
        return behaviours
    from PersonalWAB.tokens import count_tokens

    counts = count_tokens([request.protocol.behaviour_block(b, i) for i, b in enumerate(behaviours)])
    kept, used = [], 0
    for behaviour, count in zip(behaviours, counts):
        if used + count > request.tokens:
            break
        kept.append(behaviour)
        used += count
    return kept


def memory_tokens(protocol: Protocol, behaviours: Behaviours) -> int:
    """The cl100k_base tokens of the behaviours' memory blocks, as `within_budget` counts them."""
    from PersonalWAB.tokens import count_tokens

    return sum(count_tokens([protocol.behaviour_block(b, i) for i, b in enumerate(behaviours)]))


@dataclass(frozen=True)
class MemoryRequest:
    """One task's memory to select and render, with what the run supplies: the release's
    `random` draw for this task run, the user's InteRecAgent lists, the function PUMA's
    function file chose and its task type, whether the ReAct agent asks (its own headers), and
    the memory's token budget."""

    data: BenchmarkData
    task: Task
    length: int
    protocol: Protocol
    react: bool = False
    random_draw: Behaviours | None = None
    seed: int = 0
    preferences: dict[str, list[str]] | None = None
    tool_name: str | None = None
    task_type: str | None = None  # the chosen function's task type
    tokens: int | None = None  # the memory's token budget (`--memory_tokens`; None: none)

    @cached_property
    def past(self) -> Behaviours:
        return past_behaviours(self.data, self.task)


@dataclass(frozen=True)
class MemoryMode:
    """One `--agent_memory` mode: how it selects and renders behaviours, the texts it
    renders with, and what a run must have built or given before its first task.

    `select(request)` returns up to `request.length` behaviours in the mode's order;
    `render(request, behaviours)` the text appended to the system prompt (None: nothing).
    `own_texts` are the mode's texts the release does not have (keys outside
    `protocol.spec.TEXTS`); a run with a mode not in the release, or with own texts, is
    custom."""

    name: str
    select: Callable[[MemoryRequest], Behaviours]
    render: Callable[[MemoryRequest, Behaviours], str | None]
    texts: tuple[str, ...]  # the protocol texts it renders with
    system: tuple[str, str] = TRACK_SYSTEM  # the function-calling system prompt: single-turn, multi-turn key
    react: bool = False  # the ReAct agent renders it (in other modes it adds nothing there)
    embeddings: bool = False  # ranks by MiniLM: the behaviour embeddings are built before the tasks
    interec_store: bool = False  # reads --interec_memory_file's lists and updates them after each task
    chosen_function: bool = False  # needs the function PUMA's function file chose (else the cue words')
    run_draws: bool = False  # one generator per run, drawn in the run's task order (`--seed`)
    in_release: bool = True
    own_texts: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = sorted(set(self.own_texts) & set(TEXTS))
        if clash:
            raise ValueError(f"memory mode {self.name}: own texts {clash} are the release's; give them new names")

    def text(self, protocol: Protocol, key: str) -> Any:
        """One of the mode's texts: its own when it brings it, else the protocol's."""
        return self.own_texts[key] if key in self.own_texts else protocol.text(key)

    @property
    def departure(self) -> str | None:
        """What a run with this mode records as a departure from the release (None: nothing)."""
        parts = ([] if self.in_release else ["the project's memory mode, not in the release"]) + \
            ([own_texts_note(self.own_texts)] if self.own_texts else [])
        return f"agent_memory {self.name}: {'; '.join(parts)}" if parts else None

def numbered_memory(request: MemoryRequest, headers: tuple[str, str], behaviours: Behaviours) -> str:
    """The full behaviour blocks, numbered, under the mode's header (`headers`: the
    function-calling agents', the ReAct agent's)."""
    protocol = request.protocol
    return protocol.numbered_memory(headers[1] if request.react else headers[0],
                                    [protocol.behaviour_block(b, i) for i, b in enumerate(behaviours)])
