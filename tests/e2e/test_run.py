import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from PersonalWAB.agents.heuristic import HeuristicAgent
from PersonalWAB.metrics import compute_statistics
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.responders import tool_caller
from devtools.doubles.scripted_server import HoldingResponder, ScriptedLLMServer
from tests.conftest import HANG_GUARD_S, REPO_ROOT, wait_until


def config(data_dir, tmp_path, **overrides):
    values = {"data_dir": str(data_dir), "out": str(tmp_path / "result.json"), "agent_memory": "last"}
    values.update(overrides)
    return RunConfig(**values)


def scores(records):
    return {(r["trial"], r["task_id"]): (r["action_acc"], r["res_acc"]) for r in records}


def test_result_file_format_and_recomputable_header(tiny_data_dir, tiny_engines, tmp_path):
    header, path, _ = run(config(tiny_data_dir, tmp_path), log=lambda _: None)
    content = json.loads(path.read_text())
    assert set(content[0]) == {"run_args", "total cost", "results", "total user cost", "audit"}
    assert content[0]["run_args"]["data_source"].startswith("synthetic")
    assert content[0]["run_args"]["search_backend"] == "lucene"
    assert content[0]["run_args"]["protocol"] == {
        "texts": "project", "departures": ["agent_strategy heuristic: the project's offline agent, not in the release"],
        "standard": False}
    _, records = load_result_file(path)
    assert [r["task_id"] for r in records] == list(range(len(records)))
    assert compute_statistics(records) == header["results"]
    for record in records:
        assert set(record) == {"task_id", "action_acc", "res_acc", "info", "traj", "trial"}
        assert set(record["info"]) == {"task", "actions", "user_cost", "usage", "failure"}
        assert set(record["info"]["task"]) == {"user_id", "task", "type", "timestamp", "target"}
        assert all(0.0 <= x <= 1.0 for x in record["action_acc"] + record["res_acc"])
        assert record["traj"][1]["content"].startswith("USER ")
    assert header["results"]["overall"]["avg_action_acc"] > 0.9
    assert header["results"]["overall"]["avg_interaction_times"] == 1.0


def test_departures_are_recorded(tiny_data_dir, tiny_engines, tmp_path):
    from PersonalWAB.runner.labels import protocol_departures

    assert protocol_departures(config(tiny_data_dir, tmp_path, agent_strategy="function_calling")) == []
    departures = protocol_departures(config(tiny_data_dir, tmp_path, agent_strategy="function_calling",
                                            memory_length=50, search_backend="bm25s", leak_guard=True,
                                            user_mode="offline", max_steps=5))
    assert [d.split(" ")[0].rstrip(":") for d in departures] == ["memory_length", "search_backend", "user_mode",
                                                                "leak_guard"]
    assert protocol_departures(config(tiny_data_dir, tmp_path, agent_strategy="function_calling",
                                      agent_memory="none", memory_length=50)) == []  # no memory: length unused


def test_concurrency_gives_the_same_results(tiny_data_dir, tiny_engines, tmp_path):
    _, one, _ = run(config(tiny_data_dir, tmp_path, out=str(tmp_path / "one.json")), log=lambda _: None)
    _, four, _ = run(config(tiny_data_dir, tmp_path, out=str(tmp_path / "four.json"), max_concurrency=4),
                     log=lambda _: None)
    assert scores(load_result_file(one)[1]) == scores(load_result_file(four)[1])


def test_interrupted_run_resumes_each_task_exactly_once(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    solve = HeuristicAgent.solve
    calls = Counter()

    def interrupt_at_sixth(self, env, task_id):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return solve(self, env, task_id)

    monkeypatch.setattr(HeuristicAgent, "solve", interrupt_at_sixth)
    cfg = config(tiny_data_dir, tmp_path, end_index=20)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, log=lambda _: None)
    header, partial = load_result_file(cfg.out)
    assert header is None and len(partial) == 5
    monkeypatch.setattr(HeuristicAgent, "solve", solve)
    header, path, _ = run(config(tiny_data_dir, tmp_path, end_index=20, resume_from=cfg.out), log=lambda _: None)
    _, records = load_result_file(path)
    assert sorted(r["task_id"] for r in records) == list(range(20))
    assert header["results"]["overall"]["total_count"] == 20


def test_errored_tasks_are_recorded_and_retried(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    solve = HeuristicAgent.solve

    def fail_on_task_3(self, env, task_id):
        if task_id == 3:
            raise RuntimeError("rate limited")
        return solve(self, env, task_id)

    monkeypatch.setattr(HeuristicAgent, "solve", fail_on_task_3)
    cfg = config(tiny_data_dir, tmp_path, end_index=6)
    run(cfg, log=lambda _: None)
    _, records = load_result_file(cfg.out)
    errored = [r for r in records if "error" in r["info"]]
    assert [r["task_id"] for r in errored] == [3] and "rate limited" in errored[0]["info"]["error"]
    assert errored[0]["action_acc"] == []
    monkeypatch.setattr(HeuristicAgent, "solve", solve)
    run(config(tiny_data_dir, tmp_path, end_index=6, resume_from=cfg.out), log=lambda _: None)
    _, records = load_result_file(cfg.out)
    assert sorted(r["task_id"] for r in records) == list(range(6))
    assert not any("error" in r["info"] for r in records)


@pytest.mark.slow
def test_killed_process_resumes_each_task_exactly_once(tiny_data_dir, tiny_engines, tmp_path):
    """SIGKILL with tasks kept and calls in flight (the server holds every reply after the
    fifth until the process is dead), then the resume: every task exactly once."""
    held = HoldingResponder(tool_caller, answered=5)
    output = tmp_path / "killed.json"
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-only"}
    with ScriptedLLMServer(held) as server:
        command = [sys.executable, "run.py", "--data_dir", str(tiny_data_dir), "--task_split", "train",
                   "--out", str(output), "--agent_strategy", "function_calling", "--model", "scripted",
                   "--api_base", server.url, "--agent_memory", "none", "--max_concurrency", "3"]
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: held.holding > 0 and output.exists() and len(load_result_file(output)[1]) >= 2,
                       process, "two tasks were kept and a call was held")
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=HANG_GUARD_S)
        finally:
            process.kill()
            held.release()
        _, before = load_result_file(output)
        finished = subprocess.run(command + ["--resume_from", str(output)], cwd=REPO_ROOT, env=env,
                                  capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert process.returncode == -signal.SIGKILL
    assert finished.returncode == 0, finished.stderr
    header, records = load_result_file(output)
    ids = [r["task_id"] for r in records]
    assert len(ids) == len(set(ids)) == header["results"]["overall"]["total_count"]
    assert set(ids) == set(range(len(ids))) and 2 <= len(before) < len(ids)


def test_cli_prints_the_table_and_the_synthetic_note(tiny_data_dir, tiny_engines, tmp_path, capsys):
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(tmp_path / "cli.json"), "--end_index", "8"]) == 0
    printed = capsys.readouterr().out
    assert "Function Acc" in printed and "overall" in printed
    assert "not comparable to the paper" in printed


def test_cli_reports_bad_data_dir(tmp_path, capsys):
    assert main(["--data_dir", str(tmp_path / "none"), "--out", str(tmp_path / "x.json")]) == 2
    assert "data directory not found" in capsys.readouterr().err
