"""A finished run sent to an experiment tracker (`--log_to`, `PersonalWAB.runner.trackers`): a
missing tracker stops the run before it starts, and TensorBoard, Weights & Biases and MLflow (fakes,
no network) get the run's metrics and settings."""

from __future__ import annotations

import sys
import types

from PersonalWAB.runner.cli import main
from PersonalWAB.runner.trackers import PACKAGES, log_run, missing_package


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
