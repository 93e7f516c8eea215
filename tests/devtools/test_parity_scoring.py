"""The parity harness's step-4/5 candidates and the agent-paths item, without the release: the
crafted candidates hit, the declared ASIN order is told apart from a real difference, and the
scripted agent outputs take every branch of the release's agent."""

from __future__ import annotations

import pytest

from devtools.parity.agent import (PATHS, READINGS, AgentPath, assign, compare_agent, release_reading,
                                   scripted_outputs)
from devtools.parity.scoring import (ORDER_NOTE, Target, above_zero_counts, classify_score, compare_scores,
                                     crafted_candidates, fixed_candidates, informative_pairs, order_effect,
                                     release_order_scores, release_orders, reordered_candidates, scores_above_zero)
from tests.conftest import HANG_GUARD_S

ITEMS = [f"B{n:09d}" for n in range(40)]


class LastItemRecommender:
    """A stand-in recommender: the top k are the k items nearest the sequence's last known one
    (so a list hits its target when an item near it comes last)."""

    def recommend_batch(self, sequences: list[list[str]], k: int = 10) -> list[list[str]]:
        def nearest(last: int) -> list[str]:
            return [ITEMS[i] for i in sorted(range(len(ITEMS)), key=lambda i: (abs(i - last), i))[:k]]

        known = [[ITEMS.index(asin) for asin in s if asin in ITEMS] for s in sequences]
        return [nearest(ids[-1]) if ids else [] for ids in known]


def reversed_order(texts: list[str]) -> dict[str, list[str]]:
    """A stand-in for the release's set order: the items reversed."""
    return {text: list(dict.fromkeys(part.strip() for part in text.split(",")))[::-1] for text in texts}


def target(kind: str, **fields: str) -> Target:
    return Target(instruction=f"find a {kind}", kind=kind, label=fields.get("label", "a label"),
                  title=fields.get("title", "Blue Ceramic Coffee Mug Large"), asin=ITEMS[20],
                  review=fields.get("review", "Lovely mug, keeps coffee hot."), history=tuple(ITEMS[:5]))


def test_crafted_candidates_hold_the_titles_the_target_and_lists_that_hit() -> None:
    search = fixed_candidates(target("search"))
    assert "Blue Ceramic Coffee Mug Large" in search and "Blue Ceramic" in search and "stop" in search
    assert "Lovely mug, keeps coffee hot." in fixed_candidates(target("review"))
    recommender = LastItemRecommender()
    candidates = crafted_candidates([target("recommend"), target("search")], recommender, reversed_order)
    lists = candidates["find a recommend"]
    assert ITEMS[20] in lists and any(", " in c and ITEMS[20] in c for c in lists)
    tops = recommender.recommend_batch([[p.strip() for p in c.split(",")] for c in lists])
    assert any(ITEMS[20] in top for top in tops)  # some hit in the written (project's) order
    release = recommender.recommend_batch(list(reversed_order(lists).values()))
    assert any(ITEMS[20] in top for top in release)  # and some in the release's


def test_release_orders_follow_the_recorded_calls_and_rewrite_only_reordered_candidates() -> None:
    tasks = [{"task": "r", "type": "recommend"}, {"task": "s", "type": "search"}, {"task": "r", "type": "recommend"}]
    candidates = {"r": ["A, B", "C"], "s": ["q"]}
    calls = [["B", "A"], ["C"], ["B", "A"], ["C"]]
    orders = release_orders(tasks, candidates, calls)
    assert orders == {"r": {"A, B": ["B", "A"], "C": ["C"]}}
    assert reordered_candidates(orders) == {"r": {"A, B": "B, A"}}
    with pytest.raises(ValueError, match="3 recommender calls where its candidates ask for 4"):
        release_orders(tasks, candidates, calls[:3])


def test_order_deviation_is_told_apart_from_a_difference() -> None:
    assert classify_score("recommend", 0.5, 0.5) == "identical"
    assert classify_score("recommend", 0.9, 0.0, reordered=0.9) == "order"
    assert classify_score("recommend", 0.9, 0.0, reordered=0.3) == "differs"
    assert classify_score("search", 0.9, 0.0, reordered=0.9) == "differs"  # only recommend lists are reordered
    assert classify_score("review", 0.5, 0.5 + 1e-7) == "identical"
    types = {"r": "recommend", "s": "search"}
    theirs = {"r": {"A, B": 0.9, "C": 0.0}, "s": {"q": 0.8}}
    ours = {"r": {"A, B": 0.0, "C": 0.0}, "s": {"q": 0.8}}
    tally = compare_scores(theirs, ours, types, {"r": {"A, B": 0.9}})
    assert tally.all_identical and tally.noted == {ORDER_NOTE: 1}
    assert not compare_scores(theirs, ours, types, {"r": {"A, B": 0.4}}).all_identical
    assert not compare_scores(theirs, ours, types).all_identical
    effect = order_effect(theirs, ours, types, {"r": {"A, B": 0.9}}, {"r": {"A, B": "B, A"}})
    assert effect == {"recommend_candidates": 2, "read_in_another_order": 1, "score_changed": 1, "mean_change": 0.9,
                      "max_change": 0.9}
    assert release_order_scores(ours, theirs, types, {"r": {"A, B": 0.9}})["r"]["A, B"] == 0.9
    above = scores_above_zero(theirs, ours, types, {"r": {"A, B": 0.9}})
    assert above.by_type == {"search": [1, 1]}  # no recommend candidate above 0 on both: nothing to compare there
    assert above.all_identical and above.not_comparable == "no recommend candidate scored above 0 on both sides"
    assert above_zero_counts(theirs, ours, types)["recommend"] == {"candidates": 2, "release": 1, "project": 0,
                                                                    "both": 0}
    pairs = [{"instruction": "r", "chosen": "A, B", "rejected": "C"}, {"instruction": "s", "chosen": "q",
                                                                       "rejected": "q"}]
    assert informative_pairs(pairs, theirs) == 1


def test_agent_paths_take_every_branch_of_the_release_agent() -> None:
    assert {p.reading for p in PATHS} == set(READINGS)
    assert release_reading("search_product_by_query", " Say: hi") == "search"  # not a message to the release
    assert release_reading("buy_product", "stopping") == "stop"
    assert release_reading("Search_product_by_query", "a query") == "crash"
    kinds = ["search", "recommend", "review"]
    tasks = [{"task": f"task {i % 40}", "type": kinds[i % 3]} for i in range(60)]
    chosen = assign(tasks)
    assert sorted(p.name for p in dict.fromkeys(p for _, p in chosen)) == sorted(p.name for p in PATHS)
    assert chosen[-1][1].reading == "crash" and [i for i, _ in chosen] == list(range(len(chosen)))
    for index, path in chosen:
        assert path.kind in (None, tasks[index]["type"])
    targets = {t["task"]: target(t["type"]) for t in tasks}
    lists = {t["task"]: {"both": [f"{ITEMS[3]}, {ITEMS[20]}"]} for t in tasks}
    functions, params = scripted_outputs(chosen, tasks, targets, lists)
    forms = set(params.values())
    assert {"", "stop", "Stop", " stop", f"['{ITEMS[3]}', '{ITEMS[20]}']", f"{ITEMS[3]},{ITEMS[20]}"} <= forms
    assert ["buy_product"] in functions.values() and [""] in functions.values()
    with pytest.raises(ValueError, match="the release reads it as 'say'"):
        scripted_outputs([(0, AgentPath("mislabelled", "search", lambda t, _: "Say: hi", "search"))], tasks, targets,
                         lists)


def step(index: int, name: str, arguments: dict, observation: str = "obs", res: tuple = (1.0, 0.5)) -> dict:
    return {"task_index": index, "action": {"name": name, "arguments": arguments}, "observation": observation,
            "res": list(res), "done": True}


def test_agent_comparison_proves_the_order_and_checks_the_crash() -> None:
    rec = "get_recommendations_by_history"
    tasks = [{"task": "a", "type": "recommend"}, {"task": "b", "type": "search"}]
    recommend = next(p for p in PATHS if p.reading == "recommend")
    crash = next(p for p in PATHS if p.reading == "crash")
    chosen = [(0, recommend), (1, crash)]
    release = {"steps": [step(0, rec, {"product_sequence": ["B", "A"]}, "top: T")],
               "scores": {0: [[1.0], [0.5]]}, "crashed": True}
    project = {"steps": [step(0, rec, {"product_sequence": ["A", "B"]}, "top: X", (1.0, 0.0)),
                         step(1, "respond", {"content": crash.function}, "no user", (0.0, 0.0))],
               "scores": {0: [[1.0], [0.0]], 1: [[0.0], [0.0]]}}
    proof = {"steps": [step(0, rec, {"product_sequence": ["B", "A"]}, "top: T")], "scores": {}}
    tally = compare_agent(chosen, tasks, release, project, proof)
    assert tally.all_identical and tally.compared == 2 and len(tally.noted) == 2
    assert not compare_agent(chosen, tasks, release, project).all_identical  # no proof: a difference
    wrong = {"steps": [step(0, rec, {"product_sequence": ["B", "A"]}, "top: Y")], "scores": {}}
    assert not compare_agent(chosen, tasks, release, project, wrong).all_identical
    assert not compare_agent(chosen, tasks, dict(release, crashed=False), project, proof).all_identical


def test_the_project_reads_every_scripted_output_as_the_release_does() -> None:
    """Under the release recipe, each scripted output becomes the action the release's agent
    sends (the branch `release_reading` names; unstripped text, empty ASIN items kept)."""
    from PersonalWAB.protocol import project_protocol
    from PUMA.prompting import OutputRules, parse_parameters

    rules = OutputRules.of(project_protocol(), "strict")
    kinds = ["search", "recommend", "review"]
    tasks = [{"task": f"task {i}", "type": kinds[i % 3]} for i in range(60)]
    chosen = [(i, p) for i, p in assign(tasks) if p.reading != "crash"]
    targets = {t["task"]: target(t["type"]) for t in tasks}
    functions, params = scripted_outputs(chosen, tasks, targets, {t["task"]: {"both": ["A, B"]} for t in tasks})
    names = {"say": "respond", "stop": "stop", "search": "search_product_by_query",
             "recommend": "get_recommendations_by_history", "review": "add_product_review"}
    for index, path in chosen:
        instruction = tasks[index]["task"]
        function = functions[instruction][0]
        action = parse_parameters(function if function in names.values() else "add_product_review",
                                  params[instruction], rules, parsing="strict")
        assert action.name == names[path.reading], path.name
    assert parse_parameters("search_product_by_query", " red kettle\n", rules, parsing="strict").arguments == {
        "query": " red kettle\n"}
    assert parse_parameters("get_recommendations_by_history", "B1, , B2,", rules, parsing="strict").arguments == {
        "product_sequence": ["B1", "", "B2"]}


def test_the_worker_gives_the_release_set_order_without_the_release(tmp_path) -> None:
    """`set_orders` needs no release libraries: the same order in every process with the
    harness's hash seed, the candidate's items each once."""
    import json
    import os
    import subprocess
    import sys

    from devtools.parity.mirror import WORKER

    texts = [" B1, B2 ,B3,B1", "B9"]
    (tmp_path / "in.json").write_text(json.dumps(texts))
    outs = []
    for run in range(2):
        out = tmp_path / f"out{run}.json"
        request = tmp_path / f"request{run}.json"
        request.write_text(json.dumps({"command": "set_orders", "mirror": str(tmp_path),
                                       "texts": str(tmp_path / "in.json"), "out": str(out)}))
        done = subprocess.run([sys.executable, str(WORKER), str(request)], capture_output=True, text=True,
                              timeout=HANG_GUARD_S, env={**os.environ, "PYTHONHASHSEED": "0"})
        assert done.returncode == 0, done.stderr
        outs.append(json.loads(out.read_text()))
    assert outs[0] == outs[1] and sorted(outs[0][texts[0]]) == ["B1", "B2", "B3"] and outs[0]["B9"] == ["B9"]
