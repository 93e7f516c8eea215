"""`pwab leaderboard merge`: the shards of a run joined hold the records of the run made in one
piece and validate; shards that would make a wrong file are refused, naming files and tasks."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from PersonalWAB.leaderboard.__main__ import main as leaderboard
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main as run

RANGE = ("--end_index", "7", "--num_trials", "2")


@pytest.fixture(scope="module")
def runs(tiny_data_dir, tiny_engines, tmp_path_factory) -> dict[str, Path]:
    """The offline agent's run of 7 tasks x 2 trials whole, in 2 shards, and shards of other splits and settings."""
    folder = tmp_path_factory.mktemp("shards")
    made = {"whole": (), "0of2": ("--shard", "0/2"), "1of2": ("--shard", "1/2"), "1of3": ("--shard", "1/3"),
            "1of2_seed7": ("--shard", "1/2", "--seed", "7")}
    for name, extra in made.items():
        assert run(["--data_dir", str(tiny_data_dir), "--out", str(folder / f"{name}.json"), *RANGE, *extra]) == 0
    return {name: folder / f"{name}.json" for name in made}


def merge(*argv: object) -> int:
    return leaderboard(["merge", *map(str, argv)])


def test_merged_shards_hold_the_whole_runs_records_and_validate(runs, tmp_path, capsys):
    out = tmp_path / "merged.json"
    assert merge(runs["1of2"], runs["0of2"], "--out", out) == 0
    assert "14 records of 2 shards" in capsys.readouterr().out
    whole_header, whole_records = load_result_file(runs["whole"])
    header, records = load_result_file(out)
    assert whole_header is not None and header is not None
    assert records == whole_records
    assert header["results"] == whole_header["results"] and header.get("trials") == whole_header.get("trials")
    differ = {key for key in {*header["run_args"], *whole_header["run_args"]}
              if header["run_args"].get(key) != whole_header["run_args"].get(key)}
    assert differ == {"out"} and header["run_args"]["shard"] is None
    report = validate_file(out)
    assert report.valid and not any(flag.startswith("shard") for flag in report.flags)


def _refusal(capsys, *argv: object) -> str:
    assert merge(*argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "\n" not in error
    return error


def test_overlapping_shards_are_refused_naming_files_and_tasks(runs, tmp_path, capsys):
    error = _refusal(capsys, runs["0of2"], runs["0of2"], "--out", tmp_path / "m.json")
    assert "0of2.json (0/2) and" in error and "overlap: both hold tasks 0, 2, 4, 6" in error
    assert not (tmp_path / "m.json").exists()


def test_missing_shard_is_refused_naming_its_tasks(runs, tmp_path, capsys):
    error = _refusal(capsys, runs["0of2"], "--out", tmp_path / "m.json")
    assert "missing shard(s) 1/2 (tasks 1, 3, 5)" in error


def test_shard_of_another_setting_is_refused_naming_it(runs, tmp_path, capsys):
    error = _refusal(capsys, runs["0of2"], runs["1of2_seed7"], "--out", tmp_path / "m.json")
    assert "1of2_seed7.json is a shard of another run" in error and "seed: 2024 in" in error


def test_shards_of_different_n_are_refused(runs, tmp_path, capsys):
    error = _refusal(capsys, runs["0of2"], runs["1of3"], "--out", tmp_path / "m.json")
    assert "parts of different splits into shards" in error and "(1/3)" in error


def test_a_whole_run_is_not_a_shard(runs, tmp_path, capsys):
    error = _refusal(capsys, runs["0of2"], runs["whole"], "--out", tmp_path / "m.json")
    assert "whole.json: not a shard" in error


def test_unfinished_shard_is_refused_with_the_resume_to_run(runs, tmp_path, capsys):
    content = json.loads(runs["1of2"].read_text())
    stopped = tmp_path / "stopped.json"  # what a killed shard leaves: a checkpoint of its finished tasks
    stopped.write_text(json.dumps([{"run_args": content[0]["run_args"], "unfinished": True}, *content[1:3]]))
    error = _refusal(capsys, runs["0of2"], stopped, "--out", tmp_path / "m.json")
    assert f"{stopped}: an unfinished shard (2 task(s) done" in error and f"--resume_from {stopped}" in error


def test_existing_out_is_kept_without_overwrite(runs, tmp_path, capsys):
    out = tmp_path / "m.json"
    out.write_text("precious")
    error = _refusal(capsys, runs["0of2"], runs["1of2"], "--out", out)
    assert "already exists; pass --overwrite" in error and out.read_text() == "precious"
    assert merge(runs["0of2"], runs["1of2"], "--out", out, "--overwrite", "1") == 0


def test_summarize_shows_a_shard_marked_as_one(runs):
    from PersonalWAB.leaderboard.summarize import summarize_files

    rows, _ = summarize_files([runs["0of2"]], None)
    assert "shard 0/2" in rows[0].flags and "partial split" in rows[0].flags


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_out_is_refused_and_kept(runs, tmp_path, capsys):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert merge(runs["0of2"], runs["1of2"], "--out", fifo, "--overwrite", "1") == 2
    assert "FIFO" in capsys.readouterr().err and stat.S_ISFIFO(fifo.stat().st_mode)
