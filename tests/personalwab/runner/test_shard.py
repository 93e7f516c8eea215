"""`pwab run --shard I/N`: a deterministic part of the selected tasks, every trial of a task in
one shard, the shard named in the header with the run's settings, and a shard file that
validation accepts and calls a shard."""

from __future__ import annotations

import pytest

from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import parse_config, run_resume_keys
from PersonalWAB.shards import Shard, task_selection


def test_shard_rule_splits_a_selection_into_disjoint_parts_that_cover_it():
    selection = task_selection(3, 20, shuffle=True, seed=5)
    assert sorted(selection) == list(range(3, 20)) and selection == task_selection(3, 20, True, 5)
    parts = [Shard(index, 4).take(selection) for index in range(4)]
    assert sorted(task for part in parts for task in part) == sorted(selection)
    assert parts[1] == selection[1::4]


@pytest.mark.parametrize("text", ["2/2", "-1/3", "1", "a/b", "0/0", "1/2/3"])
def test_malformed_shard_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as stop:
        parse_config([f"--shard={text}"])
    assert stop.value.code == 2
    assert "expected I/N with 0 <= I < N" in capsys.readouterr().err


def test_shard_is_a_resume_key_and_written_as_i_slash_n():
    assert "shard" in run_resume_keys()
    assert parse_config(["--shard", "01/3"]).shard == "1/3"


def test_shard_runs_its_part_of_the_shuffled_range_with_every_trial(tiny_data_dir, tiny_engines, tmp_path):
    output = tmp_path / "shard.json"
    argv = ["--data_dir", str(tiny_data_dir), "--out", str(output), "--start_index", "1", "--end_index", "8",
            "--shuffle", "1", "--num_trials", "2", "--shard", "1/3"]
    assert main(argv) == 0
    header, records = load_result_file(output)
    assert header is not None
    run_args = header["run_args"]
    expected = Shard(1, 3).take(task_selection(1, 8, True, run_args["seed"]))
    assert run_args["shard"] == "1/3" and run_args["shard_plan"] == {"selected": 7, "task_ids": expected}
    assert run_args["start_index"] == 1 and run_args["num_trials"] == 2 and run_args["shuffle"] is True
    assert sorted((r["trial"], r["task_id"]) for r in records) == sorted((t, i) for t in (0, 1) for i in expected)
    report = validate_file(output)
    assert report.valid and "shard 1/3" in report.flags
    assert any("shard 1/3 of a run, not a whole run" in p.message for p in report.problems)


def test_shard_left_without_tasks_is_refused_before_anything_is_written(tiny_data_dir, tmp_path, capsys):
    output = tmp_path / "none.json"
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(output), "--end_index", "2", "--shard", "2/3"]) == 2
    assert "--shard 2/3: the 2 selected task(s) leave this shard none" in capsys.readouterr().err
    assert not output.exists()
