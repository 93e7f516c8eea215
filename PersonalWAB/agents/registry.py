"""The one table of agent strategies (`run.py --agent_strategy`) and the one way to build them.

Every strategy, built-in or one's own, is made by a factory called as `factory(data, config)`
(the run's `BenchmarkData` and `RunConfig`), the signature a custom agent's class already has
(`PersonalWAB.agents.custom`, docs/agents.md). Built-in entries name their factory, settings
check and departures as `module:function` strings, imported only when chosen, so this package
never imports the packages that provide them (PUMA's agent lives in `PUMA.agent`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any


@dataclass(frozen=True)
class Strategy:
    """A built-in strategy: how to build it and what a run with it must know."""

    name: str
    factory: str  # "module:function" called as function(data, config) -> Agent
    needs_model: bool  # True: --model is required; False: it calls no API model, so --model is refused
    in_release: bool  # the release has this agent (else every run with it is custom)
    check: str | None = None  # "module:function"(config) -> an error message or None, before any file
    departures: str | None = None  # "module:function"(config) -> lines recorded in the run's protocol
    settings: str | None = None  # "module:function"(config) -> what the agent runs with (run_args.agent_settings)
    options: str | None = None  # "module:Class": the strategy's own settings dataclass (its run.py flags)
    inputs: str | None = None  # "module:Class": the part of `options` naming the agent's input files
    memory: str | None = None  # the memory it reads, its --agent_memory default (result names say it)

    def load(self, what: str) -> Callable[..., Any]:
        """The function `what` (factory, check, departures or settings) names."""
        module, _, name = getattr(self, what).partition(":")
        return getattr(importlib.import_module(module), name)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("heuristic", "PersonalWAB.agents.heuristic:build", needs_model=False, in_release=False),
    Strategy("function_calling", "PersonalWAB.agents.function_calling:build_function_calling",
             needs_model=True, in_release=True),
    Strategy("react", "PersonalWAB.agents.react:build_react", needs_model=True, in_release=True),
    Strategy("react_reflect", "PersonalWAB.agents.react:build_react_reflect", needs_model=True, in_release=True),
    Strategy("recmind", "PersonalWAB.agents.function_calling:build_recmind", needs_model=True, in_release=True),
    Strategy("puma", "PUMA.agent:build", needs_model=False, in_release=True,
             check="PUMA.agent:check_settings", departures="PUMA.agent:departures",
             settings="PUMA.agent:recorded_settings", options="PUMA.agent_settings:PumaAgentSettings",
             inputs="PUMA.agent_settings:PumaInputs", memory="taskspe"),
)}


def option_classes(part: str = "options") -> dict[str, Any]:
    """strategy -> its own settings dataclass (`part="inputs"`: the input files among them), for
    every built-in strategy that has one; their flags are accepted whichever strategy runs."""
    return {s.name: s.load(part) for s in STRATEGIES.values() if getattr(s, part)}


def builtin(strategy: str) -> Strategy | None:
    """The built-in entry `strategy` names; None for an agent of one's own."""
    return STRATEGIES.get(strategy)


def agent_settings(config: Any) -> dict[str, Any] | None:
    """What a built-in strategy records of its effective settings (None: nothing to add)."""
    entry = builtin(config.agent_strategy)
    return entry.load("settings")(config) if entry is not None and entry.settings else None


def build_agent(data: Any, config: Any) -> Any:
    """The agent `config.agent_strategy` names, built as `factory(data, config)`."""
    entry = builtin(config.agent_strategy)
    if entry is None:
        from PersonalWAB.agents.custom import resolve_agent_class

        return resolve_agent_class(config.agent_strategy, STRATEGIES)(data, config)
    if entry.needs_model and not config.model:
        raise ValueError(f"--agent_strategy {entry.name} needs --model (any litellm model string)")
    return entry.load("factory")(data, config)
