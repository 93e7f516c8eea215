"""`taskspe`: PUMA's task-specific memory. The `relevant` top `length`, keeping only the
fields the chosen function needs; for a recommendation, in time order, oldest first. A
user without history gets no memory at all."""

from __future__ import annotations

from PersonalWAB.memory.base import Behaviours, MemoryRequest, most_relevant


def select(request: MemoryRequest) -> Behaviours:
    chosen = most_relevant(request.data, request.task, request.past, request.length, request.protocol)
    if request.task_type == "recommend":
        return sorted(chosen, key=lambda b: b["review"]["timestamp"])
    return chosen


def render(request: MemoryRequest, behaviours: Behaviours) -> str | None:
    if not request.past:
        return None
    task_type = request.task_type
    assert task_type is not None and request.tool_name is not None  # memory_text checks the chosen function
    entries = [request.protocol.taskspe_entry(b, task_type) for b in behaviours]
    return request.protocol.taskspe_agent_memory(task_type, request.tool_name, entries)
