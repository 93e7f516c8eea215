"""The commands README.md and docs/*.md show are commands of this code: each shell-block line
that runs `pwab`, `puma`, run.py, a `python -m` module, a script or a shell script of the
repository names a program, subcommand, module or script that exists, with flags (and literal
choice values) the command takes. The check reads each command's `--help` parsers, so a renamed
flag or moved module fails here, at the doc line, rather than in a reader's shell. A few cheap
doc commands also run, at tiny scale and offline, as the docs write them."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import HANG_GUARD_S, REPO_ROOT
from tests.doc_commands import Command, check, command_words, doc_command_lines, kind_of, split_line

DOC_LINES = doc_command_lines()


@pytest.mark.parametrize("doc_line", DOC_LINES, ids=[line.id for line in DOC_LINES])
def test_doc_command_is_one_the_code_takes(doc_line):
    problems = [f"{doc_line.id}: `{command}`: {problem}"
                for command in doc_line.commands for problem in check(command.words, dict(command.env))]
    assert not problems, "\n".join(problems)


def test_every_kind_of_doc_command_is_found():
    """The reader finds each kind of command the docs show (an empty list would pass the check above)."""
    kinds = Counter(kind_of(list(command.words)) for line in DOC_LINES for command in line.commands)
    assert set(kinds) == {"pwab", "puma", "run.py", "python -m", "python script", "shell script"}
    assert {line.doc for line in DOC_LINES} >= {"README.md", "docs/running.md", "docs/puma.md", "docs/leaderboard.md"}


def commands_of(text: str) -> list[str]:
    variables: dict[str, str] = {}
    return [str(command) for segment in split_line(text) for command in command_words(segment, variables)]


def test_the_reader_follows_the_shell():
    assert commands_of("pwab run --out a.json  # a comment --not_a_flag") == ["pwab run --out a.json"]
    assert commands_of("cd x && pwab data validate --data_dir D; echo done") == ["pwab data validate --data_dir D"]
    assert commands_of("python -m devtools.doubles serve --url_file F & kill %1") == [
        "python -m devtools.doubles serve --url_file F"]
    assert commands_of("for i in 0 1; do pwab run --shard $i/2; done") == ["pwab run --shard $i/2"]
    assert commands_of("STRATEGY=heuristic bash scripts/run_singleturn.sh --end_index 3") == [
        "STRATEGY=heuristic bash scripts/run_singleturn.sh --end_index 3"]
    assert commands_of("A='--data_dir D --end_index 4'; pwab run $A --out x.json; pwab run \"$A\"") == [
        "pwab run --data_dir D --end_index 4 --out x.json", "pwab run $A"]
    assert commands_of("srun bash -c 'NODE_RANK=1 bash PUMA/scripts/merge.sh --out M'") == [
        "NODE_RANK=1 bash PUMA/scripts/merge.sh --out M"]
    assert commands_of("pwab leaderboard summarize F [--format md|html|csv] --api_base <a server>") == [
        "pwab leaderboard summarize F [--format md|html|csv] --api_base <a server>"]
    assert commands_of("pip install x; git clone y; .venv/bin/python -m pytest -q; python -c 'import PUMA'") == []


@pytest.mark.parametrize("line, problem", [
    ("pwab run --agent_stratgy heuristic", "`pwab run` has no flag --agent_stratgy (did you mean --agent_strategy?)"),
    ("pwab run --output r.json", "--output is an old spelling of --out"),
    ("pwab leaderboard rank F", "`pwab leaderboard` has no command 'rank'"),
    ("python -m devtools serve --responder M:F", "devtools is a package without __main__.py"),
    ("python -m PersonalWAB.nowhere", "there is no module PersonalWAB.nowhere"),
    ("pwab data synthetic --scale huge", "--scale 'huge' is not one of its choices: tiny, small, medium, full"),
    ("pwab leaderboard summarize F --format md|xml", "--format 'xml' is not one of its choices"),
    ("pwab run --shuffle maybe", "--shuffle 'maybe' is not a value it takes"),
    ("pwab reproduce --model gpt-4o extra.json", "`pwab reproduce` takes no operands, got extra.json"),
    ("puma model prepare gpt-5 --out D", "`puma model prepare` name 'gpt-5' is not one of"),
    ("python -m PUMA.launch sft -- --lora_rank 8", "`python -m PUMA.sft` has no flag --lora_rank"),
    ("python scripts/nowhere.py", "there is no script scripts/nowhere.py"),
    ("bash scripts/run_singleturn.sh --end_idx 3", "`python run.py` has no flag --end_idx"),
    ("MEMORY=lastest bash scripts/run_singleturn.sh", "--agent_memory 'lastest' is not one of its choices"),
    ("bash scripts/serve_local_model.sh --port 1", "scripts/serve_local_model.sh passes no arguments on"),
])
def test_a_wrong_doc_command_is_named(line, problem):
    """The check can fail, and says what is wrong in words a doc's writer can act on."""
    (command,) = [command for segment in split_line(line) for command in command_words(segment, {})]
    found = check(command.words, dict(command.env))
    assert any(problem in text for text in found), found


# ---------------------------------------------------------------- doc commands that run


def doc_command(doc: str, starts: str) -> Command:
    """The one command of `doc` that starts with `starts`: what runs below is the doc's own line."""
    found = [command for line in DOC_LINES if line.doc == doc for command in line.commands
             if str(command).startswith(starts)]
    assert len(found) == 1, f"{doc} no longer shows one `{starts}...` command; make this test run its new one"
    return found[0]


def run_doc_command(command: Command, cwd: Path, replace: dict[str, list[str]] | None = None) -> str:
    """Run a doc's command in `cwd` as a reader in a checkout would (its relative paths land in
    `cwd`, a glob is expanded there), with the words in `replace` swapped for tmp paths or a
    smaller scale; its output. `pwab`/`puma` run as their `python -m` forms, with this checkout's code."""
    words: list[str] = []
    for word in command.words:
        if replace and word in replace:
            words += replace[word]
        elif "*" in word:
            words += sorted(glob.glob(word, root_dir=cwd)) or [word]
        else:
            words.append(word)
    program, rest = words[0].removeprefix(".venv/bin/"), words[1:]
    argv = {"pwab": [sys.executable, "-m", "PersonalWAB.cli"], "puma": [sys.executable, "-m", "PUMA"]}.get(program)
    if argv is None:
        assert kind_of(words) in ("run.py", "python -m", "python script"), f"not run here: {command}"
        argv = [sys.executable, *(str(REPO_ROOT / rest[0]) if rest[0].endswith(".py") else rest[0],), *rest[1:]]
        rest = []
    env = {**os.environ, **dict(command.env),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([*argv, *rest], cwd=cwd, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, f"`{command}` ran as {[*argv, *rest]}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def result_files(*paths: Path) -> None:
    from devtools.doubles.result_files import full_split_file

    for seed, path in enumerate(paths):
        path.parent.mkdir(parents=True, exist_ok=True)
        full_split_file(path, seed=seed, multi_turn=False)


def test_cheap_doc_commands_run(tmp_path):
    """The data, audit and leaderboard commands of the docs, as written, on tiny synthetic data
    and on result files made here (no run, no model, no network)."""
    assert "usage: puma STEP" in run_doc_command(doc_command("README.md", ".venv/bin/puma --help"), tmp_path)
    run_doc_command(doc_command("README.md", ".venv/bin/pwab data synthetic"), tmp_path, {"small": ["tiny"]})
    data = tmp_path / "data/synthetic/small"  # the docs' data folder, at tiny scale
    assert "valid" in run_doc_command(doc_command("docs/construct.md", "python -m PersonalWAB.data validate"),
                                      tmp_path, {"data/construct/pwab/data": [str(data)]})
    assert "test target products" in run_doc_command(
        doc_command("docs/audit.md", "pwab audit --data_dir data/synthetic/small"), tmp_path)
    result_files(tmp_path / "results/singleturn/a.json", tmp_path / "results/singleturn/b.json")
    shown = run_doc_command(doc_command("README.md", ".venv/bin/pwab leaderboard validate"), tmp_path,
                            {"FILE...": ["results/singleturn/a.json", "results/singleturn/b.json"]})
    assert shown.count("VALID") == 2
    assert "R. Acc" in run_doc_command(
        doc_command("docs/running.md", ".venv/bin/python -m PersonalWAB.leaderboard summarize"), tmp_path)


@pytest.mark.slow
def test_the_quick_start_runs_and_its_result_is_read_back(tmp_path):
    """README's quick start (synthetic data, the heuristic agent) at tiny scale, then the docs'
    validate, summarize, audit and compare commands on the result file it wrote."""
    run_doc_command(doc_command("README.md", ".venv/bin/pwab data synthetic"), tmp_path, {"small": ["tiny"]})
    run_doc_command(doc_command("README.md", ".venv/bin/pwab run --data_dir data/synthetic/small"), tmp_path)
    (result,) = (tmp_path / "results/singleturn").glob("*.json")  # the run's own name for it, under results/
    data = ["data/synthetic/small"]
    assert "VALID" in run_doc_command(doc_command("docs/running.md", ".venv/bin/python -m PersonalWAB.leaderboard "
                                                                      "validate"), tmp_path, {"DIR": data})
    assert "heuristic" in run_doc_command(doc_command("docs/running.md", ".venv/bin/python -m PersonalWAB."
                                                                           "leaderboard summarize"), tmp_path)
    run_doc_command(doc_command("docs/audit.md", "pwab audit results/run.json"), tmp_path,
                    {"results/run.json": [str(result.relative_to(tmp_path))]})
    result_files(tmp_path / "A.json", tmp_path / "B.json")
    run_doc_command(doc_command("docs/leaderboard.md", "python -m PersonalWAB.leaderboard compare A.json"), tmp_path)
    assert (tmp_path / "comparison.md").read_text().strip()
