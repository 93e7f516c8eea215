"""A run's name and tags reach its header and the leaderboard's names; --verbose shows each
action; Avg Steps counts actions for an agent that calls no model; pass^k counts solved trials;
trials at temperature 0 are warned; --log_to reaches a tracker (a fake one, no network)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from PersonalWAB.leaderboard.summarize import method_name
from PersonalWAB.metrics import compute_statistics, trial_statistics
from PersonalWAB.runner.checks import setting_warnings
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.trackers import PACKAGES, log_run, missing_package
from PersonalWAB.types import Action, Episode


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


def test_name_tags_and_verbose_actions(tiny_data_dir, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(out), "--end_index", "3", "--run_name", "baseline-a",
                 "--tag", "lr=1e-4", "--tag", "sweep=a", "--verbose", "1"]) == 0
    captured = capsys.readouterr()
    header = json.loads(out.read_text())[0]
    assert header["run_args"]["run_name"] == "baseline-a" and header["run_args"]["tag"] == ["lr=1e-4", "sweep=a"]
    assert method_name(header["run_args"], out) == "baseline-a: heuristic, memory last (offline) [lr=1e-4, sweep=a]"
    console = captured.out + captured.err
    assert "task 0 (" in console and "  -> " in console and "  <- tool: " in console


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


def _records(scores: list[list[float]]) -> list[dict]:
    """One search task per row, one trial per score (the right function each time)."""
    return [{"task_id": task, "trial": trial, "action_acc": [1.0], "res_acc": [score],
             "info": {"task": {"type": "search"}, "usage": {"completion_tokens": [1]}}}
            for task, row in enumerate(scores) for trial, score in enumerate(row)]


def test_pass_k_counts_solved_trials_not_the_right_function():
    records = _records([[0.9, 0.8], [0.9, 0.1], [0.0, 0.0]])
    trials = trial_statistics(records, 2, solved_threshold=0.5)
    overall = trials["results"]["overall"]
    assert overall["function_pass^k"]["pass^2"] == 1.0  # the right function every time: says nothing
    assert overall["solved_pass^k"] == {"pass^1": pytest.approx(0.5), "pass^2": pytest.approx(1 / 3)}
    assert trials["solved_threshold"] == 0.5
    assert "solved_pass^k" not in trial_statistics(records, 2)["results"]["overall"]  # files without a threshold


def test_trials_at_temperature_zero_are_warned():
    (warning,) = setting_warnings(RunConfig(model="gpt-4o-mini", num_trials=2))
    assert warning.startswith("--num_trials 2 at --temperature 0: greedy sampling")
    assert setting_warnings(RunConfig(model="gpt-4o-mini", num_trials=2, temperature=1.0)) == []
    assert setting_warnings(RunConfig(model="gpt-4o-mini")) == []


HEADER = {"run_args": {"run_name": "a", "tag": ["lr=1e-4"], "model": "m", "protocol": {"texts": "project"}},
          "total cost": 0.5, "total user cost": 0.0,
          "results": {"overall": {"total_count": 3, "avg_action_acc": 1.0, "avg_res_acc": 0.4,
                                  "avg_interaction_times": 1.0}}}


def test_log_to_a_missing_tracker_stops_the_run_before_it_starts(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(PACKAGES, "wandb", "no_such_tracker_package")  # as if wandb were not installed
    assert main(["--out", str(tmp_path / "run.json"), "--log_to", "wandb"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --log_to wandb: the no_such_tracker_package package is not "
                                               "installed; pip install no_such_tracker_package, or drop --log_to")
    assert not (tmp_path / "run.json").exists()


def test_log_to_tensorboard_writes_beside_the_result_file(monkeypatch, tmp_path):
    written: dict[str, object] = {"scalars": {}}

    class SummaryWriter:
        def __init__(self, log_dir):
            written["log_dir"] = log_dir

        def add_scalar(self, key, value, step):
            written["scalars"][key] = value  # type: ignore[index]

        def add_text(self, key, text, step):
            written["text"] = text

        def close(self):
            written["closed"] = True

    tensorboard = types.ModuleType("torch.utils.tensorboard")
    tensorboard.SummaryWriter = SummaryWriter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", tensorboard)
    monkeypatch.setitem(sys.modules, "tensorboard", types.ModuleType("tensorboard"))
    assert missing_package("tensorboard") is None
    events = tmp_path / "run.tensorboard"
    assert log_run("tensorboard", HEADER, tmp_path / "run.json") == (f"logged to TensorBoard: {events} "
                                                                      f"(tensorboard --logdir {events})")
    assert written["log_dir"] == str(events)
    assert written["scalars"]["overall/avg_action_acc"] == 1.0 and written["closed"]  # type: ignore[index]
    assert "run_name: a" in str(written["text"])


def test_log_to_wandb_and_mlflow_send_metrics_and_settings(monkeypatch, tmp_path):
    sent: dict[str, object] = {}

    class Run:
        def log(self, metrics):
            sent["wandb_metrics"] = metrics

        def finish(self):
            sent["wandb_finished"] = True

    wandb = types.ModuleType("wandb")
    wandb.init = lambda **kwargs: sent.update(wandb_init=kwargs) or Run()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    assert missing_package("wandb") is None
    assert log_run("wandb", HEADER, tmp_path / "run.json") == "logged to Weights & Biases: project PersonalWAB, run a"
    assert sent["wandb_init"]["config"]["protocol"] == '{"texts": "project"}'
    assert sent["wandb_init"]["tags"] == ["lr=1e-4"] and sent["wandb_finished"]
    assert sent["wandb_metrics"]["overall/avg_res_acc"] == 0.4 and sent["wandb_metrics"]["cost/agent"] == 0.5

    mlflow = types.ModuleType("mlflow")

    class ActiveRun:
        def __enter__(self):
            return self

        def __exit__(self, *_):
            sent["mlflow_ended"] = True

    mlflow.set_experiment = lambda name: sent.update(experiment=name)  # type: ignore[attr-defined]
    mlflow.start_run = lambda **kwargs: sent.update(mlflow_run=kwargs) or ActiveRun()  # type: ignore[attr-defined]
    mlflow.log_params = lambda params: sent.update(params=params)  # type: ignore[attr-defined]
    mlflow.log_metrics = lambda metrics: sent.update(metrics=metrics)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mlflow", mlflow)
    assert log_run("mlflow", HEADER, tmp_path / "run.json") == "logged to MLflow: experiment PersonalWAB, run a"
    assert sent["mlflow_run"] == {"run_name": "a", "tags": {"lr": "1e-4"}} and sent["mlflow_ended"]
    assert sent["params"]["model"] == "m" and sent["metrics"]["overall/total_count"] == 3.0
