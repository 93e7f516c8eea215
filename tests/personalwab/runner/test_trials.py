"""Trials and their spread: `--num_trials 3` against the scripted server with a reply that depends
on the request's temperature; the header keeps the original fields (the 1-trial rules over all
records) and adds a `trials` section that `leaderboard validate` recomputes exactly."""

import copy
import io
import json
import math
import random
from contextlib import redirect_stdout

import pytest

from PersonalWAB.leaderboard.summarize import comparisons, render_csv, render_markdown, summarize_files
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.metrics import compute_statistics, task_score, trial_statistics
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main
from devtools.doubles.responders import instruction_of, sensible_call
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply

TASKS = 9
SEARCH = "search_product_by_query"


def sampling_model():
    """At temperature 0 the sensible call; above 0 a seeded draw sometimes calls the wrong function
    or shortens the search query, so trials differ."""
    draws = random.Random(11)

    def reply(request):
        instruction = instruction_of(request)
        name, arguments = sensible_call(instruction)
        if request["temperature"] > 0:
            roll = draws.random()
            if roll < 0.25:
                name, arguments = ((SEARCH, {"query": instruction}) if name != SEARCH else
                                   ("get_recommendations_by_history", {"product_sequence": []}))
            elif roll < 0.6 and name == SEARCH:
                arguments = {"query": " ".join(instruction.split()[:2])}
        return ScriptedReply(tool_calls=[(name, json.dumps(arguments))])

    return reply


@pytest.fixture(scope="module")
def trial_runs(tiny_data_dir, tiny_engines, tmp_path_factory):
    """Two 3-trial runs of function_calling on the same tasks: temperature 1.0 and 0.0."""
    out = tmp_path_factory.mktemp("trials")
    paths, printed = {}, {}
    with pytest.MonkeyPatch.context() as patch, ScriptedLLMServer(sampling_model()) as server:
        patch.setenv("OPENAI_API_KEY", "sk-test-trials")
        for temperature in ("1.0", "0.0"):
            paths[temperature] = out / f"t{temperature}.json"
            buffer = io.StringIO()
            with redirect_stdout(buffer):
                code = main(["--agent_strategy", "function_calling", "--model", "openai/scripted", "--api_base",
                             server.url, "--data_dir", str(tiny_data_dir), "--end_index", str(TASKS),
                             "--agent_memory", "none", "--num_trials", "3", "--temperature", temperature,
                             "--out", str(paths[temperature])])
            assert code == 0
            printed[temperature] = buffer.getvalue()
        temperatures = sorted({r["temperature"] for r in server.requests})
    assert temperatures == [0.0, 1.0]  # the model saw each run's temperature
    return paths, printed


def test_three_trials_keep_the_original_header_and_add_their_spread(trial_runs):
    paths, printed = trial_runs
    header, records = load_result_file(paths["1.0"])
    assert set(header) == {"run_args", "total cost", "results", "total user cost", "trials", "audit"}
    assert len(records) == 3 * TASKS and sorted({r["trial"] for r in records}) == [0, 1, 2]
    assert header["results"] == compute_statistics(records)  # the original fields: 1-trial rules over all records
    assert header["results"]["overall"]["total_count"] == 3 * TASKS
    trials = header["trials"]
    assert trials["num_trials"] == 3
    overall = trials["results"]["overall"]
    for key in ("avg_action_acc", "avg_res_acc", "avg_interaction_times"):
        per_trial = [compute_statistics([r for r in records if r["trial"] == t])["overall"][key] for t in range(3)]
        assert overall[key]["per_trial"] == per_trial
        mean, std = sum(per_trial) / 3, math.sqrt(sum((v - sum(per_trial) / 3) ** 2 for v in per_trial) / 2)
        assert overall[key]["mean"] == pytest.approx(mean) and overall[key]["std"] == pytest.approx(std)
        half = 4.30265273 * std / math.sqrt(3)
        upper = 1.0 if key != "avg_interaction_times" else math.inf
        assert overall[key]["ci95"] == pytest.approx([max(0.0, mean - half), min(upper, mean + half)])
    assert overall["avg_res_acc"]["std"] > 0  # sampling at temperature 1 made the trials differ
    scores = {}
    for record in records:
        scores.setdefault(record["task_id"], []).append(task_score(record["action_acc"], record["res_acc"]))
    assert overall["tasks"] == TASKS
    assert overall["function_pass^k"]["pass^3"] == pytest.approx(
        sum(all(s[0] == 1 for s in v) for v in scores.values()) / TASKS)
    assert overall["result_identical"] == pytest.approx(
        sum(len({s[1] for s in v}) == 1 for v in scores.values()) / TASKS)
    assert overall["function_pass^k"]["pass^1"] == pytest.approx(header["results"]["overall"]["avg_action_acc"])
    assert "Across 3 trials" in printed["1.0"] and "pass^3" in printed["1.0"]


def test_greedy_trials_agree(trial_runs):
    header, _ = load_result_file(trial_runs[0]["0.0"])
    overall = header["trials"]["results"]["overall"]
    assert overall["avg_res_acc"]["std"] == 0 and overall["result_identical"] == 1.0
    assert overall["avg_res_acc"]["ci95"][0] == overall["avg_res_acc"]["ci95"][1]


def test_validate_recomputes_the_spread_exactly(trial_runs, tiny_data, tmp_path):
    path = trial_runs[0]["1.0"]
    report = validate_file(path, tiny_data)
    content = json.loads(path.read_text())
    assert report.valid and report.trials == content[0]["trials"]
    assert report.trials == trial_statistics(content[1:], 3, content[0]["run_args"]["solved_threshold"])

    tampered = copy.deepcopy(content)
    tampered[0]["trials"]["results"]["overall"]["avg_res_acc"]["std"] /= 2
    tampered[0]["trials"]["results"]["search"]["function_pass^k"]["pass^3"] = 1.5
    (tmp_path / "tampered.json").write_text(json.dumps(tampered))
    errors = [p.message for p in validate_file(tmp_path / "tampered.json").problems if p.severity == "error"]
    assert len(errors) == 2
    assert errors[0].startswith("header trials.results.search.function_pass^k.pass^3 = 1.5 but the records give")
    assert errors[1].startswith("header trials.results.overall.avg_res_acc.std = ")

    older = copy.deepcopy(content)
    del older[0]["trials"]  # a file of the release's format (or an older version): valid, with a warning
    (tmp_path / "older.json").write_text(json.dumps(older))
    report = validate_file(tmp_path / "older.json")
    assert report.valid and any("has no 'trials'" in p.message for p in report.problems)
    assert report.trials == content[0]["trials"]


def test_summarize_shows_intervals_and_says_when_a_difference_is_inside_them(trial_runs):
    paths, _ = trial_runs
    rows, _ = summarize_files([paths["1.0"], paths["0.0"]], ["sampled", "greedy"])
    notes = comparisons(rows)
    assert len(notes) == 2 and all(n.startswith("#1 ") and " vs #2 " in n for n in notes)
    for note, key in zip(notes, ("avg_action_acc", "avg_res_acc")):
        (low_a, high_a), (low_b, high_b) = rows[0].interval("overall", key), rows[1].interval("overall", key)
        inside = max(low_a, low_b) <= min(high_a, high_b)
        flat = high_a <= low_a or high_b <= low_b
        assert note.endswith("inside their 95% intervals: not a reliable difference" if inside else
                             "all scored the same)" if flat else "outside their 95% intervals")
    table = render_markdown(rows)
    sampled = next(r for r in rows if r.name == "sampled")
    half = (sampled.interval("overall", "avg_res_acc")[1] - sampled.interval("overall", "avg_res_acc")[0]) / 2
    assert f"{sampled.score('overall', 'avg_res_acc'):.3f} ± {half:.3f}" in table
    assert all(f"- {note}" in table for note in notes)
    csv_text = render_csv(rows)
    assert "overall_r_acc_ci95_low" in csv_text.splitlines()[0] and ",3," in csv_text
