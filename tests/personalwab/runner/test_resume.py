"""Resuming a run (`--resume_from`, `PersonalWAB.runner.resume`): only a file of the same run on
the same data is resumed, a file without the run's settings only when told and then task by task,
a record given twice is kept once, and only records whose numbers validate are kept (the others
run again, and the finished file's header is computed from the kept records)."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.results import build_header, load_result_file, read_run_file
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run


def quiet(_: str) -> None:
    pass


def cli(data_dir, output, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), *extra]


# -- --resume_from keeps records only of the same run ----------------------------------------

@pytest.fixture()
def finished(tiny_data_dir, tiny_engines, tmp_path):
    output = tmp_path / "finished.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=5), log=quiet)
    return output


@pytest.mark.parametrize(("argv", "named"), [
    (["--agent_memory", "none"], "agent_memory"),
    (["--seed", "3"], "seed"),
    (["--end_index", "6"], "end_index"),
    (["--task_split", "train"], "task_split"),
    (["--memory_length", "7"], "memory_length"),
])
def test_resume_refuses_a_file_of_another_run_and_leaves_it(tiny_data_dir, finished, capsys, argv, named):
    before = finished.read_bytes()
    settings = {"--end_index": "5", **dict(zip(argv[::2], argv[1::2]))}
    argv = ["--data_dir", str(tiny_data_dir), "--resume_from", str(finished)]
    argv += [word for pair in settings.items() for word in pair]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "belongs to another run" in error and named in error
    assert finished.read_bytes() == before


def test_resume_refuses_a_file_run_on_other_data(tiny_data_dir, finished, tmp_path, capsys):
    other = tmp_path / "other_data"
    shutil.copytree(tiny_data_dir, other, ignore=shutil.ignore_patterns("indexes", "recommender", "cache"))
    part = sorted(other.glob("all_products_part_*.json"))[0]
    products = json.loads(part.read_text())
    first = next(iter(products))
    products[first]["title"] += " (edited)"
    part.write_text(json.dumps(products))
    before = finished.read_bytes()
    assert main(["--data_dir", str(other), "--resume_from", str(finished), "--end_index", "5"]) == 2
    assert "data_fingerprint" in capsys.readouterr().err
    assert finished.read_bytes() == before


def test_resume_of_a_headerless_file_checks_each_task(tiny_data_dir, finished, tmp_path, capsys):
    _, records = load_result_file(finished)
    old_format = tmp_path / "old.json"
    foreign = json.loads(json.dumps(records))
    foreign[2]["info"]["task"]["task"] = "an instruction of some other data set"
    old_format.write_text(json.dumps(foreign))
    assert main(["--data_dir", str(tiny_data_dir), "--resume_from", str(old_format), "--end_index", "5",
                 "--resume_headerless"]) == 2
    assert "task 2 trial 0 is not that task" in capsys.readouterr().err
    old_format.write_text(json.dumps(records[:3]))
    assert main(["--data_dir", str(tiny_data_dir), "--resume_from", str(old_format), "--end_index", "5",
                 "--resume_headerless"]) == 0
    assert "records no run settings" in capsys.readouterr().out
    assert [r["task_id"] for r in load_result_file(old_format)[1]] == list(range(5))


def test_duplicate_records_in_a_checkpoint_are_kept_once(tiny_data_dir, finished, tmp_path):
    header, records = load_result_file(finished)
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps([{"run_args": header["run_args"], "unfinished": True},
                                      records[0], records[1], records[0], records[1], records[0]]))
    run(RunConfig(data_dir=str(tiny_data_dir), resume_from=str(checkpoint), end_index=5), log=quiet)
    _, resumed = load_result_file(checkpoint)
    assert [r["task_id"] for r in resumed] == list(range(5))
    assert resumed[:2] == records[:2]


# -- only the records leaderboard validate accepts are kept -----------------------------------------

SETTINGS: dict[str, Any] = {"agent_memory": "none", "search_backend": "bm25s", "end_index": 6}


@pytest.fixture(scope="module")
def finished_run(tiny_data_dir, tiny_engines, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resume_valid") / "finished.json"
    return run(RunConfig(data_dir=str(tiny_data_dir), out=str(out), **SETTINGS), log=lambda _: None)[1]


@pytest.mark.parametrize(("key", "value", "fault"), [
    ("action_acc", 0.5, "action_acc[0] = 0.5: function accuracy is 0 or 1"),
    ("action_acc", 7, "action_acc[0] = 7 is not a number in [0, 1]"),
    ("res_acc", 5.0, "res_acc[0] = 5.0 is not a number in [0, 1]"),
    ("res_acc", float("nan"), "res_acc[0] = nan is not a number in [0, 1]"),
    ("res_acc", "1", "res_acc[0] = '1' is not a number in [0, 1]"),
], ids=["action 0.5", "action 7", "score 5.0", "NaN score", "string score"])
def test_a_record_validate_refuses_runs_again(key, value, fault, finished_run, tiny_data_dir, tmp_path):
    content = json.loads(finished_run.read_text())
    records = copy.deepcopy(content[1:])
    records[0][key] = [value]
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps([{"run_args": content[0]["run_args"], "unfinished": True}, *records]))
    notes: list[str] = []
    header, output, _ = run(RunConfig(data_dir=str(tiny_data_dir), resume_from=str(checkpoint), **SETTINGS),
                            log=notes.append)
    assert f"note: {checkpoint}: task 0 trial 0 not kept ({fault}); the task runs again" in notes
    rerun = read_run_file(output)
    assert rerun.records == content[1:]  # task 0 run again gives the finished run's record
    assert header == build_header(rerun.run_args, rerun.records)
    assert {**header, "run_args": None} == {**content[0], "run_args": None}  # the finished run's figures
    assert validate_file(output).valid


# -- what a resume keeps ----------------------------------------------------------------------------------

def test_resume_leaves_out_records_with_unusable_numbers(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "4")) == 0
    content = json.loads(output.read_text())
    content[0] = {"run_args": content[0]["run_args"], "unfinished": True}
    content[1]["res_acc"] = [math.nan] * len(content[1]["res_acc"])
    content[2]["action_acc"] = content[2]["action_acc"] + [1]
    content[3]["res_acc"] = [1.5] * len(content[3]["res_acc"])
    output.write_text(json.dumps(content))  # NaN written as the standard encoder writes it
    capsys.readouterr()
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(output)]) == 0
    printed = capsys.readouterr().out
    for task_id, problem in ((0, "res_acc[0] = nan is not a number in [0, 1]"), (1, "action_acc has"),
                             (2, "res_acc[0] = 1.5 is not a number in [0, 1]")):
        assert f"{output}: task {task_id} trial 0 not kept ({problem}" in printed
    _, records = load_result_file(output)
    assert [r["task_id"] for r in records] == [0, 1, 2, 3]
    assert all(0 <= value <= 1 for r in records for value in r["res_acc"])


def test_a_headerless_file_is_resumed_only_when_told(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "4")) == 0
    _, records = load_result_file(output)
    output.write_text(json.dumps(records[:2]))
    before = output.read_bytes()
    capsys.readouterr()
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(output)]) == 2
    assert "task records without the run's settings" in capsys.readouterr().err
    assert output.read_bytes() == before
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(output),
                 "--resume_headerless"]) == 0
    assert [r["task_id"] for r in load_result_file(output)[1]] == [0, 1, 2, 3]
