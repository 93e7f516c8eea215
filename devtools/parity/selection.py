"""Which tasks the `puma` check compares on: with `--limit N`, N tasks of each type (search,
recommend, review) on each split, drawn with a seed, so every type is compared whatever order the
data lists its tasks in.

Scores only tell the two sides apart when they are above 0, and a recommend candidate can only
hit when the recommender can put its target in its top 10 at all: a train recommend task is taken
only when a list of the items the recommender ranks after its target, ending with the target,
brings the target into the top 10 (the kind of list step 4's candidates are made of,
devtools/parity/scoring.py). Search and review candidates hit by construction (the target's
title, the real review). The draw is recorded in the report with its seed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TYPES = ("search", "recommend", "review")
SPLITS = ("train", "test")
DEFAULT_SEED = 0


@dataclass
class Choice:
    """The tasks chosen per split (positions in the data's split, in order) and how they were drawn."""

    seed: int
    per_type: int | None
    positions: dict[str, list[int]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # "split/type" -> tasks passed over (no hit possible)
    short: dict[str, int] = field(default_factory=dict)  # "split/type" -> how many it has, when fewer than asked

    def facts(self) -> dict[str, Any]:
        return {"seed": self.seed, "per_type": self.per_type, "positions": self.positions,
                "passed_over (no recommend hit possible)": self.skipped, "fewer than asked": self.short}


def hittable(task: dict[str, Any], recommender: Any, neighbours: int = 29) -> bool:
    """Whether the recommender ranks the task's target in its top 10 after some list of the items
    it ranks after the target, the target last (in the item map at all, to begin with)."""
    asin = task["target"]["product_info"]["parent_asin"]
    near = [a for a in recommender.recommend_batch([[asin]], k=neighbours + 1)[0] if a != asin][:neighbours]
    lists = [[*near[:count][::-1], asin] for count in (neighbours, 8, 4)]
    return any(asin in top for top in recommender.recommend_batch(lists, k=10))


def choose(tasks: dict[str, list[dict[str, Any]]], per_type: int | None, seed: int, recommender: Any) -> Choice:
    """N tasks of each type per split (all with `per_type` None), drawn in a seeded order."""
    choice = Choice(seed, per_type)
    rng = random.Random(seed)
    for split in SPLITS:
        listed = tasks.get(split, [])
        if per_type is None:
            choice.positions[split] = list(range(len(listed)))
            continue
        picked: list[int] = []
        for kind in TYPES:
            pool = [i for i, task in enumerate(listed) if task["type"] == kind]
            rng.shuffle(pool)
            taken = 0
            for position in pool:
                if taken == per_type:
                    break
                if kind == "recommend" and split == "train" and not hittable(listed[position], recommender):
                    choice.skipped[f"{split}/{kind}"] = choice.skipped.get(f"{split}/{kind}", 0) + 1
                    continue
                picked.append(position)
                taken += 1
            if taken < per_type:
                choice.short[f"{split}/{kind}"] = taken
        choice.positions[split] = sorted(picked)
    return choice


def write_tasks(tasks: dict[str, list[dict[str, Any]]], choice: Choice, out: Path,
                splits: tuple[str, ...] = SPLITS) -> Path:
    """The chosen tasks as a task file (both sides read it; a split left out is empty)."""
    chosen = {split: [tasks[split][i] for i in choice.positions.get(split, [])] if split in splits else []
              for split in SPLITS}
    out.write_text(json.dumps(chosen), encoding="utf-8")
    return out


def choose_from_data(data_dir: Path, per_type: int | None, seed: int) -> tuple[dict[str, list[dict[str, Any]]], Choice]:
    """The data's tasks and the choice made on them with the data's own recommender."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.recommender.engine import SASRecRecommender

    tasks = json.loads((Path(data_dir) / "user_instructions.json").read_text(encoding="utf-8"))
    data = load_benchmark_data(data_dir)
    recommender = SASRecRecommender(data.artifacts.checkpoint, data.artifacts.item_map)
    return tasks, choose(tasks, per_type, seed, recommender)
