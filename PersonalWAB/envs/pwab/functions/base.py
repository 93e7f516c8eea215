"""What a web function is and what it is called with.

Web functions are plain functions called as the release calls them,
`function(data=<ToolContext>, **arguments)`, so arguments the function does not
take, or a missing one, fail with Python's own message (which the agent reads as
`Error: ...`). They return the release's values: a list of result texts for search
and recommendation, a dict for a review, a string otherwise; the environment shows
the agent `str()` of that value.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PersonalWAB.schema_types import Product

if TYPE_CHECKING:
    from PersonalWAB.engines.shared import Engines
    from PersonalWAB.protocol import Protocol


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
    """A function the agent can call; `ends_task` marks the scored action functions."""

    name: str
    run: Callable[..., Any]
    ends_task: bool

    def __call__(self, context: ToolContext, arguments: dict[str, Any]) -> Any:
        return self.run(data=context, **arguments)
