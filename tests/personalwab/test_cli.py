"""The `pwab` and `puma` commands: installed by scripts/setup.sh, each subcommand the same as its
`python -m` form."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from PersonalWAB.cli import COMMANDS, EXIT_INTERRUPTED, main as pwab, run_command
from tests.conftest import HANG_GUARD_S, REPO_ROOT

BIN = Path(sys.executable).parent


def test_pwab_lists_its_commands_and_refuses_an_unknown_one(capsys):
    assert pwab(["--help"]) == 0
    listing = capsys.readouterr().out
    assert all(f"  {name} " in listing for name in COMMANDS)
    assert pwab([]) == 2 and pwab(["nope"]) == 2 and "unknown command 'nope'" in capsys.readouterr().err


def test_every_command_names_a_callable():
    for name, (target, _) in COMMANDS.items():
        module, _, function = target.partition(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function)), name


def test_pwab_data_runs_the_data_command(tmp_path: Path, capsys):
    assert pwab(["data", "validate", "--data_dir", str(tmp_path)]) == 2  # an empty folder: named, exit 2
    assert str(tmp_path) in capsys.readouterr().err


@pytest.mark.parametrize("command", ["pwab", "puma"])
def test_console_scripts_installed_by_setup(command: str):
    script = BIN / command
    if not script.exists():
        pytest.skip(f"{script} is not installed: bash scripts/setup.sh installs the project")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0 and f"usage: {command} " in done.stdout


def test_pwab_run_help_is_run_py_help():
    own = subprocess.run([sys.executable, "-m", "PersonalWAB.cli", "run", "--help"], capture_output=True, text=True,
                         timeout=HANG_GUARD_S)
    script = subprocess.run([sys.executable, "run.py", "--help"], capture_output=True, text=True, timeout=HANG_GUARD_S,
                            cwd=REPO_ROOT)
    assert own.returncode == script.returncode == 0
    assert own.stdout.split("options:")[1] == script.stdout.split("options:")[1]
    assert own.stdout.count("\n  --") > 30


def commands_with_settings() -> list[list[str]]:
    """`pwab` command lines that end in a command of their own (run, reproduce, build, and
    each subcommand of data, construct and leaderboard)."""
    import importlib

    lines = [["run"], ["reproduce"], ["build"]]
    for name in ("data", "construct", "leaderboard"):
        table = importlib.import_module(COMMANDS[name][0].partition(":")[0]).COMMANDS
        lines += [[name, sub] for sub in table]
    return lines


@pytest.mark.parametrize("argv", commands_with_settings(), ids=" ".join)
def test_every_flag_of_every_pwab_command_has_help(argv, monkeypatch, capsys):
    import PersonalWAB.settings as settings

    parsers = []
    build_parser = settings.build_parser
    monkeypatch.setattr(settings, "build_parser", lambda *a, **k: parsers.append(build_parser(*a, **k)) or parsers[-1])
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit):
        pwab([*argv, "--help"])
    assert len(parsers) == 1 and settings.help_problems(parsers[0]) == []
    assert "--config FILE.yaml" in capsys.readouterr().out


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_ends_any_command_in_one_line_even_when_sigint_was_ignored(stop, capsys):
    """A script's background job inherits SIGINT ignored; a command still stops on it, says so in
    one line with exit 130, and leaves the handlers it found when it returns."""
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    term = signal.getsignal(signal.SIGTERM)
    reached_after_signal: list[bool] = []

    def command(argv: list[str] | None) -> int:
        signal.raise_signal(stop)
        reached_after_signal.append(True)
        return 0

    try:
        assert run_command(command, []) == EXIT_INTERRUPTED
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is term
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert not reached_after_signal
    assert capsys.readouterr().err == "interrupted\n"


def test_a_write_failure_escaping_a_command_is_one_line(capsys):
    def main(argv):
        raise PermissionError(13, "Permission denied", "/results/board.md")

    assert run_command(main, []) == 2
    assert capsys.readouterr().err == "error: /results/board.md: Permission denied\n"
