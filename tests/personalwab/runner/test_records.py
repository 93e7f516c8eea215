"""What a run writes (`PersonalWAB.runner.records`): the result file's name, when the settings
name none, is unique per run, and an agent that calls no model has its actions as its steps."""

from __future__ import annotations

import json
from datetime import datetime

from PersonalWAB.metrics import compute_statistics
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from PersonalWAB.types import Action, Episode


def quiet(_: str) -> None:
    pass


def test_default_names_are_unique_per_run(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    class SameMinute(datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 1, 2, 3, 4)

    monkeypatch.setattr("PersonalWAB.runner.records.datetime", SameMinute)
    paths = [run(RunConfig(data_dir=str(tiny_data_dir), log_dir=str(tmp_path), seed=seed, end_index=3), log=quiet)[1]
             for seed in (1, 2, 3)]
    assert len(set(paths)) == 3 and paths[0].name.endswith("_01020304.json")
    assert [paths[0].with_name(paths[0].stem + suffix + ".json") for suffix in ("-2", "-3")] == paths[1:]
    assert [load_result_file(p)[0]["run_args"]["seed"] for p in paths] == [1, 2, 3]


class ScriptedSearch:
    """An agent of one's own that calls no model: one search, then stop."""

    def __init__(self, data, config):
        self.data = data

    def solve(self, env, task_index: int) -> Episode:
        observation, _ = env.reset(task_index)
        episode = Episode(traj=[{"role": "system", "content": "scripted"}, {"role": "user", "content": observation}])
        for action in (Action("search_product_by_query", {"query": "headphones"}), Action("stop")):
            episode.record_action(action)
            observation, _, done, _ = env.step(action)
            episode.record_tool_call(action, observation)
            if done:
                break
        return episode


def test_custom_agent_without_a_model_has_its_actions_as_steps(tiny_data_dir, tmp_path, capsys):
    out = tmp_path / "custom.json"
    strategy = f"{__name__}:ScriptedSearch"
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(out), "--end_index", "2",
                 "--agent_strategy", strategy]) == 0
    capsys.readouterr()
    header, *records = json.loads(out.read_text())
    assert all(r["info"]["usage"]["completion_tokens"] == [] for r in records)
    assert [r["info"]["steps"] for r in records] == [len(r["info"]["actions"]) for r in records]
    assert header["results"]["overall"]["avg_interaction_times"] == compute_statistics(records)["overall"][
        "avg_interaction_times"] > 0
