"""The parts of the puma check that decide what is compared: the release's scripts read as bash
runs them, the settings items' comparison (readings, documented defaults), the seeded choice of
tasks by type, and items that have nothing to compare on their inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.parity.compare import Tally
from devtools.parity.selection import choose
from devtools.parity.step_settings import compare_values, lora_math, project_launch, training_math, warmup
from devtools.parity.release_scripts import ScriptError, read_script, release_scripts
from tests.conftest import REPO_ROOT

FINETUNE = "\n".join([
    "deepspeed --include=localhost:0,1,2,3 --master_port=29999 finetune_llama.py \\",
    "    --data_path data/param_data.json \\",
    "    --learning_rate 3e-4 \\",
    "    --float16 \\",
    "    --train_on param \\ ",  # as the release's script ends: a backslash, then a space
    "# or you can train on function, function_param"])
GENERATE = """accelerate launch test_llama.py \\
    --bf16 \\
    --num_beams 10 \\
    --do_sample \\
    --split train \\"""


def scripts(root: Path) -> Path:
    folder = root / "PUMA" / "scripts"
    folder.mkdir(parents=True)
    (folder / "finetune_function_param.sh").write_text(FINETUNE, encoding="utf-8")
    (folder / "generate_param_dpo.sh").write_text(GENERATE, encoding="utf-8")
    return root


def test_a_release_script_is_read_as_bash_runs_it(tmp_path: Path) -> None:
    calls = release_scripts(scripts(tmp_path))
    finetune = calls["finetune_function_param.sh"]
    assert (finetune.launcher, finetune.script, finetune.processes) == ("deepspeed", "finetune_llama.py", 4)
    assert finetune.flags == {"--data_path": "data/param_data.json", "--learning_rate": "3e-4", "--float16": True,
                              "--train_on": "param"}
    assert finetune.stray == (" ",)  # the backslash before a space escapes the space and ends the command
    assert finetune.argv({"--data_path": "/d.json", "--extra": "x"}, drop=("--float16",)) == [
        "--data_path", "/d.json", "--learning_rate", "3e-4", "--train_on", "param", "--extra", "x"]
    generate = calls["generate_param_dpo.sh"]
    assert (generate.launcher, generate.processes, generate.stray) == ("accelerate", None, ())
    assert generate.flags == {"--bf16": True, "--num_beams": "10", "--do_sample": True, "--split": "train"}


def test_a_script_this_reader_cannot_take_apart_is_named(tmp_path: Path) -> None:
    (tmp_path / "odd.sh").write_text("echo hello\n", encoding="utf-8")
    with pytest.raises(ScriptError, match="odd.sh: starts with 'echo'"):
        read_script(tmp_path / "odd.sh")


def test_trainer_arguments_of_both_library_generations_compare_alike() -> None:
    old = {"num_train_epochs": 10, "learning_rate": 3e-4, "lr_scheduler_type": "linear", "warmup_ratio": 0.1,
           "warmup_steps": 0, "optim": "adamw_torch", "seed": 42}
    new = {"num_train_epochs": 10.0, "learning_rate": 3e-4, "lr_scheduler_type": "linear", "warmup_steps": 0.1,
           "optim": "adamw_torch", "seed": 42}
    assert training_math(old) == training_math(new)
    assert warmup({"warmup_steps": 30}) == "30 steps"
    assert lora_math({"target_modules": ["v_proj", "q_proj"], "modules_to_save": None})["target_modules"] == [
        "q_proj", "v_proj"]
    assert lora_math({"target_modules": "q_proj,v_proj"})["target_modules"] == ["q_proj", "v_proj"]


def test_a_value_that_differs_is_reported_unless_a_listed_reading_explains_it() -> None:
    release = {"sft": {"lora_r": 16, "train_on": "param", "learning_rate": 3e-4}}
    readings = [{"steps": ["sft"], "setting": "train_on", "release": "function_param", "paper": [],
                 "source": "the script cannot run as shipped"}]
    same = compare_values(release, {"sft": {"lora_r": 16, "train_on": "function_param", "learning_rate": 3e-4}},
                          readings, "settings")["settings [sft]"]
    assert same.all_identical and same.compared == 3
    assert same.facts["listed readings"][0]["reading"] == "the script cannot run as shipped"
    changed = compare_values(release, {"sft": {"lora_r": 8, "train_on": "function_param", "learning_rate": 3e-4}},
                             readings, "settings")["settings [sft]"]
    assert not changed.all_identical and changed.first_difference == {"setting": "lora_r", "release": 16,
                                                                      "project": 8}
    # a project value the reading does not name is a difference too
    assert not compare_values(release, {"sft": {"lora_r": 16, "train_on": "function", "learning_rate": 3e-4}},
                              readings, "settings")["settings [sft]"].all_identical
    missing = compare_values(release, {"sft": {"lora_r": 16}}, [], "settings")["settings [sft]"]
    assert not missing.all_identical and missing.first_difference["project"] == "<not stated>"
    # defaults state some values only; defaults that contradict each other are a difference
    stated = compare_values(release, {"sft": {"lora_r": 16}}, [], "documented defaults", stated_only=True)
    assert stated["documented defaults [sft]"].all_identical
    refused = compare_values({"generate_param": {"num_beams": 10}}, {"generate_param": {"refused": "10 vs 5"}}, [],
                             "documented defaults", stated_only=True)["documented defaults [generate_param]"]
    assert not refused.all_identical


def test_the_release_recipe_launches_on_the_release_node_as_its_scripts_did() -> None:
    launch = project_launch("sft", 4)
    release_config = json.loads((REPO_ROOT / "PUMA/configs/deepspeed_zero2_release.json").read_text())
    assert (launch["processes"], launch["per_device_train_batch_size"], launch["gradient_accumulation_steps"],
            launch["global_batch_size"], launch["precision"]) == (4, 1, 16, 64, "fp16")
    assert launch["deepspeed"] == release_config


class NearRecommender:
    """Ranks a target in its top 10 only for the targets it knows."""

    def __init__(self, known: set[str]):
        self.known = known

    def recommend_batch(self, sequences: list[list[str]], k: int = 10) -> list[list[str]]:
        return [[s[-1]] if s[-1] in self.known else [] for s in sequences]


def task(kind: str, asin: str) -> dict:
    return {"type": kind, "target": {"product_info": {"parent_asin": asin}}}


def test_tasks_are_drawn_per_type_with_a_seed_and_recommend_ones_that_can_hit() -> None:
    tasks = {"train": [task(kind, f"A{i}") for i in range(12) for kind in ("search", "recommend", "review")],
             "test": [task("search", "T0"), task("review", "T1")]}
    recommender = NearRecommender({"A1", "A5", "A9"})
    choice = choose(tasks, 2, seed=3, recommender=recommender)
    chosen = [tasks["train"][i] for i in choice.positions["train"]]
    assert sorted(t["type"] for t in chosen) == ["recommend", "recommend", "review", "review", "search", "search"]
    assert all(t["target"]["product_info"]["parent_asin"] in recommender.known
               for t in chosen if t["type"] == "recommend")
    assert choice.short == {"test/recommend": 0, "test/review": 1, "test/search": 1}
    assert choose(tasks, 2, seed=3, recommender=recommender).positions == choice.positions
    assert choose(tasks, 2, seed=4, recommender=recommender).positions != choice.positions
    assert choose(tasks, None, seed=3, recommender=recommender).positions["test"] == [0, 1]


def test_an_item_with_nothing_to_compare_says_why_and_is_no_difference() -> None:
    tally = Tally()
    tally.add("search", True)
    tally.cannot_compare("no recommend candidate scored above 0 on both sides")
    assert tally.all_identical and "not comparable here: no recommend candidate" in tally.line("step4")
    assert tally.to_dict()["not_comparable"].startswith("no recommend")
