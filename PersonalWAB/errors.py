"""Exceptions that carry a message meant for the person running the benchmark."""


class DataError(ValueError):
    """A data, artefact or result file is missing or malformed; the message names it."""


class ToolArgumentError(ValueError):
    """A web function was called with arguments it cannot use."""


class FatalError(RuntimeError):
    """No task of the run can succeed (missing or rejected credentials, a request the model
    service refuses as malformed): the run stops at once instead of failing every task."""


class EngineError(RuntimeError):
    """The benchmark's own machinery failed during a task (a search index, the SASRec
    checkpoint or item map, the JVM): the task is recorded as errored and re-run on resume,
    never scored as the agent's failure."""
