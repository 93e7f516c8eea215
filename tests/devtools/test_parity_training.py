"""The training items of the parity harness's `puma` check (devtools/parity/training.py): the
comparators see a changed loss, learning rate, weight or LoRA setting, and the project side's
observation trains and records a tiny model. Neither the release nor its libraries are needed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from devtools.parity import training
from devtools.parity.compare import Tally
from devtools.parity.mirror import ParityError


def observation(loss: float = 2.5) -> dict:
    """A two-step training observation, as the probe writes one."""
    steps = [{"step": n, "loss": loss + n, "grad_norm": 0.5 / n, "lr": 3e-4 * n / 2,
              "micro_batches": [{"loss": loss + n, "input": f"batch{n}a"}, {"loss": loss + n, "input": f"batch{n}b"}]}
             for n in (1, 2)]
    return {"initial_adapter": {"loaded": 2, "not_in_file": [], "not_loaded": []},
            "settings": {"learning_rate": 3e-4, "lr_scheduler_type": "linear", "num_train_epochs": 10.0,
                         "lora_dropout": 0.0, "lora_dropout_in_layers": [0.0], "gradient_accumulation_steps": 2},
            "steps": steps, "weights": {"a.lora_A.default.weight": tensor([0.1, 0.2], [1, 2]),
                                        "norm.weight": tensor([1.0, 1.0], [2])}}


def tensor(values: list[float], shape: list[int]) -> dict:
    return {"dtype": "float32", "shape": shape, "values": values}


def compared(release: dict, project: dict) -> Tally:
    (tally,) = training.compare_training("sft", release, project).values()
    return tally


def test_identical_observations_compare_identical():
    assert list(training.compare_training("dpo", observation(), observation())) == ["DPO training"]
    tally = compared(observation(), observation())
    assert tally.all_identical and tally.compared > 10


@pytest.mark.parametrize("change, field", [
    (lambda o: o["steps"][1].update(loss=o["steps"][1]["loss"] * (1 + 1e-3)), "loss"),
    (lambda o: o["steps"][0].update(lr=o["steps"][0]["lr"] * (1 + 1e-6)), "lr"),
    (lambda o: o["steps"][0].update(grad_norm=0.6), "grad_norm"),
    (lambda o: o["steps"][1]["micro_batches"].pop(), "micro-batches"),
    (lambda o: o["steps"].pop(), "steps"),
    (lambda o: o["weights"]["a.lora_A.default.weight"]["values"].__setitem__(1, 0.2 + 1e-4), "weights"),
    (lambda o: o["weights"]["norm.weight"].update(shape=[1, 2]), "weights"),
    (lambda o: o["settings"].update(lora_dropout=0.05, lora_dropout_in_layers=[0.05]), "settings"),
    (lambda o: o["settings"].update(num_train_epochs=11.0), "settings"),
    (lambda o: o["settings"].update(lr_scheduler_type="cosine"), "settings"),
    (lambda o: o["initial_adapter"].update(loaded=1, not_loaded=["x"]), "initial adapter"),
])
def test_each_change_is_a_difference(change, field):
    project = copy.deepcopy(observation())
    change(project)
    tally = compared(observation(), project)
    assert tally.first_difference is not None
    assert tally.by_type[field][1] < tally.by_type[field][0], tally.by_type


def test_dpo_rewards_are_compared():
    release, project = observation(), observation()
    for obs in (release, project):
        for step in obs["steps"]:
            for micro in step["micro_batches"]:
                micro.update(chosen=0.01, rejected=-0.02)
    project["steps"][0]["micro_batches"][1]["rejected"] = -0.03
    tally = compared(release, project)
    assert tally.compared - tally.identical == 1
    assert tally.first_difference["field"] == "micro-batch 2 rewards/rejected"


def test_merge_comparison_sees_a_tensor_and_a_token():
    merged = {"tensors": {"w": tensor([1.0, 2.0], [2])},
              "tokenizer": {"vocab_size": 10, "special": {"eos_token_id": 2}, "ids": [[1, 5, 6]]}}
    assert training.compare_merge(merged, copy.deepcopy(merged)).all_identical
    other = copy.deepcopy(merged)
    other["tensors"]["w"]["values"][1] += 1e-5
    assert training.compare_merge(merged, other).first_difference["tensor"] == "w"
    other = copy.deepcopy(merged)
    other["tokenizer"]["ids"][0][2] = 7
    assert training.compare_merge(merged, other).by_type["token ids"] == [1, 0]


@pytest.mark.parametrize("examples, accumulation", [(10, 4), (8, 5), (12, 5), (5, 4), (3, 2)])
def test_accumulation_leaves_a_partial_step_at_each_epoch_end(examples, accumulation):
    assert training.accumulation_for(examples) == accumulation
    assert examples % accumulation and examples >= accumulation


def test_too_few_examples_are_refused():
    with pytest.raises(ParityError, match="too few"):
        training.accumulation_for(2)


@pytest.fixture(scope="module")
def selftest_inputs(tiny_data_dir: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The self-test's input layout (devtools/parity/selftest.py): `data/` and `model/`."""
    inputs = tmp_path_factory.mktemp("selftest_inputs")
    (inputs / "data").symlink_to(tiny_data_dir, target_is_directory=True)
    (inputs / "model").symlink_to(tiny_model_dir, target_is_directory=True)
    return inputs


@pytest.mark.slow
def test_project_sft_observation_on_a_tiny_model(selftest_inputs: Path, tmp_path: Path):
    """Three examples, accumulation 2, the recipe's 10 epochs in the release's order (one step an
    epoch): every optimizer step recorded from the initial adapter, which training moved."""
    seen = training.selftest_sft_observation(selftest_inputs)
    assert seen["initial_adapter"]["loaded"] > 0 and not seen["initial_adapter"]["not_in_file"]
    settings = seen["settings"]
    assert settings["gradient_accumulation_steps"] == 2 and settings["lora_r"] == 16
    assert settings["lora_dropout_in_layers"] == [0.0] and settings["examples"] == 3
    assert len(seen["steps"]) == settings["optimizer_steps"] == settings["max_steps"] == 10
    assert seen["record"]["epoch_order"].startswith("the release's")
    assert all(step["loss"] > 0 and step["grad_norm"] > 0 for step in seen["steps"])
    assert seen["steps"][0]["lr"] == 0 < seen["steps"][1]["lr"]  # warmup
    initial = training.make_initial_adapter(selftest_inputs / "model", tmp_path / "initial.safetensors")
    from safetensors.torch import load_file

    start = load_file(str(initial))
    name = next(n for n in start if ".lora_B." in n)
    assert start[name].flatten().tolist() != seen["weights"][name]["values"]


@pytest.mark.parametrize("examples, world, accumulation", [(5, 1, 2), (10, 1, 4), (5, 2, 2), (7, 3, 2), (3, 1, 4)])
def test_release_epoch_order_carries_the_accumulation_over_epoch_ends(examples, world, accumulation):
    """Each process's examples, epoch after epoch of today's trainer, are the release's running
    order: every epoch shuffled from seed + epoch, dealt round-robin (the last round filled from
    the epoch's start), the accumulation never reset at an epoch's end."""
    import torch

    from PUMA.lora import ReleaseEpochOrder

    per_process = -(-examples // world)
    stream: list[list[int]] = [[] for _ in range(world)]
    for epoch in range(8):
        order = torch.randperm(examples, generator=torch.Generator().manual_seed(42 + epoch)).tolist()
        order += order[:per_process * world - examples]
        for process in range(world):
            stream[process] += order[process::world]
    sampler = ReleaseEpochOrder(examples, world, accumulation, 42)
    per_epoch = per_process // accumulation * accumulation or per_process
    assert len(sampler) == per_epoch * world
    for epoch in range(4):
        sampler.set_epoch(epoch)
        global_order = list(sampler)
        for process in range(world):
            assert global_order[process::world] == stream[process][epoch * per_epoch:(epoch + 1) * per_epoch]
