"""`--max_usd` is the budget of a whole run or reproduction: the tasks in flight at a stop are
kept, the printed command run again spends nothing more, a rerun after a kill pays for no answer
twice, and an amount that is not a finite number above 0 is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from PersonalWAB.reproduce.cli import main
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.budget import paid_usd
from PersonalWAB.runner.cli import main as run_main
from devtools.doubles.responders import instruction_of, tool_caller
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply

TASKS = 6


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def reproduce(server: ScriptedLLMServer, data_dir: Path, out: Path, *extra: str) -> int:
    return main(["--model", "openai/gpt-4o-mini", "--api_base", server.url, "--data_dir", str(data_dir),
                 "--rows", "none", "--out", str(out), "--end_index", str(TASKS), *extra])


def run(server: ScriptedLLMServer, data_dir: Path, *extra: str) -> int:
    return run_main(["--agent_strategy", "function_calling", "--model", "gpt-4o-mini", "--api_base", server.url,
                     "--data_dir", str(data_dir), "--end_index", str(TASKS), "--agent_memory", "none",
                     "--max_concurrency", "2", "--cache", "off", *extra])


def expensive(request: dict) -> ScriptedReply:
    """A million prompt tokens a call: $0.15 with gpt-4o-mini; slow enough that two are in flight."""
    reply = tool_caller(request)
    reply.prompt_tokens, reply.delay_s = 1_000_000, 0.3
    return reply


@pytest.mark.parametrize("command", [main, run_main])
@pytest.mark.parametrize("amount", ["nan", "inf", "-1", "0", "lots"])
def test_max_usd_must_be_a_finite_amount_above_zero(command, amount, capsys):
    with pytest.raises(SystemExit) as stopped:
        command(["--model", "openai/gpt-4o-mini", "--max_usd", amount])
    assert stopped.value.code == 2
    assert "argument --max_usd: expected" in capsys.readouterr().err


def test_a_stop_keeps_the_tasks_in_flight_and_its_resume_command_spends_nothing_more(tiny_engines, tiny_data_dir,
                                                                                       tmp_path, capsys):
    out = tmp_path / "run.json"
    with ScriptedLLMServer(expensive) as server:
        assert run(server, tiny_data_dir, "--out", str(out), "--max_usd", "0.4") == 4
        paid = list(server.requests)
    _, records = load_result_file(out)
    assert 3 <= len(records) < TASKS
    assert len(records) == len(paid)  # every answer paid for is kept, those in flight at the stop too
    assert paid_usd(records) == pytest.approx(0.15 * len(records), rel=0.01)
    captured = capsys.readouterr()
    assert "no more tasks start; the tasks in flight finish and are kept" in captured.out
    resume = captured.err.splitlines()[-1].split()
    assert resume[resume.index("--max_usd") + 1] == "0.4"
    with ScriptedLLMServer(expensive) as server:  # the printed resume command, run again
        assert run(server, tiny_data_dir, "--resume_from", str(out), "--max_usd", "0.4") == 2
        assert server.requests == []
    assert f"records kept from {out} already paid ${paid_usd(records):.4f}" in capsys.readouterr().err
    with ScriptedLLMServer(tool_caller) as server:
        assert run(server, tiny_data_dir, "--resume_from", str(out)) == 0
        assert len(server.requests) == TASKS - len(records)
    assert not set(map(instruction_of, paid)) & set(map(instruction_of, server.requests))


def test_a_budget_reached_by_the_first_task_starts_no_other_at_one_at_a_time(tiny_engines, tiny_data_dir, tmp_path,
                                                                             capsys):
    """The spend is counted as each task ends, before its worker takes the next: one task at a
    time, a budget the first task's calls reach lets no second task start (and pay)."""
    out = tmp_path / "run.json"
    with ScriptedLLMServer(expensive) as server:
        assert run(server, tiny_data_dir, "--out", str(out), "--max_usd", "1e-300", "--max_concurrency", "1") == 4
        assert len(server.requests) == 1
    assert len(load_result_file(out)[1]) == 1
    assert "the budget of $1e-300 is spent ($0.1500)" in capsys.readouterr().out


def test_a_reproduction_counts_what_its_files_paid(tiny_engines, tiny_data_dir, tmp_path, capsys):
    with ScriptedLLMServer(expensive) as server:
        assert reproduce(server, tiny_data_dir, tmp_path, "--max_usd", "0.4") == 4
        sent = len(server.requests)
    _, records = load_result_file(tmp_path / "singleturn" / "none.json")
    assert len(records) == sent
    with ScriptedLLMServer(expensive) as server:  # the printed command, run again
        assert reproduce(server, tiny_data_dir, tmp_path, "--max_usd", "0.4") == 2
        assert server.requests == []
    assert "paid by the result files under --out is above --max_usd 0.4" in capsys.readouterr().err


def test_a_rerun_after_a_kill_pays_for_no_answer_twice(tiny_engines, tiny_data_dir, tmp_path):
    with ScriptedLLMServer(tool_caller) as server:
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        assert len(server.requests) == TASKS
        assert (tmp_path / "cache" / "responses.sqlite3").is_file()  # the reproduction's own cache, by default
        row = tmp_path / "singleturn" / "none.json"
        header, records = load_result_file(row)
        row.unlink()  # killed after its answers arrived, before any checkpoint
        assert reproduce(server, tiny_data_dir, tmp_path) == 0
        assert len(server.requests) == TASKS  # nothing sent again
    rerun_header, rerun = load_result_file(row)
    assert rerun_header is not None and rerun_header["cache"]["hits"] == TASKS
    assert [r["traj"] for r in rerun] == [r["traj"] for r in records]
