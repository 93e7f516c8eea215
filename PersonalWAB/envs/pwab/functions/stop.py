"""stop: the agent says it has finished the task."""

from __future__ import annotations

from PersonalWAB.envs.pwab.functions.base import FunctionOutput, function_schema

SCHEMA = function_schema(
    "stop",
    "Call when the task is finished and no further action is needed.",
    {},
    [],
)


def stop(engines) -> FunctionOutput:
    return FunctionOutput(text="Task finished.")
