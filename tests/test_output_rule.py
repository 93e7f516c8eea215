"""The one output rule (`PersonalWAB.outputs`), for every command that writes: an existing file
or folder the command did not write is refused without --overwrite, and one of its own inputs
always; each refusal is exit 2 with one line naming the flag and the path, and nothing is
replaced. A command writes over its own earlier output (the ledger, or its own record)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from PersonalWAB.outputs import LEDGER, written_by

FOREIGN = "precious, made by hand\n"


def _command(argv: list[str], monkeypatch) -> int:
    """A command's exit status, run as its `pwab` / `puma` / `python -m` form runs it (through
    run_command, which holds its claim on its outputs while it runs)."""
    from PersonalWAB.cli import run_command

    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))  # run, reproduce
    monkeypatch.setattr(sys, "argv", [argv[0]])
    if argv[0] == "pwab":
        from PersonalWAB.cli import main
    elif argv[0] == "puma":
        from PUMA.__main__ import main
    else:
        import importlib

        module = importlib.import_module(argv[0])
        return run_command(module.main, argv[1:])
    try:
        return main(argv[1:])
    except SystemExit as stop:
        return int(stop.code or 0)


def _snapshot(path: Path) -> dict[str, str]:
    """Every file under `path` (or `path` itself) with its digest."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory) -> Path:
    from PersonalWAB.data.synthetic import generate_synthetic

    out = tmp_path_factory.mktemp("raw")
    generate_synthetic(out, scale="tiny", seed=0, layout="raw")
    return out


# (command line with {out} for the output, what the output is) for every command with an output;
# {input} / {data} / {raw} / {result} / {model} are existing inputs
WRITERS = {
    "pwab run": ("pwab run --data_dir {data} --out {out}", "file"),
    "pwab data synthetic": ("pwab data synthetic --scale tiny --out {out}", "folder"),
    "pwab data download": ("pwab data download --out {out}", "folder"),
    "pwab data protocol": ("pwab data protocol --release_dir {raw} --out {out}", "file"),
    "pwab construct fetch": ("pwab construct fetch --out {out}", "folder"),
    "pwab construct build": ("pwab construct build --raw_dir {raw} --out {out}", "work/precious.txt"),
    "pwab construct consistency": ("pwab construct consistency --data_dir {data} --out {out}", "file"),
    "pwab construct stats": ("pwab construct stats --data_dir {data} --out {out}", "file"),
    "pwab leaderboard summarize": ("pwab leaderboard summarize {result} --out {out}", "file"),
    "pwab leaderboard compare": ("pwab leaderboard compare {result} {result} --out {out}", "file"),
    "pwab leaderboard export": ("pwab leaderboard export {result} --out {out}", "file"),
    "pwab leaderboard merge": ("pwab leaderboard merge {result} {result} --out {out}", "file"),
    "pwab leaderboard plot": ("pwab leaderboard plot {result} --out {out}", "type_accuracy_single_turn.png"),
    "pwab leaderboard report": ("pwab leaderboard report {result} --out {out}", "result.report.html"),
    "pwab leaderboard pack": ("pwab leaderboard pack {result} --out {out}", "result.submission.tar.gz"),
    "pwab leaderboard regrade": ("pwab leaderboard regrade {result} --data_dir {data} --out {out}", "result.json"),
    "pwab reproduce": ("pwab reproduce --model m --data_dir {data} --out {out}", "folder"),
    "pwab ablate": ("pwab ablate --data_dir {data} --out {out}", "folder"),
    "pwab audit": ("pwab audit --data_dir {data} --out {out}", "file"),
    "search index build": ("PersonalWAB.engines.search.build --data_dir {data} --backend bm25s --out {out}",
                           "folder"),
    "recommender train": ("PersonalWAB.engines.recommender.train --data_dir {data} --out {out}", "file"),
    "puma data": ("puma data all --data_dir {data} --out {out}", "folder"),
    "puma sft": ("puma sft --model_path {model} --out {out}", "folder"),
    "puma launch sft": ("puma launch sft -- --model_path {model} --out {out}", "folder"),
    "puma model prepare": ("puma model prepare smollm2-135m --out {out}", "folder"),
    "puma generate": ("puma generate --data_file {input} --out {out}", "file"),
    "puma score": ("puma score --candidates_file {input} --out {out}", "file"),
    "puma merge_shards": ("puma merge_shards {input} --out {out}", "file"),
    "puma dpo_data": ("puma dpo_data --scores_file {input} --out {out}", "file"),
    "puma merge": ("puma merge --adapter_path {model} --out {out}", "folder"),
    "puma dpo": ("puma dpo --model_path {model} --out {out}", "folder"),
    "puma grpo": ("puma grpo --model_path {model} --out {out}", "folder"),
    "puma fast_test": ("puma fast_test --function_file {input} --out {out}", "file"),
    "puma tiny_model": ("puma tiny_model --data_dir {data} --out {out}", "folder"),
}
# the input each command is given as its output (a command with no input has none to guard)
AS_INPUT = {"pwab run": ("pwab run --data_dir {data} --protocol_file {input} --out {input} --overwrite", "{input}"),
            "pwab data protocol": ("pwab data protocol --release_dir {raw} --out {raw} --overwrite", "{raw}"),
            "pwab construct build": ("pwab construct build --raw_dir {raw} --out {raw} --overwrite", "{raw}"),
            "pwab construct consistency": ("pwab construct consistency --data_dir {data} --out {data} "
                                           "--overwrite", "{data}"),
            "pwab construct stats": ("pwab construct stats --data_dir {data} --out {data} --overwrite", "{data}"),
            "pwab leaderboard summarize": ("pwab leaderboard summarize {input} --out {input} --overwrite",
                                           "{input}"),
            "pwab leaderboard compare": ("pwab leaderboard compare {result} {input} --out {input} --overwrite",
                                         "{input}"),
            "pwab leaderboard export": ("pwab leaderboard export {input} --out {input} --overwrite", "{input}"),
            "pwab leaderboard merge": ("pwab leaderboard merge {result} {input} --out {input} --overwrite",
                                       "{input}"),
            "pwab leaderboard plot": ("pwab leaderboard plot {input} --out {input} --overwrite", "{input}"),
            "pwab leaderboard report": ("pwab leaderboard report {input} --out {input} --overwrite", "{input}"),
            "pwab leaderboard pack": ("pwab leaderboard pack {input} --out {input} --overwrite", "{input}"),
            "pwab leaderboard regrade": ("pwab leaderboard regrade {input} --out {input} --overwrite", "{input}"),
            "pwab reproduce": ("pwab reproduce --model m --data_dir {data} --out {data} --overwrite", "{data}"),
            "pwab ablate": ("pwab ablate --data_dir {data} --out {data} --overwrite", "{data}"),
            "pwab audit": ("pwab audit {input} --out {input} --overwrite", "{input}"),
            "search index build": ("PersonalWAB.engines.search.build --data_dir {data} --backend bm25s --out {data} "
                                   "--overwrite", "{data}"),
            "recommender train": ("PersonalWAB.engines.recommender.train --data_dir {data} --out {data} "
                                  "--overwrite", "{data}"),
            **{name: (line.replace("{out}", "{input}" if kind == "file" else "{model}") + " --overwrite",
                      "{input}" if kind == "file" else "{model}")
               for name, (line, kind) in WRITERS.items() if name.startswith("puma") and name not in (
                   "puma data", "puma tiny_model", "puma model prepare")},  # the last reads no path
            "puma data": ("puma data all --data_dir {data} --out {data} --overwrite", "{data}"),
            "puma tiny_model": ("puma tiny_model --data_dir {data} --out {data} --overwrite", "{data}")}


@pytest.fixture()
def places(tmp_path, tiny_data_dir, raw_dir, result_file) -> dict[str, Path]:
    """The inputs a command line names: copies, so that a test may see them unchanged."""
    import shutil

    (tmp_path / "input.json").write_text(json.dumps({"an": "input"}))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    return {"data": Path(shutil.copytree(tiny_data_dir, tmp_path / "data", ignore=shutil.ignore_patterns(
                "cache", "indexes", "recommender"))),
            "raw": raw_dir, "result": result_file, "input": tmp_path / "input.json", "model": tmp_path / "model"}


def _line(template: str, places: dict[str, Path], out: Path) -> list[str]:
    return [word.format(out=out, **places) for word in template.split()]


def _refused(line: list[str], kept: Path, monkeypatch, capsys) -> str:
    """The one line a command refusing to write prints (exit 2), `kept` unchanged."""
    before = _snapshot(kept)
    assert _command(line, monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and str(kept) in err and "Traceback" not in err, err
    assert _snapshot(kept) == before
    return err


@pytest.mark.parametrize("name", WRITERS)
def test_no_command_replaces_an_output_it_did_not_write(name, places, tmp_path, monkeypatch, capsys):
    template, kind = WRITERS[name]
    if kind == "file":
        out = tmp_path / "made_by_hand.json"
        out.write_text(FOREIGN)
        foreign = out
    else:  # a folder of someone else's, or a file of someone else's where the command writes one
        out = tmp_path / "someone_elses"
        out.mkdir()
        foreign = out / ("precious.txt" if kind == "folder" else kind)
        foreign.parent.mkdir(parents=True, exist_ok=True)
        foreign.write_text(FOREIGN)
    assert "--overwrite" in _refused(_line(template, places, out), out, monkeypatch, capsys)
    assert foreign.read_text() == FOREIGN


@pytest.mark.parametrize("name", AS_INPUT)
def test_no_command_writes_over_its_own_input_even_with_overwrite(name, places, monkeypatch, capsys):
    template, target = AS_INPUT[name]
    target_path = Path(target.format(**places))
    _refused(_line(template, places, target_path), target_path, monkeypatch, capsys)


def test_every_writing_command_is_covered():
    from tests.test_command_help import COMMAND_LIST

    covered = {name.split(" -- ")[0] for name in WRITERS}
    writers = {name for name, _ in COMMAND_LIST if name.split()[0] in ("pwab", "puma")}
    without_output = {"pwab data validate", "pwab build", "pwab leaderboard validate", "puma run"}
    assert writers - without_output <= covered | {"puma launch"}, writers - without_output - covered


def test_a_command_writes_over_its_own_output_until_someone_changes_it(result_file, tmp_path, monkeypatch, capsys):
    result = result_file
    table = tmp_path / "board.md"
    line = ["pwab", "leaderboard", "summarize", str(result), "--out", str(table)]
    assert _command(line, monkeypatch) == 0 and table.read_text().startswith("#")
    assert (tmp_path / LEDGER).is_file()
    assert _command(line, monkeypatch) == 0  # its own: written again
    table.write_text(table.read_text() + "my notes\n")  # edited by hand: no longer the command's
    assert _command(line, monkeypatch) == 2
    assert "already exists and this command did not write it" in capsys.readouterr().err
    assert table.read_text().endswith("my notes\n")
    assert _command([*line, "--overwrite"], monkeypatch) == 0 and not table.read_text().endswith("my notes\n")
    # another command's output is not this one's
    assert _command(["pwab", "leaderboard", "compare", str(result), str(result), "--out", str(table)],
                    monkeypatch) == 2


def test_pages_are_written_again_but_not_over_a_file_of_someone_elses(result_file, tmp_path, monkeypatch, capsys):
    result = result_file
    pages = tmp_path / "pages"
    line = ["pwab", "leaderboard", "report", str(result), "--out", str(pages)]
    assert _command(line, monkeypatch) == 0 and _command(line, monkeypatch) == 0
    page = pages / "result.report.html"
    page.write_text(FOREIGN)
    assert _command(line, monkeypatch) == 2
    assert page.read_text() == FOREIGN and f"{page} already exists" in capsys.readouterr().err


def test_a_synthetic_folder_is_this_commands_when_it_holds_the_same_world(tmp_path, monkeypatch, capsys):
    from PersonalWAB.data.synthetic import generate_synthetic

    out = tmp_path / "world"
    generate_synthetic(out, scale="tiny", seed=0)  # as the bundled data was made: no ledger beside it
    before = _snapshot(out)
    assert _command(["pwab", "data", "synthetic", "--scale", "tiny", "--seed", "7", "--out", str(out)],
                    monkeypatch) == 2
    assert "holds files this command did not write" in capsys.readouterr().err and _snapshot(out) == before
    assert _command(["pwab", "data", "synthetic", "--scale", "tiny", "--out", str(out)], monkeypatch) == 0
    assert written_by(out, "PersonalWAB.data.synthetic.SyntheticSettings") and _snapshot(out) == before
