"""The data audit counts each kind of leak on data made to contain it, and 0 on data made clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from PersonalWAB.audit.data import data_audit
from PersonalWAB.data.loader import BenchmarkData

KINDS = ("shared_users", "shared_targets", "near_duplicate_instructions", "target_in_memory", "later_history",
         "target_in_later_history", "profile_names_target", "instruction_names_target")
PROFILE = {"Gender": "F", "Age": "30", "Occupation": "x", "Price Sensitivity": "Low", "Shopping Interest": "tea",
           "Brand Preference": "none", "Diversity Preference": "Low", "Interaction Complexity": "Low",
           "Tone and Style": "plain", "Item Reference": "general", "Focus Aspect": "quality"}


def product(asin: str, title: str) -> dict[str, Any]:
    return {"parent_asin": asin, "title": title, "main_category": "c", "categories": [], "store": "s",
            "average_rating": 4.0, "rating_number": 1, "features": [], "description": [], "price": 1.0,
            "details": {}}


def behaviour(asin: str, title: str, time: int, split: str = "history") -> dict[str, Any]:
    return {"product_info": product(asin, title), "split": split,
            "review": {"rating": 5.0, "title": "t", "text": "fine", "parent_asin": asin, "timestamp": time}}


def task(user: str, text: str, asin: str, title: str, time: int) -> dict[str, Any]:
    return {"user_id": user, "task": text, "type": "search", "timestamp": time,
            "target": {"product_info": product(asin, title), "review": behaviour(asin, title, time)["review"]}}


def data(histories: dict[str, list[dict[str, Any]]], train: list[Any], test: list[Any],
         profiles: dict[str, Any] | None = None) -> BenchmarkData:
    profiles = profiles or {user: dict(PROFILE) for user in histories}
    return BenchmarkData(Path("."), {}, histories, profiles, {"train": train, "test": test},
                         _history_times={u: [b["review"]["timestamp"] for b in h] for u, h in histories.items()})


def clean() -> BenchmarkData:
    """Two users, one per split, distinct targets and instructions, nothing after a task's time."""
    histories = {"U1": [behaviour("A1", "red kettle", 1), behaviour("T1", "green teapot large", 5, "train")],
                 "U2": [behaviour("A2", "blue mug", 1), behaviour("T2", "yellow lamp bright", 5, "test")]}
    return data(histories, [task("U1", "find me something to brew leaves with", "T1", "green teapot large", 5)],
                [task("U2", "I want a light for reading at night", "T2", "yellow lamp bright", 5)])


def counts(benchmark: BenchmarkData) -> dict[str, int]:
    return {finding.kind: finding.count for finding in data_audit(benchmark)}


def test_clean_data_has_no_leak():
    assert counts(clean()) == dict.fromkeys(KINDS, 0)


def leaky(kind: str) -> BenchmarkData:
    benchmark = clean()
    train, test = benchmark.tasks["train"], benchmark.tasks["test"]
    histories = benchmark.histories
    if kind == "shared_users":
        test[0]["user_id"] = "U1"
        test[0]["timestamp"] = 6
    elif kind == "shared_targets":
        test[0]["target"] = train[0]["target"]
        histories["U2"][1] = behaviour("T1", "green teapot large", 5, "test")
    elif kind == "near_duplicate_instructions":
        test[0]["task"] = train[0]["task"] + "!"
    elif kind == "target_in_memory":
        histories["U2"].insert(0, behaviour("T2", "yellow lamp bright", 0))
    elif kind in ("later_history", "target_in_later_history"):
        histories["U2"].append(behaviour("T2" if kind == "target_in_later_history" else "Z9", "x", 9))
    elif kind == "profile_names_target":
        benchmark.profiles["U2"]["Item Reference"] = "mentions the yellow lamp bright by name"
    elif kind == "instruction_names_target":
        test[0]["task"] = "Find the T2 again please"
    benchmark._history_times = {u: [b["review"]["timestamp"] for b in h] for u, h in histories.items()}
    return benchmark


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_leak_is_counted_on_data_made_to_contain_it(kind):
    found = counts(leaky(kind))
    assert found[kind] >= 1
    expected_others = {"target_in_later_history": {"later_history"}}.get(kind, set())
    assert {k for k, v in found.items() if v and k != kind} == expected_others


def test_the_cli_prints_every_count(tmp_path, capsys):
    from PersonalWAB.audit.cli import main
    from PersonalWAB.data.synthetic import generate_synthetic

    generate_synthetic(tmp_path / "d", scale="tiny", seed=0)
    assert main(["--data_dir", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert all(f"{kind}:" in out for kind in KINDS)
    assert main([]) == 2
