"""What a command may write (`PersonalWAB.outputs`): an output it can write at all (not a FIFO, a
device or a folder, in a folder that can be made and written), named up front in one line by every
command, and never an input of the running command."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from PersonalWAB.errors import DataError
from PersonalWAB.outputs import command_scope, hold_inputs, output_problem
from PersonalWAB.scratch import atomic_write_text
from tests.conftest import make_fifo


def test_output_check_names_a_fifo_up_front(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path)
    assert output_problem(fifo, "--out") == f"--out {fifo}: is a FIFO (named pipe)"


# ---------------------------------------------------------------- outputs that cannot be written


@pytest.fixture()
def a_file(tmp_path):
    """A plain file standing where a command would need a folder."""
    path = tmp_path / "a_file"
    path.write_text("in the way")
    return path


def _cli(argv, monkeypatch):
    from PersonalWAB.cli import main

    monkeypatch.setattr(sys, "argv", ["pwab"])  # dispatch sets argv for the command's parser
    return main(argv)


@pytest.mark.parametrize("command, flag", [
    (["leaderboard", "summarize", "x.json", "--out", "{bad}/board.md"], "--out"),
    (["leaderboard", "compare", "a.json", "b.json", "--out", "{bad}/diff.txt"], "--out"),
    (["leaderboard", "plot", "x.json", "--out", "{bad}/plots"], "--out"),
    (["leaderboard", "report", "x.json", "--out", "{bad}/pages"], "--out"),
    (["leaderboard", "pack", "x.json", "--out", "{bad}/bundle"], "--out"),
    (["data", "synthetic", "--scale", "tiny", "--out", "{bad}/data"], "--out"),
    (["data", "protocol", "--release_dir", ".", "--out", "{bad}/pack.json"], "--out"),
    (["data", "download", "--out", "{bad}/data"], "--out"),
    (["construct", "build", "--raw_dir", ".", "--out", "{bad}/build"], "--out"),
    (["construct", "stats", "--data_dir", ".", "--out", "{bad}/stats.json"], "--out"),
    (["reproduce", "--model", "m", "--out", "{bad}/rows"], "--out"),
    (["run", "--out", "{bad}/result.json"], "--out"),
    (["run", "--log_dir", "{bad}/results"], "--log_dir"),
])
def test_every_pwab_command_names_an_output_under_a_file(command, flag, a_file, monkeypatch, capsys):
    argv = [part.replace("{bad}", str(a_file)) for part in command]
    # run and reproduce leave through os._exit after their own message
    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    try:
        code = _cli(argv, monkeypatch)
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2
    assert f"{flag} {a_file}/" in err and "Traceback" not in err


@pytest.mark.parametrize("step", ["sft", "merge", "dpo", "generate", "score", "dpo_data", "fast_test", "data",
                                  "tiny_model"])
def test_every_puma_step_names_an_output_under_a_file(step, a_file, monkeypatch, capsys):
    from PUMA.__main__ import main

    flag = "--out"
    argv = [step, *(["function"] if step == "data" else []), *(["--data_dir", "."] if step == "tiny_model" else []),
            flag, str(a_file / "out")]
    monkeypatch.setattr(sys, "argv", ["puma"])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {flag} {a_file / 'out'}: {a_file} is a file, so no folder can be made there" in err


def test_a_folder_without_write_permission_is_named(tmp_path, monkeypatch, capsys):
    if os.geteuid() == 0:
        pytest.skip("root may write into any folder, so there is no permission to be denied")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert _cli(["leaderboard", "plot", "x.json", "--out", str(locked / "plots")], monkeypatch) == 2
    finally:
        locked.chmod(0o700)
    assert f"cannot create or write files in {locked} (permission denied)" in capsys.readouterr().err


def test_output_problems(tmp_path, a_file):
    assert output_problem(tmp_path / "new" / "deeper" / "x.json", "--out") is None
    assert output_problem(tmp_path, "--out", folder=True) is None
    assert output_problem(tmp_path, "--out") == f"--out {tmp_path}: is a folder; name a file"
    assert output_problem(a_file, "--out", folder=True) == f"--out {a_file}: is a file, not a folder"


def test_the_writer_never_replaces_an_input_of_the_running_command(tmp_path):
    source = tmp_path / "input.json"
    source.write_text("kept")
    with command_scope():
        hold_inputs([("--candidates_file", source)])
        with pytest.raises(DataError, match=f"{source}: is this command's input \\(--candidates_file"):
            atomic_write_text(source, "replaced")
        atomic_write_text(tmp_path / "other.json", "written")
    assert source.read_text() == "kept"
    atomic_write_text(source, "outside a command nothing is held")
    assert source.read_text() == "outside a command nothing is held"


def test_the_ledger_names_a_command_by_its_module_also_when_run_as_main(tmp_path: Path):
    """`python -m PUMA.score` and `puma run` calling the step in its process are the same command."""
    import subprocess

    code = ("from PersonalWAB.outputs import command_name\n"
            "from dataclasses import dataclass\n"
            "@dataclass\nclass Settings:\n    pass\n"
            "print(command_name(Settings()))\n")
    module = tmp_path / "some_command.py"
    module.write_text(code)
    run = subprocess.run([sys.executable, "-m", "some_command"], cwd=tmp_path, capture_output=True, text=True,
                         check=True)
    assert run.stdout.strip() == "some_command.Settings"
