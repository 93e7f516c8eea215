"""The improved recipe pinned: every setting each step runs with under `--recipe improved`, and
what it computes on the tiny model from fixed seeds, against a golden record
(tests/puma/golden/improved_recipe.json). The release recipe is held to the release by the parity
check; the improved recipe has no release to compare with, so any change to it must show up here
as a diff that someone accepts on purpose:

    .venv/bin/python -m pytest tests/puma/test_improved_recipe_golden.py --update-golden

rewrites the record (then read `git diff` and commit it with the change that explains it).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from PUMA.steps import RECIPE_SECTIONS

GOLDEN = Path(__file__).with_name("golden") / "improved_recipe.json"
PATH_SETTINGS = ("out", "data_dir", "model_path", "data_file", "function_data", "param_data", "output_dir",
                 "output_file", "out_dir", "adapter_path", "base_model_path", "candidates_file", "scores_file",
                 "function_file", "param_file", "protocol_file")
LOSS_DIGITS = 4  # CPU reductions may round the last bits differently between thread counts


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def step_settings(step: str) -> dict[str, Any]:
    """What `puma STEP --recipe improved` runs with on one process: its settings (files left out),
    and for the training steps the batch, the trainer's arguments and the LoRA adapter they
    build; for generation, the decoding of both modes."""
    from PUMA.cli import parse_step
    from PUMA.steps import get_step

    row = get_step(step)
    positional = ["all"] if step == "data" else []  # the data step's KIND
    config = parse_step(row.settings_class(), [*positional, "--recipe", "improved"], f"python -m {row.module}", None,
                        step)
    values: dict[str, Any] = {"settings": {k: v for k, v in dataclasses.asdict(config).items()
                                           if k not in PATH_SETTINGS}}
    if hasattr(config, "batch_layout"):
        from PUMA.lora import lora_config

        values["batch"] = config.batch_layout(1).facts()
        values["trainer_arguments"] = config.trainer_arguments()
        values["lora"] = {k: sorted(v) if isinstance(v, (set, list)) else v
                          for k, v in lora_config(config).to_dict().items()
                          if k in ("r", "lora_alpha", "lora_dropout", "target_modules", "modules_to_save", "bias",
                                   "init_lora_weights", "use_rslora", "use_dora")}
    if step == "generate":
        from PUMA.generate import decoding_settings, effective_settings

        values["decoding"] = {mode: {"settings": decoding_settings(dataclasses.replace(config, mode=mode)),
                                     "effective": effective_settings(dataclasses.replace(config, mode=mode), "hf")}
                              for mode in ("function", "param")}
    return plain(values)


def recipe_record() -> dict[str, Any]:
    from PUMA.recipe import get_recipe

    recipe = get_recipe("improved")
    return plain({"changes": recipe.changes, "departures": recipe.departures(),
                  "steps": {step: step_settings(step) for step in RECIPE_SECTIONS}})


def tiny_outputs(model_dir: Path, work: Path) -> dict[str, Any]:
    """The improved recipe on the tiny model from fixed seeds: parameter candidates for two
    prompts, and the losses of three SFT steps."""
    from PUMA.cli import recipe_config
    from PUMA.generate import GenerateConfig, generate_file
    from PUMA.modeling import write_json
    from PUMA.sft import SFTConfig, train_sft

    examples = [{"instruction": "find a kettle for my tea", "type": "search", "prompt": "Instruction: a kettle\n",
                 "label": "electric kettle", "memory": "Title:Kettle", "product": None},
                {"instruction": "suggest what to buy next", "type": "recommend", "prompt": "Instruction: next\n",
                 "label": "B000000001, B000000002", "memory": "", "product": None}]
    write_json(work / "param.json", examples)
    candidates = json.loads(generate_file(recipe_config(
        GenerateConfig, "generate", "improved", model_path=str(model_dir), mode="param",
        data_file=str(work / "param.json"),
        output_file=str(work / "candidates.json"), max_new_tokens=6, num_beams=3, num_return_sequences=3,
        batch_size=2), log=lambda _: None).read_text(encoding="utf-8"))
    out = train_sft(recipe_config(SFTConfig, "sft", "improved", model_path=str(model_dir), train_on="param",
                              param_data=str(work / "param.json"), output_dir=str(work / "sft"), max_steps=3,
                              per_device_train_batch_size=1, gradient_accumulation_steps=1, learning_rate=1e-2,
                              save_strategy="no", logging_steps=1))
    record = json.loads((out / "puma_run.json").read_text(encoding="utf-8"))
    return {"candidates": candidates,
            "sft_losses": [round(entry["loss"], LOSS_DIGITS) for entry in record["loss_history"]]}


def differences(golden: Any, now: Any, where: str = "") -> list[str]:
    """Every place the two records differ, as `path: golden -> now`."""
    if isinstance(golden, dict) and isinstance(now, dict):
        return [line for key in sorted(set(golden) | set(now), key=str)
                for line in differences(golden.get(key, "<absent>"), now.get(key, "<absent>"),
                                        f"{where}.{key}" if where else str(key))]
    return [] if golden == now else [f"{where}: {json.dumps(golden)} -> {json.dumps(now)}"]


def check_against_golden(part: str, now: Any, request: pytest.FixtureRequest) -> None:
    """`now` against the golden record's `part`, or written into it with --update-golden."""
    now = plain(now)
    golden = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.is_file() else {}
    if request.config.getoption("--update-golden"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps({**golden, part: now}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"{GOLDEN} ({part}) rewritten: read `git diff` and commit it with the change that explains it")
    assert part in golden, f"{GOLDEN} has no {part!r}: make it with --update-golden"
    changed = differences(golden[part], now, part)
    assert not changed, ("the improved recipe changed (accept it on purpose with --update-golden):\n  "
                         + "\n  ".join(changed[:40]))


def test_every_setting_of_the_improved_recipe_is_its_golden_record(request):
    check_against_golden("recipe", recipe_record(), request)


@pytest.mark.slow
def test_what_the_improved_recipe_computes_on_the_tiny_model_is_its_golden_record(tiny_model_dir: Path, tmp_path: Path,
                                                                                  request):
    check_against_golden("tiny_model", tiny_outputs(tiny_model_dir, tmp_path), request)


def test_a_changed_setting_is_named_with_both_values():
    golden = {"steps": {"sft": {"lora": {"r": 16}}}, "changes": {"sft": {"loss": "label_only"}}}
    now = {"steps": {"sft": {"lora": {"r": 8}}}, "changes": {"sft": {"loss": "label_only"}}}
    assert differences(golden, now) == ["steps.sft.lora.r: 16 -> 8"]
    assert differences(golden, golden) == []
