"""A finished run's metrics and settings sent to an experiment tracker (`--log_to`), for
researchers who keep their sweeps in TensorBoard, Weights & Biases or MLflow.

The trackers are optional: none is a dependency, each is imported only when asked for, and
a missing one is named before the run starts (`missing_package`). What is logged is the
header alone (the result file stays the record of truth): every per-type statistic, the
spread across trials, the costs, and the settings as parameters, under the run's
`--run_name` and `--tag`s.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

from PersonalWAB.schema_types import Header

PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}  # --log_to -> pip package
PROJECT = "PersonalWAB"  # the W&B project and MLflow experiment a run is logged under
MAX_PARAM = 250  # characters kept of a setting's value (MLflow refuses long parameter values)


def missing_package(tracker: str) -> str | None:
    """Why `--log_to tracker` cannot work (its package is not installed), else None."""
    package = PACKAGES[tracker]
    if package in sys.modules or importlib.util.find_spec(package) is not None:
        return None
    return f"--log_to {tracker}: the {package} package is not installed; pip install {package}, or drop --log_to"


def run_metrics(header: Header) -> dict[str, float]:
    """The header's numbers by slash-separated name: `overall/avg_res_acc`, `cost/agent`,
    `trials/overall/solved_pass^2`, ..."""
    metrics = {f"{group}/{key}": float(value) for group, stats in header["results"].items()
               for key, value in stats.items()}
    metrics["cost/agent"] = float(header["total cost"])
    metrics["cost/user"] = float(header["total user cost"])
    trials = header.get("trials") or {}
    for group, entry in (trials.get("results") or {}).items():
        for key, value in entry.items():
            if isinstance(value, dict) and "mean" in value:
                metrics[f"trials/{group}/{key}_std"] = float(value["std"])
            elif isinstance(value, dict):
                metrics.update({f"trials/{group}/{key.split('_')[0]}_{j}": float(v) for j, v in value.items()})
            else:
                metrics[f"trials/{group}/{key}"] = float(value)
    return metrics


def run_params(header: Header) -> dict[str, str]:
    """The run's settings as text (nested values as JSON), clipped to `MAX_PARAM` characters."""
    params = {}
    for key, value in header["run_args"].items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        params[key] = text[:MAX_PARAM]
    return params


def run_tags(header: Header) -> dict[str, str]:
    """The run's `--tag KEY=VALUE` labels."""
    return dict(tag.partition("=")[::2] for tag in header["run_args"].get("tag") or [])


def log_run(tracker: str, header: Header, result_file: Path) -> str:
    """Send the run to `tracker`; the line that says where it went."""
    name = header["run_args"].get("run_name") or result_file.stem
    metrics, params, tags = run_metrics(header), run_params(header), run_tags(header)
    if tracker == "tensorboard":
        log_dir = result_file.with_name(f"{result_file.stem}.tensorboard")
        writer = importlib.import_module("torch.utils.tensorboard").SummaryWriter(log_dir=str(log_dir))
        for key, value in metrics.items():
            writer.add_scalar(key, value, 0)
        writer.add_text("settings", "\n\n".join(f"{k}: {v}" for k, v in params.items()), 0)
        writer.close()
        return f"logged to TensorBoard: {log_dir} (tensorboard --logdir {log_dir})"
    if tracker == "wandb":
        wandb = importlib.import_module("wandb")
        run = wandb.init(project=PROJECT, name=name, config=params, tags=[f"{k}={v}" for k, v in tags.items()])
        run.log(metrics)
        run.finish()
        return f"logged to Weights & Biases: project {PROJECT}, run {name}"
    mlflow = importlib.import_module("mlflow")
    mlflow.set_experiment(PROJECT)
    with mlflow.start_run(run_name=name, tags=tags):
        mlflow.log_params(params)
        mlflow.log_metrics({key.replace("^", "_pow_"): value for key, value in metrics.items()})
    return f"logged to MLflow: experiment {PROJECT}, run {name}"


def log_outcome(tracker: str | None, header: Header, result_file: Path) -> str | None:
    """`log_run` when a tracker was asked for; a tracker's own failure is reported, not raised
    (the result file is written already)."""
    if tracker is None:
        return None
    try:
        return log_run(tracker, header, result_file)
    except Exception as exc:  # the tracker's client (login, server, disk): the run itself is done
        return f"warning: --log_to {tracker} failed ({type(exc).__name__}: {exc}); the result file is complete"
