"""`python run.py` (`PersonalWAB.runner.cli`) and its exit status: 3 when tasks ended in an error,
130 on Ctrl-C or SIGTERM (even with calls in flight), 1 when the model refuses a request; each
keeps the finished tasks and prints the command that resumes the run. A run's name and tags reach
its header, --verbose shows each action, and the summary names the format errors."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from PersonalWAB.agents.heuristic import HeuristicAgent
from PersonalWAB.leaderboard.summarize import method_name
from PersonalWAB.results import load_result_file, read_run_file
from PersonalWAB.runner.cli import main
from devtools.doubles.responders import tool_caller
from devtools.doubles.scripted_server import HoldingResponder, ScriptedLLMServer, ScriptedReply
from tests.conftest import HANG_GUARD_S, REPO_ROOT, as_background_job, interrupt_heuristic_agent_at, llm_run, wait_until


def cli(data_dir, output, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), *extra]


def command_args(command: str) -> list[str]:
    """The run.py arguments of a printed `python run.py ...` command."""
    words = shlex.split(command.strip())
    return words[words.index("run.py") + 1:]


def printed_command(text: str) -> str:
    return next(line for line in text.splitlines() if "python run.py" in line)


# -- honest exit codes, errored tasks, Ctrl-C -----------------------------------------

def test_errored_tasks_exit_3_mark_their_rows_and_print_the_resume_command(tiny_data_dir, tiny_engines, tmp_path,
                                                                         monkeypatch, capsys):
    solve = HeuristicAgent.solve

    def fail_on_task_1(self, env, task_id):
        if task_id == 1:
            raise RuntimeError("the model service went away")
        return solve(self, env, task_id)

    monkeypatch.setattr(HeuristicAgent, "solve", fail_on_task_1)
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "4")) == 3
    captured = capsys.readouterr()
    assert next(line for line in captured.out.splitlines() if line.startswith("type")).endswith("errored")
    kind = load_result_file(output)[1][1]["info"]["task"]["type"]
    assert any(line.startswith(kind) and line.rstrip().endswith(" 1") for line in captured.out.splitlines())
    assert "1 task(s) ended in an error" in captured.err
    assert "tasks: 100%" in captured.err and "errors 1" in captured.err  # the progress bar
    monkeypatch.setattr(HeuristicAgent, "solve", solve)
    assert main(command_args(printed_command(captured.err))) == 0
    records = load_result_file(output)[1]
    assert [r["task_id"] for r in records] == list(range(4)) and not any("error" in r["info"] for r in records)


def test_interrupt_keeps_finished_tasks_and_prints_the_resume_command(tiny_data_dir, tiny_engines, tmp_path,
                                                                      monkeypatch, capsys):
    interrupt_heuristic_agent_at(monkeypatch, 3)
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "6", "--seed", "4")) == 130
    error = capsys.readouterr().err
    assert "interrupted: 3 of 6 task(s) finished and kept" in error and "Traceback" not in error
    command = printed_command(error)
    assert "--seed 4" in command and f"--resume_from {output}" in command
    monkeypatch.undo()  # the agent no longer interrupts
    assert main(command_args(command)) == 0
    assert [r["task_id"] for r in load_result_file(output)[1]] == list(range(6))


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.slow
def test_a_signal_stops_a_run_with_calls_in_flight(tiny_data_dir, tiny_engines, tmp_path, stop):
    """Ctrl-C and SIGTERM (a job scheduler's stop) alike: the finished tasks kept, the resume
    command printed, the lock released, no traceback. The run starts as a script's background
    job (SIGINT ignored), and the server holds every reply after the fourth, so the signal
    always arrives with tasks finished and calls in flight, however fast the machine."""
    held = HoldingResponder(tool_caller, answered=4)
    output = tmp_path / "r.json"
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-only"}
    with ScriptedLLMServer(held) as server:
        command = [sys.executable, "run.py", *cli(tiny_data_dir, output), "--agent_strategy", "function_calling",
                   "--model", "scripted", "--api_base", server.url, "--max_concurrency", "3",
                   "--agent_memory", "none"]
        process = subprocess.Popen(as_background_job(command), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: held.holding > 0 and output.exists() and len(load_result_file(output)[1]) >= 2,
                       process, "two tasks were kept and a call was held")
            process.send_signal(stop)
            _, error = process.communicate(timeout=HANG_GUARD_S)
        finally:
            held.release()
            process.kill()
    assert process.returncode == 130, error
    assert "interrupted: " in error and "Traceback" not in error and "--resume_from" in error
    parsed = read_run_file(output)
    assert parsed.header is None and len(parsed.records) >= 2
    assert not (tmp_path / "r.json.lock").exists()


@pytest.mark.parametrize("status", [401, 403, 400, 404])
def test_rejected_request_stops_the_run_at_once(tiny_data_dir, tiny_engines, tmp_path, monkeypatch, capsys, status):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    output = tmp_path / "r.json"
    with ScriptedLLMServer([ScriptedReply(status=status, content="no")]) as server:
        code = main(cli(tiny_data_dir, output, "--agent_strategy", "function_calling", "--model", "scripted",
                        "--api_base", server.url, "--agent_memory", "none", "--end_index", "6"))
    assert code == 1
    assert len(server.requests) == 1  # not retried, and no further task tried
    error = capsys.readouterr().err
    assert f"HTTP {status}" in error and "not retried" in error and "--resume_from" in error
    assert read_run_file(output).records == []  # nothing recorded as if the task had been tried


def test_run_summary_names_the_format_errors(tiny_data_dir, tiny_engines, tmp_path, capsys):
    with ScriptedLLMServer([ScriptedReply(tool_calls=[("search_product_by_query", '{"query": "unterm')])]) as server:
        assert main(llm_run(tiny_data_dir, tmp_path / "r.json", server.url, "--end_index", "2")) == 0
    shown = capsys.readouterr()
    assert "format errors: 2 of 2 task(s)" in shown.out
    assert "loading the model client (litellm)" in shown.err  # the seconds before the first request, shown


def test_name_tags_and_verbose_actions(tiny_data_dir, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["--data_dir", str(tiny_data_dir), "--out", str(out), "--end_index", "3", "--run_name", "baseline-a",
                 "--tag", "lr=1e-4", "--tag", "sweep=a", "--verbose", "1"]) == 0
    captured = capsys.readouterr()
    header = json.loads(out.read_text())[0]
    assert header["run_args"]["run_name"] == "baseline-a" and header["run_args"]["tag"] == ["lr=1e-4", "sweep=a"]
    assert method_name(header["run_args"], out) == "baseline-a: heuristic, memory last (offline) [lr=1e-4, sweep=a]"
    console = captured.out + captured.err
    assert "task 0 (" in console and "  -> " in console and "  <- tool: " in console
