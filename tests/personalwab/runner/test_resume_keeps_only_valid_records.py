"""--resume_from keeps a record only if `leaderboard validate` would accept it: a record whose
numbers validate refuses runs again, and the header written at the end is computed from the kept
records, so the finished file validates and its figures are the records' own."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.results import build_header, read_run_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run

SETTINGS: dict[str, Any] = {"agent_memory": "none", "search_backend": "bm25s", "end_index": 6}


@pytest.fixture(scope="module")
def finished(tiny_data_dir, tiny_engines, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resume_valid") / "finished.json"
    return run(RunConfig(data_dir=str(tiny_data_dir), out=str(out), **SETTINGS), log=lambda _: None)[1]


@pytest.mark.parametrize(("key", "value", "fault"), [
    ("action_acc", 0.5, "action_acc[0] = 0.5: function accuracy is 0 or 1"),
    ("action_acc", 7, "action_acc[0] = 7 is not a number in [0, 1]"),
    ("res_acc", 5.0, "res_acc[0] = 5.0 is not a number in [0, 1]"),
    ("res_acc", float("nan"), "res_acc[0] = nan is not a number in [0, 1]"),
    ("res_acc", "1", "res_acc[0] = '1' is not a number in [0, 1]"),
], ids=["action 0.5", "action 7", "score 5.0", "NaN score", "string score"])
def test_a_record_validate_refuses_runs_again(key, value, fault, finished, tiny_data_dir, tmp_path):
    content = json.loads(finished.read_text())
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
