"""The paper's published numbers (`paper_results.json`, copied from Tables 3 and 4 with
their table and row), and which run each may be set beside: a figure measured with one
model says nothing about another, so a row is compared only when the run used the model
the paper names for it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

PAPER_FILE = Path(__file__).with_name("paper_results.json")
METRIC_KEYS = {"function": "f", "result": "r", "steps": "steps"}  # metric -> suffix of the file's keys


@dataclass(frozen=True)
class PaperRow:
    """One row of a paper table: where it comes from and its figures."""

    table: str  # "Table 3 (single-turn track)"
    name: str  # the paper's row name, e.g. "No Memory (gpt-4o)"
    model: str | None  # the model the paper names for the row; None when it names none
    figures: dict[str, float]

    @property
    def source(self) -> str:
        return f"{self.table}, row {self.name!r}"

    def figure(self, group: str, metric: str) -> float | None:
        """The published figure of a task type (or overall) and metric; None where the table has none."""
        return self.figures.get(f"{group}_{METRIC_KEYS[metric]}")


@cache
def _paper() -> dict[str, Any]:
    return json.loads(PAPER_FILE.read_text(encoding="utf-8"))


def paper_source() -> str:
    """The publication the figures come from."""
    return _paper()["source"]


def track_table(track: str) -> str:
    """The paper's table of a track, e.g. "Table 3 (single-turn track)"."""
    return _paper()["tracks"][track]["table"]


def track_note(track: str) -> str:
    """What the track's table compares with what."""
    return _paper()["tracks"][track]["note"]


def paper_row(track: str, row: str) -> PaperRow | None:
    """The paper's row for a reproduce row of a track (None: the table has no such row)."""
    entry = _paper()["tracks"][track]
    found = entry["rows"].get(row)
    if found is None:
        return None
    return PaperRow(entry["table"], found["paper_row"], found["model"], dict(found["figures"]))


def model_aliases(model: str) -> set[str]:
    """The litellm model strings that name the paper's model: bare and with the OpenAI prefix."""
    return {model, f"openai/{model}"}


def compared_row(track: str, row: str, model: str | None, is_puma: bool) -> PaperRow | None:
    """The paper row a run is set beside, or None: only when the paper names the run's model
    for that row (the fine-tuned PUMA row stands for whatever PUMA model the run was given)."""
    found = paper_row(track, row)
    if found is None or found.model is None:
        return None
    if is_puma or (model is not None and model in model_aliases(found.model)):
        return found
    return None
