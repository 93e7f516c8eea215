"""A run's budget in USD (`--max_usd` of `run.py` and `pwab reproduce`): what the records a run
keeps already paid counts against it, so the command printed at a stop, run again, does not
spend the budget a second time."""

from __future__ import annotations

import argparse
import math

from PersonalWAB.metrics import record_paid_usd
from PersonalWAB.schema_types import Record


def usd_budget(text: str) -> float:
    """A `--max_usd` value: a finite amount above 0 (the parser's usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount of USD, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite amount of USD above 0, got {text!r}")
    return value


def paid_usd(records: list[Record]) -> float:
    """What the model calls of `records` were paid (the response cache's answers not counted)."""
    return sum(map(record_paid_usd, records))
