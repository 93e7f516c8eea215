"""What a web function is and what it is called with.

Web functions are plain functions called as the release calls them,
`function(data=<ToolContext>, **arguments)`, so arguments the function does not
take, or a missing one, fail with Python's own message (which the agent reads as
`Error: ...`). They return the release's values: a list of result texts for search
and recommendation, a dict for a review, a string otherwise; the environment shows
the agent its row's `render` of that value (`str()`, as the release).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from PersonalWAB.protocol import own_texts_note
from PersonalWAB.protocol.spec import TEXTS
from PersonalWAB.schema_types import Product

if TYPE_CHECKING:
    from PersonalWAB.engines.shared import Engines
    from PersonalWAB.protocol import Protocol

BASE, RECMIND = "base", "recmind"  # the tool lists: every agent's; RecMind's, which adds the details lookup


@dataclass(frozen=True)
class ToolContext:
    """What a web function may use: the engines (and through them the data) and the texts."""

    engines: Engines
    protocol: Protocol

    @property
    def products(self) -> dict[str, Product]:
        return self.engines.data.products


@dataclass(frozen=True)
class WebFunction:
    """A function the agent can call: its row in the table (`functions/__init__.py`).

    - `label`: its short name in analyses (the transition matrices of `leaderboard.analysis`);
    - `task_type`: the task type it answers. Such a call is an attempt, scored (Function
      Acc 1 on tasks of that type) and, in single-turn, ends the episode; None: not scored;
    - `toolsets`: the tool lists that offer it (`BASE`: every agent's, `RECMIND`: RecMind's);
    - `render`: the observation the agent reads of its value (the release's `str()`);
    - `batch`: many calls at once, `batch(context, [arguments, ...])` -> values (None where a
      call fails), for PUMA's scoring; without one, calls are made one by one;
    - `own_texts`: texts the release does not have, such as the schema `tool.<name>` of a
      new function; the schema is otherwise the protocol's. A function not in the release,
      or with texts of its own, makes every run custom.
    """

    name: str
    run: Callable[..., Any]
    label: str
    task_type: str | None = None
    toolsets: tuple[str, ...] = (BASE, RECMIND)
    render: Callable[[Any], str] = str
    batch: Callable[[ToolContext, list[dict[str, Any]]], list[Any]] | None = None
    in_release: bool = True
    own_texts: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = sorted(set(self.own_texts) & set(TEXTS))
        if clash:
            raise ValueError(f"web function {self.name}: own texts {clash} are the release's; give them new names")
        if self.schema_key not in TEXTS and self.schema_key not in self.own_texts:
            raise ValueError(f"web function {self.name}: no schema; give own_texts[{self.schema_key!r}]")

    @property
    def schema_key(self) -> str:
        return f"tool.{self.name}"

    @property
    def scored(self) -> bool:
        return self.task_type is not None

    def schema(self, protocol: Protocol) -> dict[str, Any]:
        """The tool schema offered to the agent: its own when it brings one, else the protocol's."""
        if self.schema_key in self.own_texts:
            return json.loads(json.dumps(self.own_texts[self.schema_key]))  # a copy callers may change
        return protocol.tool(self.name)

    @property
    def departure(self) -> str | None:
        """What every run records while this function is in the table (None: nothing)."""
        parts = ([] if self.in_release else ["the project's web function, not in the release"]) + \
            ([own_texts_note(self.own_texts)] if self.own_texts else [])
        return f"web function {self.name}: {'; '.join(parts)}" if parts else None

    def __call__(self, context: ToolContext, arguments: dict[str, Any]) -> Any:
        return self.run(data=context, **arguments)
