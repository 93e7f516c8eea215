"""Training on several processes and nodes, run for real on the CPU (gloo): SFT and DPO on the
tiny model reach the same per-step losses and adapter on 1 process, on 2 processes
(CPU_PROCESSES=2) and on 2 "nodes" (two launchers on 127.0.0.1) at the same global batch; only
rank 0 writes; an interrupted 2-process run resumes from its last checkpoint to the same adapter.
The tolerances are docs/scaling.md's."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

from PersonalWAB.protocol import project_protocol
from tests.conftest import HANG_GUARD_S, REPO_ROOT

LOSS_TOLERANCE = 1e-5  # absolute, per logged step (losses near 7 for SFT, 0.69 for DPO)
WEIGHT_TOLERANCE = 1e-6  # absolute, every adapter tensor
RUN_TIMEOUT_S = HANG_GUARD_S
# 8 examples, 4 per optimizer step, 2 epochs: 4 steps, a checkpoint after each epoch (steps 2 and 4)
COMMON = ["--num_train_epochs", "2", "--global_batch_size", "4", "--logging_steps", "1", "--save_strategy", "epoch"]
STEP_ARGS = {"sft": ["--train_on", "function", "--max_length", "144"],
             "dpo": ["--max_length", "160", "--max_prompt_length", "128"]}
LAUNCH_VARIABLES = ("CPU_PROCESSES", "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "GPUS", "DEEPSPEED", "FSDP",
                    "PRECISION", "RECIPE", "PUMA_PYTHON", "WORLD_SIZE", "RANK", "LOCAL_RANK")


@pytest.fixture(scope="module")
def inputs(tiny_data, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each step's data and model flags: 8 function examples, and a pair made of each."""
    from PUMA.data import function_examples

    folder = tmp_path_factory.mktemp("distributed_inputs")
    examples = function_examples(project_protocol(), tiny_data.split("train")[:8], "train")
    (folder / "function_train.json").write_text(json.dumps(examples))
    pairs = [{"prompt": e["prompt"], "chosen": e["label"], "rejected": "add_product_review"} for e in examples]
    (folder / "dpo.json").write_text(json.dumps(pairs))
    model = ["--model_path", str(tiny_model_dir)]
    return {"sft": [*model, "--function_data", str(folder / "function_train.json")],
            "dpo": [*model, "--data_file", str(folder / "dpo.json")]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(step: str, args: list[str], **env: str) -> subprocess.Popen[str]:
    """`python -m PUMA.launch STEP -- ARGS` on the CPU, its processes meeting on 127.0.0.1."""
    clean = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    return subprocess.Popen([sys.executable, "-m", "PUMA.launch", step, "--", *args], cwd=REPO_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**clean, "CUDA_VISIBLE_DEVICES": "", "MASTER_ADDR": "127.0.0.1",
                                 "GLOO_SOCKET_IFNAME": "lo", **env})


def finish(*launches: subprocess.Popen[str]) -> None:
    """Wait for every launch (each ends by itself, or is killed after RUN_TIMEOUT_S); all must succeed."""
    outputs = []
    for launch in launches:
        try:
            output, _ = launch.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            launch.kill()
            output, _ = launch.communicate()
        outputs.append((launch.returncode, output))
    assert all(rc == 0 for rc, _ in outputs), "\n".join(output[-3000:] for _, output in outputs)


def train(step: str, args: list[str], **env: str) -> None:
    finish(start(step, args, **env))


def outcome(out: Path) -> tuple[dict[str, Any], list[float], dict[str, Any]]:
    """(the step's record, its per-step losses, its adapter's tensors)."""
    from safetensors.torch import load_file

    record = json.loads((out / "puma_run.json").read_text())
    return record, [entry["loss"] for entry in record["loss_history"]], load_file(out / "adapter_model.safetensors")


def assert_same_training(expected: Path, got: Path) -> dict[str, Any]:
    """`got` took the steps of `expected`: losses and adapter within the tolerances; returns its record."""
    _, losses, weights = outcome(expected)
    record, other_losses, other_weights = outcome(got)
    assert len(other_losses) == len(losses) == 4
    assert max(abs(a - b) for a, b in zip(losses, other_losses)) <= LOSS_TOLERANCE
    assert other_weights.keys() == weights.keys()
    assert max(float((weights[k] - other_weights[k]).abs().max()) for k in weights) <= WEIGHT_TOLERANCE
    return record


def batch_facts(record: dict[str, Any]) -> tuple[int, int, int, int, int]:
    return (record["world_size"], record["nodes"], record["per_device_train_batch_size"],
            record["gradient_accumulation_steps"], record["global_batch_size"])


@pytest.fixture(scope="module")
def trained(inputs, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, int], Path]:
    """`trained(step, processes)`: the output folder of the step run once on 1 process (plain Python,
    as on one CPU) or on CPU_PROCESSES processes, shared by the tests below."""
    runs: dict[tuple[str, int], Path] = {}

    def run(step: str, processes: int) -> Path:
        if (step, processes) not in runs:
            out = tmp_path_factory.mktemp(f"{step}_{processes}")
            env = dict(CPU_PROCESSES=str(processes), MASTER_PORT=str(free_port())) if processes > 1 else {}
            train(step, [*inputs[step], *STEP_ARGS[step], *COMMON, "--out", str(out)], **env)
            runs[step, processes] = out
        return runs[step, processes]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("step", ["sft", "dpo"])
def test_two_processes_train_as_one(step: str, trained):
    assert batch_facts(outcome(trained(step, 1))[0]) == (1, 1, 1, 4, 4)
    record = assert_same_training(trained(step, 1), trained(step, 2))
    assert batch_facts(record) == (2, 1, 1, 2, 4) and record["resumed_from"] is None
    assert [p.name for p in trained(step, 2).glob("**/puma_run.json")] == ["puma_run.json"]


@pytest.mark.slow
@pytest.mark.parametrize("step", ["sft", "dpo"])
def test_two_nodes_on_localhost_train_as_one_and_only_rank_0_writes(step: str, inputs, trained, tmp_path: Path):
    port = str(free_port())
    args = [*inputs[step], *STEP_ARGS[step], *COMMON]
    finish(*(start(step, [*args, "--out", str(tmp_path / f"node{rank}")], CPU_PROCESSES="1", NNODES="2",
                   NODE_RANK=str(rank), MASTER_PORT=port) for rank in (0, 1)))
    assert batch_facts(assert_same_training(trained(step, 1), tmp_path / "node0")) == (2, 2, 1, 2, 4)
    written = {path.relative_to(tmp_path / "node1").as_posix() for path in (tmp_path / "node1").rglob("*")
               if path.is_file()}
    assert written == {"checkpoint-2/rng_state_1.pth", "checkpoint-4/rng_state_1.pth"}  # its random state alone


@pytest.mark.slow
def test_an_interrupted_two_process_run_resumes_from_its_last_checkpoint(inputs, trained, tmp_path: Path):
    """Stopped after the first epoch's checkpoint and started again with --resume 1, it takes steps
    3 and 4 and ends with the uninterrupted run's adapter."""
    out = tmp_path / "two"
    shutil.copytree(trained("sft", 2), out)
    shutil.rmtree(out / "checkpoint-4")
    for name in ("adapter_model.safetensors", "puma_run.json"):
        (out / name).unlink()
    train("sft", [*inputs["sft"], *STEP_ARGS["sft"], *COMMON, "--out", str(out), "--resume", "1"],
          CPU_PROCESSES="2", MASTER_PORT=str(free_port()))
    record, losses, weights = outcome(out)
    _, full_losses, full_weights = outcome(trained("sft", 1))
    assert record["resumed_from"] == str(out / "checkpoint-2") and len(losses) == 2
    assert max(abs(a - b) for a, b in zip(losses, full_losses[2:])) <= LOSS_TOLERANCE
    assert max(float((full_weights[k] - weights[k]).abs().max()) for k in full_weights) <= WEIGHT_TOLERANCE
