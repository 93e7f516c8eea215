"""Agents of one's own: `--agent_strategy package.module:ClassName`, or the name of a
`pwab.agents` entry point that an installed package declares.

Such a class implements `PersonalWAB.agents.base.Agent` (`solve(env, task_index) -> Episode`)
and is built by the runner as `ClassName(data, config)`: the run's one `BenchmarkData` and
its `RunConfig` (model, temperature, memory settings, seed, ...). Everything is checked when
the settings are, before any file is written, so a typo or a broken module stops the run with
one line naming it. See docs/agents.md.
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import EntryPoint, entry_points
from collections.abc import Iterable
from typing import Any

ENTRY_POINT_GROUP = "pwab.agents"
GUIDE = "see docs/agents.md"


class AgentLoadError(ValueError):
    """A custom agent that cannot be used; the message names it and what is wrong (run.py exits 2)."""


def installed_agents() -> dict[str, EntryPoint]:
    """The `pwab.agents` entry points of the installed packages, by name."""
    return {point.name: point for point in entry_points(group=ENTRY_POINT_GROUP)}


def _import_target(strategy: str, target: str) -> Any:
    """The object `module:attribute` names; any failure of the import is the user's module's."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise AgentLoadError(f"--agent_strategy {strategy}: {target!r} is not package.module:ClassName")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a missing module or one that fails while importing
        raise AgentLoadError(f"--agent_strategy {strategy}: cannot import {module_name} "
                             f"({type(exc).__name__}: {exc})") from None
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise AgentLoadError(f"--agent_strategy {strategy}: module {module_name} has no {attribute!r}")
        found = getattr(found, part)
    return found


def _entry_point_target(strategy: str, builtins: Iterable[str]) -> str:
    agents = installed_agents()
    point = agents.get(strategy)
    if point is None:
        installed = f"; installed entry points: {', '.join(sorted(agents))}" if agents else ""
        raise AgentLoadError(f"--agent_strategy {strategy}: not a built-in strategy ({', '.join(builtins)}), "
                             f"not package.module:ClassName, and no installed package declares it in the "
                             f"{ENTRY_POINT_GROUP!r} entry point group{installed}")
    return point.value


def resolve_agent_class(strategy: str, builtins: Iterable[str] = ()) -> type:
    """The class `strategy` names, checked to be usable as `cls(data, config).solve(env, task_index)`;
    `builtins` (the registry's names) are listed when `strategy` names nothing."""
    target = strategy if ":" in strategy else _entry_point_target(strategy, builtins)
    found = _import_target(strategy, target)
    name = target.partition(":")[2]
    if not inspect.isclass(found):
        raise AgentLoadError(f"--agent_strategy {strategy}: {name} is a {type(found).__name__}, not a class ({GUIDE})")
    solve = getattr(found, "solve", None)
    if not callable(solve):
        raise AgentLoadError(f"--agent_strategy {strategy}: class {name} has no solve(env, task_index) method; "
                             f"an agent implements PersonalWAB.agents.base.Agent ({GUIDE})")
    if inspect.isabstract(found):
        missing = ", ".join(sorted(getattr(found, "__abstractmethods__", ())))
        raise AgentLoadError(f"--agent_strategy {strategy}: class {name} leaves {missing} unimplemented ({GUIDE})")
    checks = (("solve(env, task_index)", solve, (None, None, 0)),  # self, env, task_index
              ("its constructor (data, config)", found, (None, None)))
    for what, function, arguments in checks:
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):  # a builtin without a signature: nothing to check
            continue
        try:
            signature.bind(*arguments)
        except TypeError as exc:
            raise AgentLoadError(f"--agent_strategy {strategy}: class {name}: {what} cannot be called that way "
                                 f"({exc}; {GUIDE})") from None
    return found
