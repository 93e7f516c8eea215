"""A run exported as an Inspect log, read back with inspect_ai's own reader with every task and
message, and as Hugging Face .eval_results entries."""

from __future__ import annotations

import json

import yaml

from PersonalWAB.leaderboard.__main__ import main
from PersonalWAB.metrics import task_score


def test_the_inspect_log_holds_every_task_and_message(result_file, tmp_path):
    from inspect_ai.log import read_eval_log

    out = tmp_path / "run.eval"
    assert main(["export", str(result_file), "--format", "inspect", "--out", str(out)]) == 0
    log = read_eval_log(str(out))
    records = json.loads(result_file.read_text())[1:]
    assert log.status == "success" and log.eval.task == "personalwab/single-turn"
    assert log.eval.metadata["result_file"] == str(result_file)
    assert len(log.samples) == len(records)
    for sample, record in zip(log.samples, records):
        assert (sample.id, sample.epoch, sample.target) == (record["task_id"], record["trial"] + 1,
                                                            record["info"]["task"]["target"])
        assert [m.role for m in sample.messages] == [m["role"] for m in record["traj"]]
        assert [m.text for m in sample.messages] == [m["content"] or "" for m in record["traj"]]
        calls = [c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
        assert [c.function for c in calls] == [a["name"] for a in record["info"]["actions"]]
        assert sample.scores["result_acc"].value == task_score(record["action_acc"], record["res_acc"])[1]
        assert sample.metadata["failure"] == record["info"]["failure"]
    mean = log.results.scores[1].metrics["mean"].value
    assert mean == json.loads(result_file.read_text())[0]["results"]["overall"]["avg_res_acc"]


def test_eval_results_entries_follow_the_hub_format(result_file, tmp_path, capsys):
    out = tmp_path / ".eval_results" / "personalwab.yaml"
    assert main(["export", str(result_file), "--format", "eval_results", "--out", str(out)]) == 2
    assert "--dataset_id" in capsys.readouterr().err
    assert main(["export", str(result_file), "--format", "eval_results", "--out", str(out),
                 "--dataset_id", "org/personalwab"]) == 0
    entries = yaml.safe_load(out.read_text())
    header = json.loads(result_file.read_text())[0]
    overall = next(e for e in entries if e["dataset"]["task_id"] == "single-turn/overall/result_acc")
    assert overall["dataset"]["id"] == "org/personalwab"
    assert overall["value"] == round(header["results"]["overall"]["avg_res_acc"], 6)
    assert all(set(e) == {"dataset", "value", "notes"} for e in entries)


def test_one_run_formats_need_one_file_and_a_path(result_file, tmp_path, capsys):
    assert main(["export", str(result_file), str(result_file), "--format", "inspect", "--out",
                 str(tmp_path / "x.eval")]) == 2
    assert main(["export", str(result_file), "--format", "inspect", "--out", str(tmp_path / "x.txt")]) == 2
    assert "one result file" in capsys.readouterr().err
