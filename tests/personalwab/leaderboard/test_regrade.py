"""Re-grading: the grader's version in every run, re-scoring stored trajectories exactly, the tasks a
scoring change moves, and the tools that refuse files of different graders until re-graded."""

from __future__ import annotations

import json

from PersonalWAB.envs.pwab import scoring
from PersonalWAB.leaderboard.__main__ import main
from PersonalWAB.leaderboard.regrade import regrade_file
from PersonalWAB.results import grader_mismatch
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run


def lenient_rank(target_asin, results):
    return 1.0 if any(target_asin in text for text in results) else 0.0


def lenient_review(embedder, review, target_review):
    return 1.0


def a_run(data_dir, path):
    return run(RunConfig(data_dir=str(data_dir), out=str(path), agent_memory="last", search_backend="bm25s",
                         end_index=8), log=lambda _: None)[1]


def test_the_digest_follows_the_scoring_code(monkeypatch):
    before = scoring.grader_version()
    assert scoring.grader_version() == before and len(before) == scoring.GRADER_DIGEST_CHARS
    monkeypatch.setattr(scoring, "rank_score", lenient_rank)
    assert scoring.grader_version() != before


def test_regrading_a_file_of_the_current_grader_changes_nothing(result_file, tiny_data, tmp_path, capsys):
    content, changes, old = regrade_file(result_file, tiny_data)
    original = json.loads(result_file.read_text())
    assert changes == [] and old == scoring.grader_version()
    assert [(r["action_acc"], r["res_acc"]) for r in content[1:]] == \
        [(r["action_acc"], r["res_acc"]) for r in original[1:]]
    assert content[0]["results"] == original[0]["results"]
    out = str(tmp_path / "re")
    assert main(["regrade", str(result_file), "--data_dir", str(tiny_data.data_dir), "--out", out]) == 0
    assert "0 of 3 record(s) changed" in capsys.readouterr().out
    assert main(["validate", str(tmp_path / "re" / result_file.name)]) == 0


def test_a_scoring_change_is_listed_and_compared_only_after_regrading(tiny_data_dir, tiny_engines, tmp_path,
                                                                     monkeypatch, capsys):
    old_file = a_run(tiny_data_dir, tmp_path / "old.json")
    old_version = scoring.grader_version()
    monkeypatch.setattr(scoring, "rank_score", lenient_rank)
    monkeypatch.setattr(scoring, "review_score", lenient_review)
    new_version = scoring.grader_version()
    new_file = a_run(tiny_data_dir, tmp_path / "new.json")
    capsys.readouterr()

    assert main(["compare", str(old_file), str(new_file)]) == 2
    refusal = capsys.readouterr().err
    assert old_version in refusal and new_version in refusal and "regrade" in refusal
    assert main(["summarize", str(old_file), str(new_file)]) == 2
    assert "grader" in capsys.readouterr().err

    assert main(["regrade", str(old_file), "--data_dir", str(tiny_data_dir), "--out", str(tmp_path / "re")]) == 0
    listing = capsys.readouterr().out
    regraded = json.loads((tmp_path / "re" / "old.json").read_text())
    original = json.loads(old_file.read_text())
    moved = [r["task_id"] for r, o in zip(regraded[1:], original[1:]) if r["res_acc"] != o["res_acc"]]
    assert moved and f"{len(moved)} of 8 record(s) changed" in listing
    assert all(f"task {task_id} (" in listing for task_id in moved)
    assert regraded[0]["run_args"]["regraded"] == {"from_grader_version": old_version, "changed_records": len(moved)}
    new = json.loads(new_file.read_text())
    assert [r["res_acc"] for r in regraded[1:]] == [r["res_acc"] for r in new[1:]]  # what the new grader gives
    assert main(["compare", str(tmp_path / "re" / "old.json"), str(new_file)]) == 0


def test_files_that_record_no_grader_are_not_judged():
    assert grader_mismatch([("a", {}), ("b", {"grader_version": "x"})]) is None
    assert "grader x" in grader_mismatch([("a", {"grader_version": "x"}), ("b", {"grader_version": "y"})])
