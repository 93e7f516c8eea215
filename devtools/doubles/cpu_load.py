"""Competing CPU-bound processes, to measure and test the project on a busy machine."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def competing_processes(count: int) -> Iterator[None]:
    """Run a block while `count` processes spin on the CPU; they are killed when it ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
