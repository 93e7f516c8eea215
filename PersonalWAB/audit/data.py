"""What a data folder lets leak: between its splits, and into what an agent (or the simulated user)
may read for a task.

Counts, each with a few examples:
- `shared_users`: users with tasks in both splits (a method trained on train tasks has seen them);
- `shared_targets`: target products of both splits, and the test tasks whose target is a train target;
- `near_duplicate_instructions`: test instructions with a train instruction of shingle Jaccard
  similarity >= 0.8 (`audit.names`);
- `target_in_memory`: tasks whose target is among the user's behaviours before the task (what every
  memory mode may show: the answer is in the memory);
- `later_history`: tasks whose user's history holds behaviours at or after the task's time besides the
  task's own purchase, and `target_in_later_history`: those holding the target (a memory not cut at
  the task's time would show it; the project's memory modes cut there);
- `profile_names_target`: tasks whose user profile names the target (its ASIN or title; the profile
  is what the LLM user simulator reads);
- `instruction_names_target`: tasks whose instruction names the target.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from PersonalWAB.audit.names import NEAR_DUPLICATE, names_product, near_duplicates
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.schema_types import Task

EXAMPLES = 5
SPLITS = ("train", "test")


@dataclass
class Finding:
    """One kind of leak: how many, of how many, and examples that show it."""

    kind: str
    count: int
    of: int
    what: str
    examples: list[str] = field(default_factory=list)

    def line(self) -> str:
        shown = f"; e.g. {'; '.join(self.examples[:EXAMPLES])}" if self.count and self.examples else ""
        return f"{self.kind}: {self.count} of {self.of} {self.what}{shown}"

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "of": self.of, "what": self.what, "examples": self.examples[:EXAMPLES]}


def _tasks(data: BenchmarkData) -> Iterable[tuple[str, int, Task]]:
    for split in SPLITS:
        for index, task in enumerate(data.tasks.get(split, [])):
            yield split, index, task


def _asin(task: Task) -> str:
    return task["target"]["product_info"]["parent_asin"]


def _profile_text(profile: Any) -> str:
    return "\n".join(f"{key}: {value}" for key, value in profile.items()) if isinstance(profile, dict) else ""


def data_audit(data: BenchmarkData) -> list[Finding]:
    """Every count of the data audit, in the order of the module's list."""
    train, test = data.tasks.get("train", []), data.tasks.get("test", [])
    train_users, test_users = {t["user_id"] for t in train}, {t["user_id"] for t in test}
    shared_users = sorted(train_users & test_users)
    train_targets, test_targets = {_asin(t) for t in train}, {_asin(t) for t in test}
    shared_targets = sorted(train_targets & test_targets)
    on_train_target = [i for i, t in enumerate(test) if _asin(t) in train_targets]
    duplicates = list(near_duplicates([t["task"] for t in test], [t["task"] for t in train]))
    findings = [
        Finding("shared_users", len(shared_users), len(test_users), "test users also have train tasks",
                shared_users),
        Finding("shared_targets", len(shared_targets), len(test_targets),
                f"test target products are also train targets ({len(on_train_target)} of {len(test)} test tasks "
                "aim at one)", shared_targets),
        Finding("near_duplicate_instructions", len(duplicates), len(test),
                f"test instructions have a train instruction of shingle Jaccard >= {NEAR_DUPLICATE}",
                [f"test {i} ~ train {j} ({similarity:.2f})" for i, j, similarity in duplicates]),
    ]
    in_memory, later, target_later, profile, instruction = [], [], [], [], []
    total = 0
    for split, index, task in _tasks(data):
        total += 1
        where = f"{split} {index}"
        asin = _asin(task)
        history = data.histories.get(task["user_id"], [])
        before = data.behaviours_before(task["user_id"], task["timestamp"])
        if any(b["product_info"]["parent_asin"] == asin for b in before):
            in_memory.append(where)
        own = next((b for b in history[len(before):] if b["product_info"]["parent_asin"] == asin
                    and b["review"]["timestamp"] == task["timestamp"]), None)
        after = [b for b in history[len(before):] if b is not own]
        if after:
            later.append(where)
        if any(b["product_info"]["parent_asin"] == asin for b in after):
            target_later.append(where)
        title = str(task["target"]["product_info"].get("title") or "")
        if names_product(_profile_text(data.profiles.get(task["user_id"])), asin, title):
            profile.append(where)
        if names_product(task["task"], asin, title):
            instruction.append(where)
    findings += [
        Finding("target_in_memory", len(in_memory), total, "tasks have their target among the user's behaviours "
                "before the task (every memory mode may show it)", in_memory),
        Finding("later_history", len(later), total, "tasks' users have behaviours at or after the task's time "
                "besides its own purchase (the project's memory modes cut them off)", later),
        Finding("target_in_later_history", len(target_later), total, "tasks have their target among those later "
                "behaviours", target_later),
        Finding("profile_names_target", len(profile), total, "tasks' user profiles name the target (its ASIN or "
                "title; the LLM user simulator reads the profile)", profile),
        Finding("instruction_names_target", len(instruction), total, "instructions name their target (its ASIN "
                "or title)", instruction),
    ]
    return findings
