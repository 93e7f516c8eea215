"""`leaderboard compare` and the report's comparison section, on full-size synthetic result files
and hand-edited copies whose differences are known; and what compare may claim: runs of different
trial counts compared task by task over all their trials, tracks not mixed unless asked, and no
verdict for few tasks or a constant metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from PersonalWAB.leaderboard.__main__ import main
from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.leaderboard.compare import MIN_TASKS, NO_VARIATION, compare_files
from PersonalWAB.protocol.spec import RELEASE_PROTOCOL_DIGEST
from PersonalWAB.results import build_header
from devtools.doubles.result_files import full_split_file

FLIPPED = 30


def read(path: Path) -> list:
    return json.loads(Path(path).read_text())


def write(path: Path, content: list) -> Path:
    """The records with a header recomputed from them, as run.py writes a finished file."""
    Path(path).write_text(json.dumps([build_header(content[0]["run_args"], content[1:]), *content[1:]]))
    return Path(path)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("compare") / "base.json"
    full_split_file(path, seed=0, multi_turn=False)
    return path


@pytest.fixture(scope="module")
def flipped(base) -> tuple[Path, list[int]]:
    """A copy with the first 30 solved review tasks failed (action_acc and res_acc set to 0)."""
    content = read(base)
    ids = [r["task_id"] for r in content[1:] if r["info"]["task"]["type"] == "review" and is_solved(r)][:FLIPPED]
    for record in content[1:]:
        if record["task_id"] in ids:
            record["action_acc"] = [0.0] * len(record["action_acc"])
            record["res_acc"] = [0.0] * len(record["res_acc"])
    return write(base.with_name("flipped.json"), content), ids


def test_a_file_against_itself_differs_nowhere(base, capsys):
    (comparison,) = compare_files([base, base])
    assert comparison.matched == 2174 and comparison.only_baseline == comparison.only_other == 0
    assert [g.name for g in comparison.groups] == ["search", "recommend", "review", "overall"]
    for group in comparison.groups:
        assert not group.lost and not group.gained
        for row in group.metrics:
            assert row.difference == 0 and row.low <= 0 <= row.high and row.p_value in (1.0, None)
    assert main(["compare", str(base), str(base)]) == 0
    out = capsys.readouterr().out
    assert "total: 0 solved by the baseline only, 0 solved by the other only" in out
    assert "matched by task_id: 2174 tasks; unmatched: 0 only in the baseline, 0 only in the other" in out


def test_thirty_failed_review_tasks_are_the_flips_and_a_real_difference(base, flipped, capsys):
    path, ids = flipped
    (comparison,) = compare_files([base, path])
    groups = {g.name: g for g in comparison.groups}
    assert [key for key in groups["review"].lost] == ids
    assert all(not g.gained for g in comparison.groups)
    assert all(not groups[name].lost for name in ("search", "recommend"))
    assert len(groups["overall"].lost) == FLIPPED
    result = {row.label: row for row in groups["overall"].metrics}["Result Acc"]
    assert result.difference < 0 and result.high < 0  # the interval excludes 0
    assert result.p_value < 0.001
    review = {row.label: row for row in groups["review"].metrics}
    assert review["Function Acc"].difference == pytest.approx(-FLIPPED / 723)
    assert review["Avg Steps"].difference == 0 and review["Avg Steps"].p_value is None  # one step each: no test
    for name in ("search", "recommend"):  # untouched types: nothing differs
        assert all(row.difference == 0 and row.p_value in (1.0, None) for row in groups[name].metrics)

    assert main(["compare", str(base), str(path)]) == 0
    out = capsys.readouterr().out
    assert f"review: {FLIPPED} solved by the baseline only: {', '.join(map(str, ids))}" in out
    assert f"total: {FLIPPED} solved by the baseline only, 0 solved by the other only" in out
    assert "solved: Function Acc 1 and best Result Acc > 0" in out


def _edited(base: Path, name: str, edit) -> Path:
    content = read(base)
    edit(content[0]["run_args"])
    return write(base.with_name(name), content)


STANDARD = {"texts": "release@23ff65c", "departures": [], "standard": True}
# what this project records beside the settings (the digest: the pinned release texts')
PROJECT_FILE = {"project_version": "0.1.0", "data_source": "official", "protocol_texts_digest": RELEASE_PROTOCOL_DIGEST}
REFUSALS = {
    "split": (lambda args: args.update(task_split="train"), "task split 'test' vs 'train'"),
    "data": (lambda args: args.update(data_source="synthetic (seed 3)"), "data 'official' vs 'synthetic (seed 3)'"),
    "fingerprint": (lambda args: args.update(data_fingerprint="ffff"), "data fingerprint 'abcd' vs 'ffff'"),
    "protocol": (lambda args: args.update(protocol={"texts": "project", "departures": []}),
                 "standard vs custom protocol"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_files_of_other_tasks_or_protocol_are_refused_unless_forced(base, case, capsys):
    edit, difference = REFUSALS[case]
    baseline = _edited(base, f"baseline-{case}.json", lambda args: args.update(PROJECT_FILE, data_fingerprint="abcd",
                                                                               protocol=STANDARD))
    other = _edited(baseline, f"other-{case}.json", edit)
    assert main(["compare", str(baseline), str(other)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert captured.out == ""
    assert line == f"error: cannot compare {baseline} with {other}: {difference} (pass --force to compare anyway)"
    assert main(["compare", str(baseline), str(other), "--force"]) == 0
    assert f"compared despite: {difference} (--force)" in capsys.readouterr().out


def test_errored_and_missing_records_are_left_out_and_counted(base, tmp_path, capsys):
    content = read(base)
    for record in content[1:6]:
        record["info"]["error"] = "APIError: rate limited"
    content = content[:-10]  # 10 tasks never run
    other = write(tmp_path / "errored.json", content)
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps([{"run_args": content[0]["run_args"], "unfinished": True}, *content[1:101]]))
    (errored, unfinished) = compare_files([base, other, checkpoint])
    assert (errored.matched, errored.only_baseline, errored.only_other) == (2159, 15, 0)
    assert errored.other.errored == 5 and all(not g.lost and not g.gained for g in errored.groups)
    assert (unfinished.matched, unfinished.only_baseline) == (95, 2079)
    assert main(["compare", str(base), str(other), str(checkpoint)]) == 0
    out = capsys.readouterr().out
    assert f"other: {other} (function_calling, memory last (model-0); finished): 2164 records, 5 errored (left out)" \
        in out
    assert "unmatched: 15 only in the baseline, 0 only in the other" in out
    assert "unfinished run (checkpoint)" in out
    assert main(["compare", str(base)]) == 2
    assert main(["compare", str(base), str(tmp_path / "missing.json")]) == 2
    assert "missing.json: invalid result file: the file does not exist" in capsys.readouterr().err


def test_markdown_output_to_a_file(base, flipped, tmp_path, capsys):
    path, ids = flipped
    out = tmp_path / "comparison.md"
    assert main(["compare", str(base), str(path), "--format", "markdown", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    text = out.read_text()
    assert text.startswith(f"## {path} vs baseline {base}\n")
    assert "| type | tasks | metric | baseline | other | difference | 95% interval | p | verdict |" in text
    assert "| review | 723 | Function Acc | 0.942 | 0.900 | -0.041 |" in text
    assert f"- review: {FLIPPED} solved by the baseline only: {ids[0]}, " in text
    assert "paired sign-flip permutation test" in text


def test_report_holds_the_comparison_escaped(base, tmp_path, capsys):
    content = read(base)
    content[0]["run_args"]["model"] = "<i>model</i>"
    for record in content[1:]:
        if record["info"]["task"]["type"] == "search":
            record["res_acc"] = [0.0]
    other = write(tmp_path / "other.json", content)
    assert main(["report", str(other), "--compare", str(base), "--out", str(tmp_path / "pages")]) == 0
    capsys.readouterr()
    page = (tmp_path / "pages" / "other.report.html").read_text()
    section = page[page.index('<section id="comparison">'):page.index("</section>")]
    assert f"Comparison with the baseline {base}" in section
    assert "&lt;i&gt;model&lt;/i&gt;" in section and "<i>model" not in page
    assert "<td>search</td><td>694</td><td>Function Acc</td>" in section
    assert "search: " in section and "solved by the baseline only" in section
    assert page.count("<script") == 2 and "http://" not in page and "https://" not in page
    split = _edited(base, "train.json", lambda args: args.update(task_split="train"))
    assert main(["report", str(split), "--compare", str(base), "--out", str(tmp_path / "refused")]) == 2
    assert "task split 'test' vs 'train'" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()


# -- what compare may claim: trial counts, tracks, few tasks, constant metrics ----------------------------

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


def write_run(path: Path, records: list[dict], num_trials: int = 1, max_steps: int = -1) -> Path:
    run_args = {"agent_strategy": "heuristic", "agent_memory": "last", "task_split": "test", "num_trials": num_trials,
                "max_steps": max_steps, "data_source": "official", "project_version": "0"}
    path.write_text(json.dumps([build_header(run_args, records), *records]))
    return path


def test_two_trials_against_one_average_each_task_and_say_so(tmp_path, capsys):
    tasks = range(40)
    one = write_run(tmp_path / "one.json", [record(t, 0.5) for t in tasks])
    # trial 0 equals the baseline, trial 1 scores 1.0: a pairing by (task_id, trial) would drop trial 1
    two = write_run(tmp_path / "two.json", [record(t, 0.5) for t in tasks] + [record(t, 1.0, 1) for t in tasks], 2)
    (comparison,) = compare_files([one, two])
    assert comparison.matched == 40 and comparison.trials == (1, 2)
    result = {row.label: row for row in comparison.groups[-1].metrics}["Result Acc"]
    assert result.other == 0.75 and result.difference == 0.25
    assert main(["compare", str(one), str(two)]) == 0
    out = capsys.readouterr().out
    assert ("trials: up to 1 per task in the baseline and 2 in the other; each task's score is the mean over its "
            "trials in each run, so no trial is dropped") in out


def test_single_against_multi_turn_is_refused_unless_allowed(tmp_path, capsys):
    single = write_run(tmp_path / "single.json", [record(t, 0.5) for t in range(20)])
    multi = write_run(tmp_path / "multi.json", [record(t, 0.5) for t in range(20)], max_steps=10)
    assert main(["compare", str(single), str(multi)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (f"error: cannot compare {single} with {multi}: single-turn vs multi-turn track: "
                                    "the same task is another problem on each track (pass --allow_mixed_tracks 1 "
                                    "to compare anyway)")
    assert main(["compare", str(single), str(multi), "--allow_mixed_tracks", "1"]) == 0
    assert "compared despite: single-turn vs multi-turn track (--allow_mixed_tracks)" in capsys.readouterr().out


def test_a_few_tasks_get_no_interval_and_no_verdict(tmp_path, capsys):
    base = write_run(tmp_path / "base.json", [record(t, 0.0, steps=1) for t in range(3)])
    other = write_run(tmp_path / "other.json", [record(t, 1.0, steps=t + 2) for t in range(3)])
    (comparison,) = compare_files([base, other])
    steps = {row.label: row for row in comparison.groups[-1].metrics}["Avg Steps"]
    assert steps.tasks == 3 < MIN_TASKS and steps.verdict.startswith("too few tasks (3 < 10)")
    assert main(["compare", str(base), str(other)]) == 0
    out = capsys.readouterr().out
    assert "[+1.00, +1.00]" not in out and "too few tasks for the interval and test (< 10) in: review, overall" in out


def test_constant_metrics_have_no_test(tmp_path, capsys):
    """An agent that records no steps against one with a step per task: no 'p < 0.001'."""
    base = write_run(tmp_path / "base.json", [record(t, t % 3 / 2) for t in range(30)])
    custom = write_run(tmp_path / "custom.json", [record(t, t % 5 / 4, steps=0) for t in range(30)])
    (comparison,) = compare_files([base, custom])
    rows = {row.label: row for row in comparison.groups[-1].metrics}
    assert rows["Avg Steps"].p_value is None and rows["Avg Steps"].verdict == NO_VARIATION
    assert rows["Result Acc"].p_value is not None
    assert main(["compare", str(base), str(custom)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "Avg Steps" in line]
    assert len(lines) == 2 and all("<0.001" not in line and line.endswith(NO_VARIATION) for line in lines)
