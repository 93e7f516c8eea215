"""What a web function is, what it returns, and how its arguments are checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from PersonalWAB.errors import ToolArgumentError

if TYPE_CHECKING:
    from PersonalWAB.envs.pwab.engines import Engines


@dataclass
class FunctionOutput:
    """The text the agent sees plus what scoring needs (ranked ASINs or the review)."""

    text: str
    asins: list[str] | None = None
    review: str | None = None
    products: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class WebFunction:
    """A function the agent can call, with its OpenAI function-calling schema."""

    schema: dict[str, Any]
    run: Callable[..., FunctionOutput]
    ends_task: bool

    @property
    def name(self) -> str:
        return self.schema["function"]["name"]

    def __call__(self, engines: "Engines", arguments: Any) -> FunctionOutput:
        return self.run(engines, **check_arguments(self.schema, arguments))


_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "array": (list,), "object": (dict,)}
_TYPE_WORDS = {"string": "a string", "array": "a list (JSON array)", "object": "a JSON object"}


def check_arguments(schema: dict[str, Any], arguments: Any) -> dict[str, Any]:
    """Reject arguments that do not fit the schema, with a message a model can act on."""
    name = schema["function"]["name"]
    parameters = schema["function"]["parameters"]
    if not isinstance(arguments, dict):
        raise ToolArgumentError(f"{name} takes a JSON object of arguments, got {type(arguments).__name__}")
    properties = parameters.get("properties", {})
    unknown = [key for key in arguments if key not in properties]
    if unknown:
        raise ToolArgumentError(f"{name} got unexpected argument(s) {unknown}; it takes {sorted(properties)}")
    for key in parameters.get("required", []):
        if key not in arguments:
            raise ToolArgumentError(f"{name} is missing required argument {key!r}")
    for key, value in arguments.items():
        spec = properties[key]
        expected = _JSON_TYPES[spec["type"]]
        if not isinstance(value, expected):
            raise ToolArgumentError(
                f"{name}: argument {key!r} must be {_TYPE_WORDS[spec['type']]}, got {type(value).__name__}")
        item_type = spec.get("items", {}).get("type")
        if item_type and not all(isinstance(item, _JSON_TYPES[item_type]) for item in value):
            raise ToolArgumentError(f"{name}: every item of {key!r} must be {_TYPE_WORDS[item_type]}")
    return arguments


def function_schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }
