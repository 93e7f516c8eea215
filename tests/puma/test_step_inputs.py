"""A PUMA step's inputs checked against each other before any work: candidates scored on another
split or data folder, scores paired with another split's parameter data, and the puma agent's
files of another split are each refused in one line (exit 2) instead of scoring nothing or
erroring every task; an empty or unknown split, a missing model and an input that is not JSON are
refused before the step's long work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from PersonalWAB.cli import run_command
from PUMA.cli import STEP_BAD_INPUT
from PUMA.recipe import get_recipe, write_record
from tests.conftest import rewrite


def step(main, *argv: object, capsys) -> str:
    """The step's one-line error (it must exit 2)."""
    assert run_command(main, [str(a) for a in argv], STEP_BAD_INPUT) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1
    return error


def outputs_of(tasks: list[dict], path: Path) -> Path:
    path.write_text(json.dumps({t["task"]: ["search_product_by_query"] for t in tasks}))
    return path


@pytest.fixture(scope="module")
def other_data_dir(tmp_path_factory) -> Path:
    from PersonalWAB.data.synthetic import generate_synthetic

    out = tmp_path_factory.mktemp("other")
    generate_synthetic(out, scale="tiny", seed=1)
    return out


def test_score_refuses_candidates_of_another_split_naming_it(tiny_data, tmp_path, capsys):
    from PUMA.score import main as score

    candidates = outputs_of(tiny_data.split("train")[:5], tmp_path / "candidates.json")
    error = step(score, "--data_dir", tiny_data.data_dir, "--task_split", "test", "--candidates_file", candidates,
                 "--out", tmp_path / "scores.json", capsys=capsys)
    assert f"--candidates_file {candidates}: 5 of its 5 instructions are not tasks of the 'test' split" in error
    assert "they are the 'train' split's: give --task_split train" in error
    assert not (tmp_path / "scores.json").exists()


def test_score_refuses_candidates_of_another_data_folder(tiny_data, other_data_dir, tmp_path, capsys):
    from PersonalWAB.data.loader import load_benchmark_data
    from PUMA.score import main as score

    candidates = outputs_of(load_benchmark_data(other_data_dir).split("train"), tmp_path / "candidates.json")
    error = step(score, "--data_dir", tiny_data.data_dir, "--task_split", "train", "--candidates_file", candidates,
                 "--out", tmp_path / "scores.json", capsys=capsys)
    assert "instructions are not tasks of the 'train' split" in error and "another data folder or split" in error


def test_score_refuses_a_function_file_of_another_split(tiny_data, tmp_path, capsys):
    from PUMA.score import main as score

    train = tiny_data.split("train")[:3]
    candidates = tmp_path / "candidates.json"
    candidates.write_text(json.dumps({t["task"]: ["x"] for t in train}))
    functions = outputs_of(tiny_data.split("test")[:3], tmp_path / "functions.json")
    error = step(score, "--data_dir", tiny_data.data_dir, "--task_split", "train", "--candidates_file", candidates,
                 "--function_file", functions, "--out", tmp_path / "scores.json", capsys=capsys)
    assert f"--function_file {functions}:" in error and "they are the 'test' split's" in error


def examples(tasks: list[dict], split: str) -> list[dict]:
    return [{"instruction": t["task"], "split": split, "prompt": f"Instruction: {t['task']}"} for t in tasks]


def test_dpo_data_refuses_param_data_of_other_instructions(tiny_data, tmp_path, capsys):
    from PUMA.dpo_data import main as dpo_data

    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({t["task"]: {"a": 1.0, "b": 0.0} for t in tiny_data.split("train")[:4]}))
    param = tmp_path / "param.json"
    param.write_text(json.dumps(examples(tiny_data.split("test"), "train")))
    error = step(dpo_data, "--scores_file", scores, "--param_data", param, "--out", tmp_path / "pairs.json",
                 capsys=capsys)
    assert f"--scores_file {scores}: 4 of its 4 instructions are not instructions of --param_data {param}" in error
    assert not (tmp_path / "pairs.json").exists()


def test_dpo_data_refuses_param_data_of_another_split_than_scored(tiny_data, tmp_path, capsys):
    from PUMA.dpo_data import main as dpo_data

    train = tiny_data.split("train")[:4]
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({t["task"]: {"a": 1.0, "b": 0.0} for t in train}))
    write_record(scores, "score", get_recipe("release"), {"task_split": "train"})
    param = tmp_path / "param.json"
    param.write_text(json.dumps(examples(train, "test")))
    error = step(dpo_data, "--scores_file", scores, "--param_data", param, "--out", tmp_path / "pairs.json",
                 capsys=capsys)
    assert "examples of the test split, but --scores_file" in error and "scored the 'train' split" in error


def test_puma_agent_with_train_files_on_the_test_split_is_refused_before_any_task(tiny_data, tmp_path, capsys):
    from PersonalWAB.runner.cli import main as run

    train = tiny_data.split("train")
    functions, params = outputs_of(train, tmp_path / "f.json"), outputs_of(train, tmp_path / "p.json")
    out = tmp_path / "result.json"
    assert run(["--data_dir", str(tiny_data.data_dir), "--agent_strategy", "puma", "--agent_memory", "none",
                "--puma_function_file", str(functions), "--puma_param_file", str(params), "--end_index", "3",
                "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"--puma_function_file {functions}: no function output for 3 of the 3 test task(s)" in error
    assert "it holds the 'train' split's instructions" in error and not out.exists()


# ---------------------------------------------------------------- PUMA steps: checked before the long work


@pytest.fixture()
def no_long_work(monkeypatch):
    """Fail a test whose step got as far as its long work (the memory embedding, building engines)."""
    import PersonalWAB.build
    import PersonalWAB.memory.embeddings

    def long_work(*args, **kwargs):
        raise AssertionError("the step started its long work before finding the bad input")

    monkeypatch.setattr(PersonalWAB.memory.embeddings, "build_behaviour_embeddings", long_work)
    monkeypatch.setattr(PersonalWAB.build, "build_artifacts", long_work)


def _step(step_main, argv, capsys):
    code = run_command(step_main, argv, STEP_BAD_INPUT)
    return code, capsys.readouterr().err


@pytest.fixture()
def empty_test_split(data_copy):
    rewrite(data_copy / "user_instructions.json", lambda content: content.update(test=[]))
    return data_copy


def test_puma_data_refuses_an_empty_split_before_embedding(empty_test_split, tiny_model_dir, tmp_path,
                                                           no_long_work, capsys):
    from PUMA.data import main

    code, err = _step(main, ["param", "--data_dir", str(empty_test_split), "--model_path", str(tiny_model_dir),
                             "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert f"error: --splits test: the 'test' split of {empty_test_split} has no tasks" in err
    assert not (tmp_path / "out").exists()


def test_puma_data_refuses_an_unknown_split(tiny_data_dir, tmp_path, no_long_work, capsys):
    from PUMA.data import main

    code, err = _step(main, ["function", "--data_dir", str(tiny_data_dir), "--splits", "train,dev",
                             "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "error: --splits 'dev': no such split; expected one of test, train" in err


@pytest.mark.parametrize("model", ["{tmp}/no_model", "{tmp}"])
def test_puma_data_refuses_a_missing_or_invalid_model_before_embedding(model, tiny_data_dir, tmp_path,
                                                                        no_long_work, capsys):
    from PUMA.data import main

    model_path = model.replace("{tmp}", str(tmp_path))
    code, err = _step(main, ["param", "--data_dir", str(tiny_data_dir), "--model_path", model_path,
                             "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and f"error: --model_path {model_path}: " in err and "Traceback" not in err


def test_puma_scoring_refuses_an_empty_split_before_building(empty_test_split, tmp_path, no_long_work, capsys):
    from PUMA.score import main

    candidates = tmp_path / "candidates.json"
    candidates.write_text("{}")
    code, err = _step(main, ["--data_dir", str(empty_test_split), "--task_split", "test", "--candidates_file",
                             str(candidates), "--out", str(tmp_path / "scores.json")], capsys)
    assert code == 2 and "error: --task_split test: the 'test' split" in err


def test_a_puma_input_that_is_not_json_is_named(tmp_path, capsys):
    from PUMA.dpo_data import main

    scores = tmp_path / "scores.json"
    scores.write_text("{not json")
    code, err = _step(main, ["--scores_file", str(scores), "--out", str(tmp_path / "pairs.json")], capsys)
    assert code == 2 and err.startswith(f"error: {scores}: not valid JSON (")
