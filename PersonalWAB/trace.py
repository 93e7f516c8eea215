"""A run's trace (`run.py --trace_file FILE`): every environment step and every generation of a
local model the agent makes, one JSON object a line, in the order they happen. For following an
agent step by step, and for tools that compare two implementations of the same run (the release
parity harness reads it).

The file is only appended to (a resumed run adds its part after a `run` line of its own), so a
trace never replaces anything. Lines are written whole and flushed, from any thread; with several
tasks in flight they interleave, and each names its task (`task_index`).

    {"event": "run", "started": "...", "split": "test"}
    {"event": "step", "task_index": 3, "action": {"name": ..., "arguments": ...}, "observation": "...",
     "res": [1.0, 0.5], "done": true}
    {"event": "generation", "task_index": 3, "purpose": "parameter", "prompt": "...", "output": "..."}
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

_lock = threading.Lock()
_file: TextIO | None = None


def active() -> bool:
    """Whether a trace is being written (callers skip building what they would record)."""
    return _file is not None


def record(event: str, **fields: Any) -> None:
    """Append one event to the trace, when one is open."""
    if _file is None:
        return
    line = json.dumps({"event": event, **fields}, ensure_ascii=False, default=str)
    with _lock:
        if _file is not None:
            _file.write(line + "\n")
            _file.flush()


def read(path: str | Path, event: str | None = None) -> list[dict[str, Any]]:
    """The trace's events in order (those of kind `event` only, when given)."""
    with open(path, encoding="utf-8") as handle:
        events = [json.loads(line) for line in handle if line.strip()]
    return [e for e in events if event is None or e.get("event") == event]


@contextlib.contextmanager
def tracing(path: str | Path | None, **run: Any) -> Iterator[None]:
    """Write the trace to `path` (appended) while the block runs; nothing without a path.
    `run`: what the opening `run` line says of the run."""
    global _file
    if path is None:
        yield
        return
    with open(path, "a", encoding="utf-8") as handle:
        with _lock:
            _file = handle
        record("run", started=datetime.now(UTC).isoformat(timespec="seconds"), **run)
        try:
            yield
        finally:
            with _lock:
                _file = None
