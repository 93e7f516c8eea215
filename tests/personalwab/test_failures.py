"""Failure labels a rule decides from a record's calls, and the ranking of a recommendation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from PersonalWAB.failures import failure_label, recommendation_ranking

PREFIX = "Tool output: "
FUNCTIONS = {"search": "search_product_by_query", "recommend": "get_recommendations_by_history",
             "review": "add_product_review"}


def record(kind: str, calls: list[tuple[str, dict[str, Any], str]], scores: list[tuple[float, float]],
           **info: Any) -> dict[str, Any]:
    traj: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    for i, (name, arguments, observation) in enumerate(calls):
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        traj += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": observation}]
    return {"task_id": 0, "trial": 0, "action_acc": [s[0] for s in scores], "res_acc": [s[1] for s in scores],
            "traj": traj, "info": {"task": {"user_id": "U", "task": "t", "type": kind, "timestamp": 1, "target": "TGT"},
                                   "actions": [{"name": n, "arguments": a} for n, a, _ in calls], "usage": {},
                                   **info}}


HIT = str(["0. thing TGT", "1. other"])
MISS = str(["0. thing B1", "1. other B2"])


@pytest.mark.parametrize(("rec", "label"), [
    (record("search", [(FUNCTIONS["search"], {"query": "q"}, HIT)], [(1, 1.0)]), "none"),
    (record("search", [], []), "no_call"),
    (record("search", [], [], format_error="bad JSON"), "malformed_call"),
    (record("search", [(FUNCTIONS["review"], {"review": "r"}, str({"review": "r"}))], [(0, 0)]), "wrong_function"),
    (record("recommend", [(FUNCTIONS["recommend"], {"product_sequence": ["X"]}, "Error: KeyError 'X'")], [(1, 0)]),
     "malformed_call"),
    (record("search", [(FUNCTIONS["search"], {"query": " "}, MISS)], [(1, 0)]), "empty_query"),
    (record("recommend", [(FUNCTIONS["recommend"], {"product_sequence": ["NOPE"]}, MISS)], [(1, 0)]),
     "product_not_in_catalogue"),
    (record("recommend", [(FUNCTIONS["recommend"], {"product_sequence": ["B1"]}, MISS)], [(1, 0)]),
     "target_not_recommended"),
    (record("search", [(FUNCTIONS["search"], {"query": "q"}, MISS)], [(1, 0)]), "target_not_in_results"),
    (record("review", [(FUNCTIONS["review"], {"review": "meh"}, str({"review": "meh"}))], [(1, 0)]),
     "review_off_topic"),
    (record("search", [(FUNCTIONS["search"], {"query": "q"}, HIT)], [(1, 0.5)], error="APIError"), "errored"),
])
def test_each_label_by_its_rule(rec, label):
    assert failure_label(rec, PREFIX, catalogue={"B1", "B2", "TGT"}) == label


def test_the_catalogue_rule_is_left_out_without_the_catalogue():
    rec = record("recommend", [(FUNCTIONS["recommend"], {"product_sequence": ["NOPE"]}, MISS)], [(1, 0)])
    assert failure_label(rec, PREFIX) == "target_not_recommended"


def test_a_record_whose_calls_cannot_be_read_is_unreadable():
    rec = record("search", [(FUNCTIONS["search"], {"query": "q"}, MISS)], [(1, 0)])
    rec["traj"] = rec["traj"][:2]
    assert failure_label(rec, PREFIX) == "unreadable"


def test_react_observations_are_read_after_their_prefix():
    rec = record("search", [(FUNCTIONS["search"], {"query": "q"}, MISS)], [(1, 0)])
    rec["traj"] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                   {"role": "assistant", "content": "Action: search"}, {"role": "user", "content": PREFIX + MISS}]
    assert failure_label(rec, PREFIX) == "target_not_in_results"


def test_recommendation_ranking_reads_the_best_attempt():
    calls = [(FUNCTIONS["recommend"], {"product_sequence": ["B1"]}, MISS),
             (FUNCTIONS["recommend"], {"product_sequence": ["B2"]}, str(["0. a B1", "1. TGT"]))]
    ranking = recommendation_ranking(record("recommend", calls, [(1, 0), (1, 0.5)]), PREFIX)
    assert ranking == pytest.approx({"ndcg@10": 1 / 1.584962500721156, "rr": 0.5})
    assert recommendation_ranking(record("search", [], []), PREFIX) is None
