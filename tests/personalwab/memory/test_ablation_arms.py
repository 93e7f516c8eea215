"""The memory ablation's arms and budget: another user's history of the same length, the oracle's
behaviours closest to the target, a token budget every arm is cut to, and `pwab ablate` end to end."""

from __future__ import annotations

import numpy as np

from PersonalWAB.memory import memory_tokens, retrieve_memory
from PersonalWAB.memory.embeddings import shared_behaviour_embeddings
from PersonalWAB.memory.modes.oracle import target_vector
from PersonalWAB.memory.base import MemoryRequest
from PersonalWAB.protocol import load_protocol
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.labels import protocol_departures


def test_other_user_holds_as_many_of_another_users_earlier_behaviours(tiny_data):
    protocol = load_protocol()
    for task in tiny_data.split("test"):
        own = retrieve_memory(tiny_data, task, "last", 5, protocol=protocol)
        other = retrieve_memory(tiny_data, task, "other_user", 5, protocol=protocol, seed=1)
        assert len(other) == len(own)
        assert all(b["review"]["timestamp"] < task["timestamp"] for b in other)
        mine = {id(b) for b in tiny_data.histories[task["user_id"]]}
        assert not any(id(b) in mine for b in other)
        assert other == retrieve_memory(tiny_data, task, "other_user", 5, protocol=protocol, seed=1)


def test_oracle_ranks_the_users_past_by_closeness_to_the_target(tiny_puma_data):
    protocol = load_protocol()
    embeddings = shared_behaviour_embeddings(tiny_puma_data, protocol)
    task = next(t for t in tiny_puma_data.split("test")
                if len(tiny_puma_data.behaviours_before(t["user_id"], t["timestamp"])) >= 3)
    past = tiny_puma_data.behaviours_before(task["user_id"], task["timestamp"])
    query = target_vector(MemoryRequest(tiny_puma_data, task, 3, protocol), embeddings)
    history = tiny_puma_data.histories[task["user_id"]]
    own = next(i for i, b in enumerate(history) if b["review"]["timestamp"] == task["timestamp"]
               and b["product_info"]["parent_asin"] == task["target"]["product_info"]["parent_asin"])
    assert np.array_equal(query, embeddings.behaviours(task["user_id"])[own])
    scores = embeddings.behaviours(task["user_id"], len(past)) @ query
    expected = [past[i] for i in np.argsort(-scores, kind="stable")[:3]]
    assert retrieve_memory(tiny_puma_data, task, "oracle", 3, protocol=protocol) == expected


def test_every_arm_is_cut_to_the_token_budget(tiny_data):
    protocol = load_protocol()
    task = max(tiny_data.split("test"),
               key=lambda t: len(tiny_data.behaviours_before(t["user_id"], t["timestamp"])))
    full = retrieve_memory(tiny_data, task, "last", 50, protocol=protocol)
    assert len(full) >= 2
    budget = memory_tokens(protocol, full[:2])
    for arm in ("last", "random", "other_user"):
        cut = retrieve_memory(tiny_data, task, arm, 50, protocol=protocol, tokens=budget)
        assert memory_tokens(protocol, cut) <= budget
        assert cut == retrieve_memory(tiny_data, task, arm, 50, protocol=protocol)[:len(cut)]
    assert retrieve_memory(tiny_data, task, "last", 50, protocol=protocol, tokens=budget) == full[:2]


def test_the_controls_and_the_budget_are_departures(tiny_data_dir):
    config = RunConfig(data_dir=str(tiny_data_dir), agent_memory="other_user", memory_tokens=800)
    departures = protocol_departures(config)
    assert any(line.startswith("agent_memory other_user: the project's memory mode") for line in departures)
    assert any(line.startswith("memory_tokens 800") for line in departures)


def test_ablate_runs_every_arm_and_writes_one_table_verdicts_and_a_plot(tiny_puma_data, tmp_path, capsys):
    from PersonalWAB.ablate import main

    out = tmp_path / "ablation"
    args = ["--data_dir", str(tiny_puma_data.data_dir), "--search_backend", "bm25s", "--arms",
            "none,last,other_user,oracle", "--memory_tokens", "600", "--end_index", "6", "--out", str(out),
            "--quiet", "1"]
    assert main(args) == 0
    table = (out / "ablation.md").read_text()
    assert (out / "ablation.png").read_bytes().startswith(b"\x89PNG")
    assert all(f"| {arm} |" in table for arm in ("none", "last", "other_user", "oracle"))
    assert "other_user vs last, recommend" in table and "oracle vs none, overall" in table
    assert (out / "cache").is_dir()
    capsys.readouterr()
    assert main(args) == 0  # run again: every arm reused, nothing run twice
    assert capsys.readouterr().err.count("finished earlier, reused") == 4
