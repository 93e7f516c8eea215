"""Every `run.py` setting checked before any file is touched or any work starts
(`PersonalWAB.runner.checks`): a bad setting, a result folder that cannot be written, an output
already there, a result path that is not a regular file, an endpoint that is not an http URL and a
missing key each stop the run with exit 2 and one line, and nothing is touched; trials at
temperature 0 are warned."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from PersonalWAB.results import load_result_file
from PersonalWAB.runner.checks import setting_warnings
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from tests.conftest import HANG_GUARD_S, REPO_ROOT, llm_run


def cli(data_dir, output, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), *extra]


@pytest.fixture()
def no_openai_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


# -- every setting is checked before any file is touched ----------------------------------

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


# -- result paths never collide or overwrite --------------------------------------------------

def test_existing_output_is_refused_unless_overwrite(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "r.json"
    output.write_text("[]")
    assert main(cli(tiny_data_dir, output, "--end_index", "3")) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert output.read_text() == "[]"
    assert main(cli(tiny_data_dir, output, "--end_index", "3", "--overwrite")) == 0
    assert len(load_result_file(output)[1]) == 3


# -- a missing or refused key stops the run at once -------------------------------------------

def test_missing_key_is_named_before_anything_runs(tiny_data_dir, tmp_path, no_openai_key):
    output = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    finished = subprocess.run([sys.executable, "run.py", *cli(tiny_data_dir, output), "--agent_strategy",
                               "function_calling", "--model", "gpt-4o-mini"],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert finished.returncode == 2
    assert "--model gpt-4o-mini needs OPENAI_API_KEY" in finished.stderr
    assert not output.exists()


# -- where a result may be written -----------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--out", "--resume_from"])
@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "proc"])
def test_a_target_that_is_not_a_regular_file_is_refused(flag, kind, tiny_data_dir, fifo, tmp_path, capsys):
    target, reason = {"device": ("/dev/null", "is a device"), "fifo": (fifo, "is a FIFO"),
                      "folder": (tmp_path, "is a folder"),
                      "proc": ("/proc/self/status", "is a kernel file under /proc")}[kind]
    assert main(["--data_dir", str(tiny_data_dir), flag, str(target)]) == 2
    assert f"{flag} {target}: {reason}" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("flag, value", [("--api_base", "localhost:8000"), ("--api_base", "ftp://host/v1"),
                                         ("--api_base", "http://"), ("--user_api_base", "127.0.0.1:8000/v1")])
def test_api_base_must_be_an_http_url(tiny_data_dir, tmp_path, capsys, flag, value):
    output = tmp_path / "r.json"
    extra = ["--max_steps", "3", "--user_mode", "naive", "--user_model", "u"] if flag == "--user_api_base" else []
    argv = llm_run(tiny_data_dir, output, "http://127.0.0.1:1/v1", *extra, flag, value)
    assert main(argv) == 2
    assert f"{flag} {value!r}: must be an http:// or https:// URL" in capsys.readouterr().err
    assert not output.exists()


def test_trials_at_temperature_zero_are_warned():
    (warning,) = setting_warnings(RunConfig(model="gpt-4o-mini", num_trials=2))
    assert warning.startswith("--num_trials 2 at --temperature 0: greedy sampling")
    assert setting_warnings(RunConfig(model="gpt-4o-mini", num_trials=2, temperature=1.0)) == []
    assert setting_warnings(RunConfig(model="gpt-4o-mini")) == []
