"""Every command of the project, `pwab`'s and `puma`'s subcommands and the scripts, builds its
flags with the one settings system, and its `--help` explains every flag."""

from __future__ import annotations

import importlib
import re
import runpy
import sys
from pathlib import Path

import pytest

import PersonalWAB.settings as settings_module
from PersonalWAB.cli import COMMANDS
from PersonalWAB.settings import help_problems
from PUMA.__main__ import COMMANDS as PUMA_COMMANDS
from devtools.doubles.__main__ import COMMANDS as DEVTOOLS
from tests.conftest import REPO_ROOT


def leaf_commands(table: dict[str, tuple[str, str]], prefix: str) -> list[tuple[str, str]]:
    """(name, "module:function") of every command under a dispatch table, nested tables opened."""
    found = []
    for name, (target, _) in table.items():
        module = importlib.import_module(target.partition(":")[0])
        nested = getattr(module, "COMMANDS", None)
        if isinstance(nested, dict) and nested is not table and target.endswith(":main") \
                and all(isinstance(v, tuple) for v in nested.values()):
            found += leaf_commands(nested, f"{prefix} {name}")
        else:
            found.append((f"{prefix} {name}", target))
    return found


COMMAND_LIST = (leaf_commands(COMMANDS, "pwab") + leaf_commands(PUMA_COMMANDS, "puma")
                + leaf_commands(DEVTOOLS, "python -m devtools.doubles"))
# the scripts with flags (the release worker has none: it reads one JSON request); a package's
# __main__ is a dispatch table, whose commands are in COMMAND_LIST
SCRIPTS = sorted(path.relative_to(REPO_ROOT).as_posix() for folder in ("scripts", "scripts/tools", "devtools")
                 for path in (REPO_ROOT / folder).glob("*.py")
                 if "PersonalWAB.settings import" in path.read_text(encoding="utf-8")
                 and "__main__" in path.read_text(encoding="utf-8") and path.name != "__main__.py")


@pytest.fixture()
def parsers(monkeypatch) -> list:
    """The parsers the settings system builds while the test runs."""
    built = []
    original = settings_module.build_parser

    def recording(*classes, **options):
        parser = original(*classes, **options)
        built.append(parser)
        return parser

    monkeypatch.setattr(settings_module, "build_parser", recording)
    return built


SAYS_DEFAULT = re.compile(r"\(default\b|\bdefault:", re.IGNORECASE)


def option_blocks(text: str) -> dict[str, str]:
    """Each option's lines of a help, joined, by the option's first spelling."""
    blocks: list[str] = []
    for line in text.splitlines():
        if line.startswith("  -"):
            blocks.append(line)
        elif blocks and line.startswith("    "):
            blocks[-1] += " " + line.strip()
        elif not line.strip() or not line.startswith(" "):
            blocks.append("")  # a section title or blank line ends the option before it
    return {block.split()[0].rstrip(","): block for block in blocks if block}


def _help_of(call, parsers, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        call()
    assert stopped.value.code in (0, None)
    assert parsers, "the command built no parser with PersonalWAB.settings"
    problems = [problem for parser in parsers for problem in help_problems(parser)]
    assert problems == [], f"flags without help: {problems}"
    out = capsys.readouterr().out
    twice = [block for block in option_blocks(out).values() if len(SAYS_DEFAULT.findall(block)) > 1]
    assert twice == [], "a default shown twice"
    return out


@pytest.mark.parametrize("name, target", COMMAND_LIST, ids=[name for name, _ in COMMAND_LIST])
def test_every_command_explains_every_flag(name, target, parsers, capsys):
    module, _, function = target.partition(":")
    main = getattr(importlib.import_module(module), function)
    out = _help_of(lambda: main(["--help"]), parsers, capsys)
    assert "--config FILE.yaml" in out
    options = option_blocks(out)
    if name == "puma sft":
        assert "(default: 16)" in options["--lora_r"]
    if name == "pwab reproduce":
        assert "(default: 1)" in options["--max_concurrency"] and "None" not in options["--rows"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_explains_every_flag(script, parsers, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    _help_of(lambda: runpy.run_path(str(REPO_ROOT / script), run_name="__main__"), parsers, capsys)


def test_commands_were_found():
    names = {name for name, _ in COMMAND_LIST}
    assert {"pwab run", "pwab reproduce", "pwab leaderboard validate", "pwab data synthetic", "puma sft",
            "puma run"} <= names
    assert Path(REPO_ROOT / "scripts/tools/release_parity.py").relative_to(REPO_ROOT).as_posix() in SCRIPTS
