"""Agent strategies selectable with `run.py --agent_strategy`."""

from __future__ import annotations

from typing import Any

AGENT_STRATEGIES = ("heuristic",)


def build_agent(strategy: str, data: Any, config: Any) -> Any:
    """Create the agent for `strategy`; modules are imported only when chosen."""
    if strategy == "heuristic":
        from PersonalWAB.agents.heuristic import HeuristicAgent

        return HeuristicAgent(data, config.agent_memory, config.memory_length, config.seed)
    raise ValueError(f"unknown agent strategy {strategy!r}; expected one of {AGENT_STRATEGIES}")
