"""`leaderboard export` and `load_dataframe`: one row per task x trial of a real run, in every
format, with the run's name, agent and memory and the scores the header is computed from."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from PersonalWAB.leaderboard.__main__ import main
from PersonalWAB.leaderboard.export import load_dataframe
from PersonalWAB.metrics import compute_statistics
from PersonalWAB.runner.cli import main as run_main

TASKS, TRIALS = 4, 2


@pytest.fixture(scope="module")
def two_trials(tiny_data_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "run.json"
    assert run_main(["--data_dir", str(tiny_data_dir), "--out", str(out), "--end_index", str(TASKS),
                     "--num_trials", str(TRIALS), "--run_name", "=cmd", "--tag", "sweep=a"]) == 0
    return out


def test_csv_has_a_row_per_task_and_trial(two_trials, tmp_path, capsys):
    out = tmp_path / "rows.csv"
    assert main(["export", str(two_trials), "--out", str(out)]) == 0
    assert capsys.readouterr().err.strip() == f"{TASKS * TRIALS} rows (1 file(s)) written to {out}"
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == TASKS * TRIALS
    assert sorted((int(r["task_id"]), int(r["trial"])) for r in rows) == [(t, k) for t in range(TASKS)
                                                                            for k in range(TRIALS)]
    first = rows[0]
    assert (first["run_name"], first["tags"], first["agent"], first["memory"]) == ("'=cmd", "sweep=a", "heuristic",
                                                                                   "last")
    assert json.loads(first["res_acc"]) and first["track"] == "single-turn"


def test_dataframe_and_jsonl_agree_with_the_header(two_trials, tmp_path, capsys):
    frame = load_dataframe([two_trials])
    assert len(frame) == TASKS * TRIALS
    header, *records = json.loads(two_trials.read_text())
    overall = compute_statistics(records)["overall"]
    assert frame["result_acc"].mean() == pytest.approx(overall["avg_res_acc"])
    assert frame["function_acc"].mean() == pytest.approx(overall["avg_action_acc"])
    assert frame["steps"].mean() == pytest.approx(overall["avg_interaction_times"])
    assert main(["export", str(two_trials), "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["result_acc"] for line in lines] == list(frame["result_acc"])


def test_parquet_written_or_refused_with_a_reason(two_trials, tmp_path, monkeypatch, capsys):
    assert main(["export", str(two_trials), "--format", "parquet"]) == 2
    assert "--format parquet writes a file: give --out PATH" in capsys.readouterr().err
    out = tmp_path / "rows.parquet"
    pytest.importorskip("pyarrow")
    assert main(["export", str(two_trials), "--format", "parquet", "--out", str(out)]) == 0
    import pandas as pd

    assert len(pd.read_parquet(out)) == TASKS * TRIALS
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert main(["export", str(two_trials), "--format", "parquet", "--out", str(out)]) == 2
    assert "needs the pyarrow package: pip install pyarrow" in capsys.readouterr().err


def test_rows_of_a_run_that_did_not_finish_say_so(two_trials, tmp_path, capsys):
    """A checkpoint (a run interrupted, stopped at --max_usd or killed) exports its finished tasks,
    each row marked as not the whole run's."""
    header, *records = json.loads(two_trials.read_text())
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps([{"run_args": header["run_args"], "unfinished": True}, *records[:3]]))
    out = tmp_path / "rows.csv"
    assert main(["export", str(two_trials), str(stopped), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert {r["run_finished"] for r in rows if r["file"] == str(two_trials)} == {"True"}
    assert [r["run_finished"] for r in rows if r["file"] == str(stopped)] == ["False"] * 3
