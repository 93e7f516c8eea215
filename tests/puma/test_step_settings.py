"""PUMA's steps on the one settings system: help for every flag, the old output spellings
(with a warning), the recipe file's step settings under --config and flags, no code that asks a
recipe's name, settings carried between steps (a mismatch refused or said), and `puma run`."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from PersonalWAB.settings import build_parser, default_of, flag_name, help_problems, settings_fields
from PUMA.__main__ import COMMANDS
from PUMA.cli import parse_step, recipe_defaults
from PUMA.recipe import RECIPES, get_recipe, write_record
from PUMA.steps import BY_NAME

# the settings class of each `puma` command that is not a step (the steps' are in PUMA/steps.py)
TOOL_SETTINGS = {"tiny_model": ("PUMA.tiny_model", "TinyModelConfig"), "model": ("PUMA.pretrained", "PrepareConfig"),
                 "launch": ("PUMA.launch", "LaunchSettings"), "run": ("PUMA.pipeline", "PipelineSettings")}


def settings_class(command: str) -> type:
    if command in BY_NAME:
        return BY_NAME[command].settings_class()
    module, name = TOOL_SETTINGS[command]
    return getattr(importlib.import_module(module), name)


def test_every_step_has_a_settings_class_with_help_for_every_flag():
    assert set(BY_NAME) | set(TOOL_SETTINGS) == set(COMMANDS)
    for command in COMMANDS:
        parser = build_parser(settings_class(command), prog=f"puma {command}")
        assert help_problems(parser) == [], command
    outputs = {command: [flag_name(i) for i in settings_fields(settings_class(command)) if flag_name(i) == "out"]
               for command in COMMANDS if command not in ("launch", "run")}
    assert all(found == ["out"] for found in outputs.values()), outputs


def test_an_old_output_spelling_and_a_negated_boolean_warn_and_work(tmp_path: Path, capsys):
    from PUMA.generate import GenerateConfig
    from PUMA.sft import SFTConfig

    config = parse_step(GenerateConfig, ["--output_file", str(tmp_path / "o.json"), "--no-do_sample"], "generate",
                        None, "generate")
    assert config.output_file == str(tmp_path / "o.json") and config.do_sample is False
    err = capsys.readouterr().err
    assert "--output_file is deprecated; use --out" in err and "--no-do_sample is deprecated; use --do_sample 0" in err
    config = parse_step(SFTConfig, ["--output_dir", str(tmp_path / "a"), "--no-packing"], "sft", None, "sft")
    assert (config.output_dir, config.packing) == (str(tmp_path / "a"), False)
    assert parse_step(SFTConfig, ["--out", str(tmp_path / "b"), "--packing", "0"], "sft", None, "sft").packing is False


def test_a_config_file_equals_the_same_flags(tmp_path: Path):
    from PUMA.generate import GenerateConfig

    flags = ["--out", str(tmp_path / "c.json"), "--num_beams", "3", "--do_sample", "0", "--recipe", "improved"]
    (tmp_path / "g.yaml").write_text(f"out: {tmp_path / 'c.json'}\nnum_beams: 3\ndo_sample: false\nrecipe: improved\n")
    from_file = parse_step(GenerateConfig, ["--config", str(tmp_path / "g.yaml")], "generate", None, "generate")
    assert from_file == parse_step(GenerateConfig, flags, "generate", None, "generate")
    over = parse_step(GenerateConfig, ["--config", str(tmp_path / "g.yaml"), "--num_beams", "5"], "g", None, "generate")
    assert over.num_beams == 5 and over.recipe == "improved"


def test_the_recipe_files_step_settings_are_settings_and_the_release_values_the_documented_defaults():
    from PUMA.recipe import section_class

    for recipe in RECIPES:
        for step in get_recipe(recipe).steps:
            cls = section_class(step)
            values = recipe_defaults(cls, step, recipe)  # raises on a key that is no setting of the step
            if recipe == "release":
                defaults = {item.name: default_of(item) for item in settings_fields(cls)}
                assert {name: defaults[name] for name in values} == values, step


def test_the_recipe_files_step_settings_sit_under_config_and_flags(tmp_path: Path):
    from PUMA.generate import GenerateConfig

    mine = tmp_path / "mine.yaml"  # a recipe file of one's own: release.yaml's settings but what it changes
    mine.write_text("steps:\n  generate: {num_beams: 4, num_return_sequences: 4}\n")
    assert parse_step(GenerateConfig, [], "g", None, "generate").num_beams == 10
    assert parse_step(GenerateConfig, ["--recipe", str(mine)], "g", None, "generate").num_beams == 4
    assert parse_step(GenerateConfig, [f"--recipe={mine}"], "g", None, "generate").num_beams == 4
    (tmp_path / "c.yaml").write_text(f"recipe: {mine}\n")
    assert parse_step(GenerateConfig, ["--config", str(tmp_path / "c.yaml")], "g", None, "generate").num_beams == 4
    (tmp_path / "d.yaml").write_text(f"recipe: {mine}\nnum_beams: 5\n")
    assert parse_step(GenerateConfig, ["--config", str(tmp_path / "d.yaml")], "g", None, "generate").num_beams == 5
    assert parse_step(GenerateConfig, ["--recipe", str(mine), "--num_beams", "6"], "g", None,
                      "generate").num_beams == 6
    assert parse_step(GenerateConfig, ["--recipe", "improved"], "g", None, "generate").prompts == "training"


# --- settings that travel between steps ----------------------------------------------------------------------------
def _made(path: Path, step: str, recipe: str, **settings) -> str:
    path.write_text("[]", encoding="utf-8")
    write_record(path, step, get_recipe(recipe), settings)
    return str(path)


def test_generation_refuses_data_cut_at_another_memory_length(tmp_path: Path):
    from PUMA.generate import GenerateConfig, generate_file

    data = _made(tmp_path / "param_train.json", "data", "release", mem_token_length=192)
    config = GenerateConfig(mode="param", data_file=data, function_file=str(tmp_path / "f.json"),
                            output_file=str(tmp_path / "o.json"), model_path=str(tmp_path / "model"))
    with pytest.raises(ValueError, match=r"--mem_token_length 768: --data_file .*param_train.json was made with "
                                         r"--mem_token_length 192 .*Run this step with --mem_token_length 192"):
        generate_file(config, log=lambda _: None)


def test_dpo_refuses_pairs_fitted_to_another_length_under_the_improved_recipe(tmp_path: Path):
    from PUMA.dpo import DPOStepConfig, train_dpo

    pairs = _made(tmp_path / "dpo_train.json", "dpo_data", "improved", max_length=416, model_path="m")
    from PUMA.cli import recipe_config

    with pytest.raises(ValueError, match=r"--max_length 1024: --data_file .* was made with --max_length 416"):
        train_dpo(recipe_config(DPOStepConfig, "dpo", "improved", data_file=pairs, output_dir=str(tmp_path / "dpo")))


def test_a_difference_that_only_informs_is_said(tmp_path: Path):
    from PUMA.lineage import carried_mismatches, check_carried
    from PUMA.sft import SFTConfig

    data = _made(tmp_path / "param_train.json", "data", "release", model_path="other/model",
                 mem_token_length=192)
    config = SFTConfig(model_path="base/model", param_data=data)
    said: list[str] = []
    lines = check_carried("sft", config, {"--param_data": data}, said.append)
    assert lines and said == [f"note: {lines[0]}"]
    assert "--model_path base/model: --param_data" in lines[0] and "--model_path other/model" in lines[0]
    # generation from the stored training prompt (--prompts training) does not read the memory length again
    from PUMA.generate import GenerateConfig

    assert carried_mismatches("generate", GenerateConfig(data_file=data, prompts="training"),
                              {"--data_file": data}) == []


# --- puma run ------------------------------------------------------------------------------------------------------
def _pipeline(tmp_path: Path, text: str, *flags: str):
    from PersonalWAB.settings import parse
    from PUMA.pipeline import PipelineSettings

    (tmp_path / "run.yaml").write_text(text, encoding="utf-8")
    return parse(PipelineSettings, ["--config", str(tmp_path / "run.yaml"), *flags])


def test_puma_run_chains_each_steps_outputs_into_the_next(tmp_path: Path):
    from PUMA.pipeline import commands

    work = tmp_path / "w"
    settings = _pipeline(tmp_path, f"recipe: improved\nwork_dir: {work}\ndata_dir: D\nmodel_path: M\n"
                                   "data: {mem_token_length: 192}\ndpo: {max_length: 416}\n"
                                   "generate_param: {do_sample: false, num_beams: 3}\n")
    args = {c.title: c.args for step in range(1, 8) for c in commands(settings, step)}
    assert args["data"] == ("-m", "PUMA.data", "all", "--recipe", "improved", "--data_dir", "D", "--model_path", "M",
                            "--out", str(work / "data"), "--mem_token_length", "192")
    assert args["sft"][:4] == ("-m", "PUMA.launch", "sft", "--")
    assert ("--adapter_path", str(work / "sft")) == args["merge"][args["merge"].index("--adapter_path"):][:2]
    param = " ".join(args["generate_param"])
    assert f"--model_path {work / 'sft_merged'}" in param and f"--function_file {work / 'function_train.json'}" \
        in param and param.endswith("--do_sample 0 --num_beams 3")
    assert f"--candidates_file {work / 'param_candidates_train.json'}" in " ".join(args["score"])
    assert f"--data_file {work / 'dpo_train.json'}" in " ".join(args["dpo"]) and args["dpo"][-2:] == ("--max_length",
                                                                                                       "416")
    assert "--num_return_sequences 1 --num_beams 1 --do_sample 0" in " ".join(args["generate_test"])
    assert f"--puma_param_file {work / 'param_test.json'}" in " ".join(args["evaluate"])
    # a later step alone takes what its input's record says it must share
    (work / "data").mkdir(parents=True)
    _made(work / "data" / "param_train.json", "data", "improved", mem_token_length=192)
    _made(work / "data" / "param_test.json", "data", "improved", mem_token_length=192)
    release = _pipeline(tmp_path, f"work_dir: {work}\n", "--recipe", "release")
    assert "--mem_token_length 192" in " ".join(commands(release, 3)[-1].args)
    assert "--mem_token_length 192" in " ".join(commands(release, 7)[0].args)


def test_puma_run_checks_its_file_and_steps_before_running(tmp_path: Path):
    from PUMA.pipeline import run_pipeline

    ran: list = []
    with pytest.raises(ValueError, match=r"run.yaml: sft.epochs: unknown setting"):
        run_pipeline(_pipeline(tmp_path, "sft: {epochs: 1}\n"), log=lambda _: None, run=ran.append)
    with pytest.raises(ValueError, match="--steps 0,9"):
        run_pipeline(_pipeline(tmp_path, "", "--steps", "0,9"), log=lambda _: None, run=ran.append)
    assert ran == []
    statuses = iter([0, 3])
    lines: list[str] = []
    settings = _pipeline(tmp_path, f"work_dir: {tmp_path / 'w'}\n", "--steps", "4,2")
    assert run_pipeline(settings, log=lines.append, run=lambda command: ran.append(command) or next(statuses)) == 3
    assert [command.args[1:3] for command in ran] == [("PUMA.launch", "sft"), ("PUMA.merge", "--recipe")]
    assert ran[0].row is None and ran[1].row.name == "merge" and ran[1].config.adapter_path == str(tmp_path / "w/sft")
    assert lines[-1] == "puma run: step 2 (merge) failed with exit status 3"


@pytest.mark.parametrize("text, fault", [
    ("steps: [4, 3]\n", "steps: expected one value (text), got a YAML list"),
    ("score: {shard: 0.5}\n", "score.shard: the YAML number 0.5: '0.5': expected I/N"),
    ("sft: {num_train_epochs: many}\n", "sft.num_train_epochs: could not convert string to float: 'many'"),
    ("evaluate: {end_index: true}\n", "evaluate.end_index: expected a whole number, got the YAML boolean true"),
    ("dpo: {out: a, output_dir: b}\n", "dpo.out and output_dir both set --out; keep one"),
    ("generate_test: [1]\n", "generate_test: expected a mapping of the step's flags, got a YAML list"),
])
def test_puma_run_checks_every_sections_values_under_dry_run_too(text, fault, tmp_path: Path, monkeypatch, capsys):
    from PUMA.__main__ import main

    config = tmp_path / "run.yaml"
    config.write_text(f"work_dir: {tmp_path / 'w'}\n{text}")
    monkeypatch.setattr(sys, "argv", ["puma"])
    assert main(["run", "--config", str(config), "--dry_run"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --config {config}: {fault}" + err.split(fault, 1)[1] and err.count("\n") == 1, err


def test_recorded_settings_are_the_resolved_settings(tmp_path: Path):
    from PersonalWAB.settings import resolved
    from PUMA.recipe import read_record
    from PUMA.score import ScoreConfig

    config = ScoreConfig(output_file=str(tmp_path / "s.json"))
    (tmp_path / "s.json").write_text("{}")
    write_record(tmp_path / "s.json", "score", get_recipe("release"), config)
    assert read_record(tmp_path / "s.json")["settings"] == json.loads(json.dumps(resolved(config)))
