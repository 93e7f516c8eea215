"""Nothing lost, nothing silent: run.py's up-front checks, exit codes, resume safety and stops.

Each test reproduces a failure a hostile tester found (a setting that silently did
something else, a result file replaced or mixed with another run's, a missing key
retried for every task, an errored run exiting 0, Ctrl-C leaving a traceback) and
checks what happens now.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from datetime import datetime

import pytest

from PersonalWAB.agents.heuristic import HeuristicAgent
from PersonalWAB.results import load_result_file, read_run_file
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.responders import tool_caller
from devtools.doubles.scripted_server import HoldingResponder, ScriptedLLMServer, ScriptedReply
from tests.conftest import HANG_GUARD_S, REPO_ROOT, as_background_job, wait_until


def quiet(_: str) -> None:
    pass


def cli(data_dir, output, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), *extra]


def command_args(command: str) -> list[str]:
    """The run.py arguments of a printed `python run.py ...` command."""
    words = shlex.split(command.strip())
    return words[words.index("run.py") + 1:]


def printed_command(text: str) -> str:
    return next(line for line in text.splitlines() if "python run.py" in line)


@pytest.fixture()
def no_openai_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


# -- item 3: every setting is checked before any file is touched ----------------------------------

BAD_SETTINGS = [
    (["--max_steps", "0"], "--max_steps 0"),
    (["--max_steps", "-4"], "--max_steps -4"),
    (["--max_concurrency", "0"], "--max_concurrency 0"),
    (["--num_trials", "0"], "--num_trials 0"),
    (["--memory_length", "0"], "--memory_length 0 with --agent_memory last"),
    (["--temperature", "nan"], "--temperature nan"),
    (["--temperature", "inf"], "--temperature inf"),
    (["--start_index", "-2"], "--start_index -2"),
    (["--end_index", "-5"], "--end_index -5"),
    (["--start_index", "4", "--end_index", "4"], "--end_index 4"),
    (["--start_index", "100000"], "--start_index 100000"),
    (["--user_mode", "offline"], "add --max_steps N"),
    (["--user_mode", "naive", "--user_model", "gpt-4o-mini"], "add --max_steps N"),
    (["--max_steps", "5"], "needs a simulated user"),
    (["--model", "gpt-4o"], "--model gpt-4o is not used by --agent_strategy heuristic"),
    (["--agent_strategy", "function_calling"], "needs --model"),
    (["--resume_from", "/nonexistent/r.json"], "--resume_from /nonexistent/r.json: no such file"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_SETTINGS, ids=[" ".join(a) for a, _ in BAD_SETTINGS])
def test_bad_setting_exits_2_with_one_line_and_touches_nothing(tiny_data_dir, tmp_path, capsys, argv, message):
    output = tmp_path / "precious.json"
    output.write_text("precious")
    assert main(cli(tiny_data_dir, output, "--overwrite", *argv)) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and error.startswith("error: ") and "\n" not in error
    assert output.read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["precious.json"]


def test_unwritable_result_folder_is_refused_before_any_task(tiny_data_dir, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(cli(tiny_data_dir, blocker / "results" / "r.json")) == 2
    assert "a_file is a file, so no folder can be made there" in capsys.readouterr().err
    assert main(["--data_dir", str(tiny_data_dir), "--log_dir", str(blocker / "logs")]) == 2
    assert "--log_dir" in capsys.readouterr().err
    if os.geteuid() != 0:  # root writes into read-only folders, so only a normal user can see this refusal
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert main(cli(tiny_data_dir, locked / "r.json")) == 2
        assert "cannot create or write files" in capsys.readouterr().err


# -- item 2: result paths never collide or overwrite --------------------------------------------------

def test_existing_output_is_refused_unless_overwrite(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "r.json"
    output.write_text("[]")
    assert main(cli(tiny_data_dir, output, "--end_index", "3")) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert output.read_text() == "[]"
    assert main(cli(tiny_data_dir, output, "--end_index", "3", "--overwrite")) == 0
    assert len(load_result_file(output)[1]) == 3


def test_default_names_are_unique_per_run(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    class SameMinute(datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 1, 2, 3, 4)

    monkeypatch.setattr("PersonalWAB.runner.records.datetime", SameMinute)
    paths = [run(RunConfig(data_dir=str(tiny_data_dir), log_dir=str(tmp_path), seed=seed, end_index=3), log=quiet)[1]
             for seed in (1, 2, 3)]
    assert len(set(paths)) == 3 and paths[0].name.endswith("_01020304.json")
    assert [paths[0].with_name(paths[0].stem + suffix + ".json") for suffix in ("-2", "-3")] == paths[1:]
    assert [load_result_file(p)[0]["run_args"]["seed"] for p in paths] == [1, 2, 3]


# -- item 1: --resume_from keeps records only of the same run ----------------------------------------

@pytest.fixture()
def finished(tiny_data_dir, tiny_engines, tmp_path):
    output = tmp_path / "finished.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=5), log=quiet)
    return output


@pytest.mark.parametrize(("argv", "named"), [
    (["--agent_memory", "none"], "agent_memory"),
    (["--seed", "3"], "seed"),
    (["--end_index", "6"], "end_index"),
    (["--task_split", "train"], "task_split"),
    (["--memory_length", "7"], "memory_length"),
])
def test_resume_refuses_a_file_of_another_run_and_leaves_it(tiny_data_dir, finished, capsys, argv, named):
    before = finished.read_bytes()
    settings = {"--end_index": "5", **dict(zip(argv[::2], argv[1::2]))}
    argv = ["--data_dir", str(tiny_data_dir), "--resume_from", str(finished)]
    argv += [word for pair in settings.items() for word in pair]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "belongs to another run" in error and named in error
    assert finished.read_bytes() == before


def test_resume_refuses_a_file_run_on_other_data(tiny_data_dir, finished, tmp_path, capsys):
    other = tmp_path / "other_data"
    shutil.copytree(tiny_data_dir, other, ignore=shutil.ignore_patterns("indexes", "recommender", "cache"))
    part = sorted(other.glob("all_products_part_*.json"))[0]
    products = json.loads(part.read_text())
    first = next(iter(products))
    products[first]["title"] += " (edited)"
    part.write_text(json.dumps(products))
    before = finished.read_bytes()
    assert main(["--data_dir", str(other), "--resume_from", str(finished), "--end_index", "5"]) == 2
    assert "data_fingerprint" in capsys.readouterr().err
    assert finished.read_bytes() == before


def test_resume_of_a_headerless_file_checks_each_task(tiny_data_dir, finished, tmp_path, capsys):
    _, records = load_result_file(finished)
    old_format = tmp_path / "old.json"
    foreign = json.loads(json.dumps(records))
    foreign[2]["info"]["task"]["task"] = "an instruction of some other data set"
    old_format.write_text(json.dumps(foreign))
    assert main(["--data_dir", str(tiny_data_dir), "--resume_from", str(old_format), "--end_index", "5",
                 "--resume_headerless"]) == 2
    assert "task 2 trial 0 is not that task" in capsys.readouterr().err
    old_format.write_text(json.dumps(records[:3]))
    assert main(["--data_dir", str(tiny_data_dir), "--resume_from", str(old_format), "--end_index", "5",
                 "--resume_headerless"]) == 0
    assert "records no run settings" in capsys.readouterr().out
    assert [r["task_id"] for r in load_result_file(old_format)[1]] == list(range(5))


def test_duplicate_records_in_a_checkpoint_are_kept_once(tiny_data_dir, finished, tmp_path):
    header, records = load_result_file(finished)
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps([{"run_args": header["run_args"], "unfinished": True},
                                      records[0], records[1], records[0], records[1], records[0]]))
    run(RunConfig(data_dir=str(tiny_data_dir), resume_from=str(checkpoint), end_index=5), log=quiet)
    _, resumed = load_result_file(checkpoint)
    assert [r["task_id"] for r in resumed] == list(range(5))
    assert resumed[:2] == records[:2]


def test_a_checkpoint_names_its_run(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    solve = HeuristicAgent.solve

    def stop_at_third(self, env, task_id):
        if task_id == 2:
            raise KeyboardInterrupt
        return solve(self, env, task_id)

    monkeypatch.setattr(HeuristicAgent, "solve", stop_at_third)
    output = tmp_path / "r.json"
    with pytest.raises(KeyboardInterrupt):
        run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=5), log=quiet)
    parsed = read_run_file(output)
    assert parsed.header is None and parsed.run_args["end_index"] == 5 and len(parsed.records) == 2
    assert parsed.run_args["data_fingerprint"]


# -- items 9 and 10: honest exit codes, errored tasks, Ctrl-C -----------------------------------------

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
    solve = HeuristicAgent.solve

    def interrupt_at_task_3(self, env, task_id):
        if task_id == 3:
            raise KeyboardInterrupt
        return solve(self, env, task_id)

    monkeypatch.setattr(HeuristicAgent, "solve", interrupt_at_task_3)
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "6", "--seed", "4")) == 130
    error = capsys.readouterr().err
    assert "interrupted: 3 of 6 task(s) finished and kept" in error and "Traceback" not in error
    command = printed_command(error)
    assert "--seed 4" in command and f"--resume_from {output}" in command
    monkeypatch.setattr(HeuristicAgent, "solve", solve)
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


def test_stale_scratch_of_killed_runs_is_removed(tiny_data_dir, tiny_engines, tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale_file = tmp_path / f".r.json.{gone.pid}.tmp"
    stale_file.write_text("[")
    live_file = tmp_path / f".other.json.{os.getpid()}.tmp"
    live_file.write_text("[")
    stale_index = tiny_data_dir / "indexes" / "lucene" / f".0123abcd-4567ef.{gone.pid}.build-x1y2"
    (stale_index / "collection").mkdir(parents=True)
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(tmp_path / "r.json"), end_index=3), log=quiet)
    assert not stale_file.exists() and not stale_index.exists()
    assert live_file.exists()


# -- item 8: a missing or refused key stops the run at once -------------------------------------------

def test_missing_key_is_named_before_anything_runs(tiny_data_dir, tmp_path, no_openai_key):
    output = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    finished = subprocess.run([sys.executable, "run.py", *cli(tiny_data_dir, output), "--agent_strategy",
                               "function_calling", "--model", "gpt-4o-mini"],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert finished.returncode == 2
    assert "--model gpt-4o-mini needs OPENAI_API_KEY" in finished.stderr
    assert not output.exists()


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
