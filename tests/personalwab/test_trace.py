"""A run's trace (`run.py --trace_file`): every environment step in order, appended, never
replacing anything, and refused where it would write into the run's own files."""

from __future__ import annotations

import json

from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main


def events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_trace_holds_every_step_of_the_run_and_another_run_appends(tiny_data_dir, tiny_engines, tmp_path):
    out, trace = tmp_path / "r.json", tmp_path / "trace.jsonl"
    argv = ["--data_dir", str(tiny_data_dir), "--out", str(out), "--trace_file", str(trace), "--end_index", "3"]
    assert main(argv) == 0
    first = events(trace)
    assert first[0]["event"] == "run" and first[0]["split"] == "test"
    steps = [e for e in first if e["event"] == "step"]
    records = load_result_file(out)[1]
    assert sorted({s["task_index"] for s in steps}) == [0, 1, 2]
    for record in records:  # each task's steps are the actions its record lists, with their scores
        mine = [s for s in steps if s["task_index"] == record["task_id"]]
        assert [s["action"] for s in mine] == record["info"]["actions"]
        assert [s["res"] for s in mine][-1] == [record["action_acc"][-1], record["res_acc"][-1]]
        assert mine[-1]["done"] and isinstance(mine[-1]["observation"], str)
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(tmp_path / "r2.json"), "--trace_file", str(trace),
                 "--start_index", "5", "--end_index", "6"]) == 0
    again = events(trace)  # a second run appends its part after a run line of its own
    assert again[:len(first)] == first and again[len(first)]["event"] == "run"
    assert {e["task_index"] for e in again[len(first):] if e["event"] == "step"} == {5}


def test_a_trace_may_not_be_the_result_file_or_an_input(tiny_data_dir, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(out), "--trace_file", str(out)]) == 2
    assert "--trace_file" in capsys.readouterr().err and not out.exists()
    profiles = tiny_data_dir / "user_profiles.json"
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(out), "--trace_file", str(profiles)]) == 2
    assert "is inside this command's input folder (--data_dir" in capsys.readouterr().err
