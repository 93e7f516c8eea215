"""What `compare` may claim: runs of different trial counts are compared task by task over all
their trials, tracks are not mixed unless asked, few tasks and constant metrics get no verdict."""

from __future__ import annotations

import json
from pathlib import Path

from PersonalWAB.leaderboard.__main__ import main
from PersonalWAB.leaderboard.compare import MIN_TASKS, NO_VARIATION, compare_files
from PersonalWAB.leaderboard.summarize import Row, comparisons
from PersonalWAB.results import build_header


def record(task_id: int, res: float, trial: int = 0, steps: int = 1) -> dict:
    """A review task's record: the right function, best Result Acc `res`, `steps` model calls."""
    return {"task_id": task_id, "action_acc": [1.0], "res_acc": [res], "trial": trial,
            "info": {"task": {"user_id": "U1", "task": f"instruction {task_id}", "type": "review",
                              "timestamp": 0, "target": f"B{task_id:09d}"},
                     "actions": [{"name": "add_product_review", "arguments": {}}], "user_cost": 0.0,
                     "usage": {"completion_tokens": [1] * steps, "prompt_tokens": [1] * steps,
                               "total_tokens": [2] * steps, "completion_price": 0.0, "prompt_price": 0.0,
                               "total_price": 0.0}},
            "traj": []}


def write(path: Path, records: list[dict], num_trials: int = 1, max_steps: int = -1) -> Path:
    run_args = {"agent_strategy": "heuristic", "agent_memory": "last", "task_split": "test", "num_trials": num_trials,
                "max_steps": max_steps, "data_source": "official", "project_version": "0"}
    path.write_text(json.dumps([build_header(run_args, records), *records]))
    return path


def test_two_trials_against_one_average_each_task_and_say_so(tmp_path, capsys):
    tasks = range(40)
    one = write(tmp_path / "one.json", [record(t, 0.5) for t in tasks])
    # trial 0 equals the baseline, trial 1 scores 1.0: a pairing by (task_id, trial) would drop trial 1
    two = write(tmp_path / "two.json", [record(t, 0.5) for t in tasks] + [record(t, 1.0, 1) for t in tasks], 2)
    (comparison,) = compare_files([one, two])
    assert comparison.matched == 40 and comparison.trials == (1, 2)
    result = {row.label: row for row in comparison.groups[-1].metrics}["Result Acc"]
    assert result.other == 0.75 and result.difference == 0.25
    assert main(["compare", str(one), str(two)]) == 0
    out = capsys.readouterr().out
    assert ("trials: up to 1 per task in the baseline and 2 in the other; each task's score is the mean over its "
            "trials in each run, so no trial is dropped") in out


def test_single_against_multi_turn_is_refused_unless_allowed(tmp_path, capsys):
    single = write(tmp_path / "single.json", [record(t, 0.5) for t in range(20)])
    multi = write(tmp_path / "multi.json", [record(t, 0.5) for t in range(20)], max_steps=10)
    assert main(["compare", str(single), str(multi)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (f"error: cannot compare {single} with {multi}: single-turn vs multi-turn track: "
                                    "the same task is another problem on each track (pass --allow_mixed_tracks 1 "
                                    "to compare anyway)")
    assert main(["compare", str(single), str(multi), "--allow_mixed_tracks", "1"]) == 0
    assert "compared despite: single-turn vs multi-turn track (--allow_mixed_tracks)" in capsys.readouterr().out


def test_a_few_tasks_get_no_interval_and_no_verdict(tmp_path, capsys):
    base = write(tmp_path / "base.json", [record(t, 0.0, steps=1) for t in range(3)])
    other = write(tmp_path / "other.json", [record(t, 1.0, steps=t + 2) for t in range(3)])
    (comparison,) = compare_files([base, other])
    steps = {row.label: row for row in comparison.groups[-1].metrics}["Avg Steps"]
    assert steps.tasks == 3 < MIN_TASKS and steps.verdict.startswith("too few tasks (3 < 10)")
    assert main(["compare", str(base), str(other)]) == 0
    out = capsys.readouterr().out
    assert "[+1.00, +1.00]" not in out and "too few tasks for the interval and test (< 10) in: review, overall" in out


def test_constant_metrics_have_no_test(tmp_path, capsys):
    """An agent that records no steps against one with a step per task: no 'p < 0.001'."""
    base = write(tmp_path / "base.json", [record(t, t % 3 / 2) for t in range(30)])
    custom = write(tmp_path / "custom.json", [record(t, t % 5 / 4, steps=0) for t in range(30)])
    (comparison,) = compare_files([base, custom])
    rows = {row.label: row for row in comparison.groups[-1].metrics}
    assert rows["Avg Steps"].p_value is None and rows["Avg Steps"].verdict == NO_VARIATION
    assert rows["Result Acc"].p_value is not None
    assert main(["compare", str(base), str(custom)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "Avg Steps" in line]
    assert len(lines) == 2 and all("<0.001" not in line and line.endswith(NO_VARIATION) for line in lines)


def _row(name: str, score: float, bounds: tuple[float, float] | None) -> Row:
    trials = None if bounds is None else {"num_trials": 2, "results": {"overall": {
        key: {"ci95": list(bounds)} for key in ("avg_action_acc", "avg_res_acc")}}}
    stats = {"overall": {"avg_action_acc": score, "avg_res_acc": score}}
    return Row(name, Path(f"{name}.json"), "single-turn", "official", stats, 0.0, [], True, trials)


def test_summarize_claims_a_difference_only_between_intervals_with_width():
    flat = comparisons([_row("a", 0.8, (0.8, 0.8)), _row("b", 0.6, (0.6, 0.6))])
    assert all(note.endswith("not judged: the interval of a and b has no width (one trial, or trials that all "
                             "scored the same)") for note in flat)
    wide = comparisons([_row("a", 0.8, (0.75, 0.85)), _row("b", 0.6, (0.55, 0.65))])
    assert all(note.endswith("outside their 95% intervals") for note in wide)
    single = comparisons([_row("a", 0.8, (0.75, 0.85)), _row("b", 0.6, None)])
    assert all("the interval of b has no width" in note for note in single)
