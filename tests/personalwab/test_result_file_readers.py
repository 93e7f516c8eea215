"""One reader of result files: every command that reads a result file refuses an invalid one the
same way, with one line naming the file and its first error and exit status 2; the labels a file
carries are derived from its run_args, never taken as written.

Each bad file is built from a valid run of the offline agent on the tiny synthetic data.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from PersonalWAB.leaderboard.__main__ import main
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.runner.cli import main as run_main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run

RELEASE_PROTOCOL = {"texts": "release@23ff65c", "departures": [], "standard": True}


@pytest.fixture(scope="module")
def valid_run(tiny_data_dir, tiny_engines, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one_reader") / "valid.json"
    config = RunConfig(data_dir=str(tiny_data_dir), out=str(out), agent_memory="none", search_backend="bm25s",
                       end_index=6)
    return run(config, log=lambda _: None)[1]


def _record(index: int, key: str, value: Any) -> Callable[[list], list]:
    def edit(content: list) -> list:
        content[index][key] = [value]
        return content
    return edit


def _header_score(content: list) -> list:
    content[0]["results"]["overall"]["avg_res_acc"] += 0.1
    return content


def _run_args(change: Callable[[dict], dict]) -> Callable[[list], list]:
    def edit(content: list) -> list:
        content[0]["run_args"] = change(content[0]["run_args"])
        return content
    return edit


def _relabelled_texts(run_args: dict) -> dict:
    """The release's texts named, the project's digest left, the departures kept."""
    return {**run_args, "protocol": {**run_args["protocol"], "texts": "release@23ff65c"}}


# name: (edit of the valid file's parsed content, the first error every command names)
BAD_FILES: dict[str, tuple[Callable[[list], list], str]] = {
    "score 5.0": (_record(1, "res_acc", 5.0),
                  "record 1 (task_id 0, trial 0): res_acc[0] = 5.0 is not a number in [0, 1]"),
    "NaN score": (_record(1, "res_acc", float("nan")), "res_acc[0] = nan is not a number in [0, 1]"),
    "action 7": (_record(2, "action_acc", 7), "record 2 (task_id 1, trial 0): action_acc[0] = 7 is not a number"),
    "action 0.5": (_record(2, "action_acc", 0.5), "action_acc[0] = 0.5: function accuracy is 0 or 1"),
    "string score": (_record(3, "res_acc", "1"), "res_acc[0] = '1' is not a number in [0, 1]"),
    "header disagrees with its records": (_header_score, "record 0 (header): header results.overall.avg_res_acc"),
    "empty list": (lambda content: [], "the file holds no task records"),
    "header only": (lambda content: content[:1], "the file holds no task records"),
    "run_args cut to strategy and model": (
        _run_args(lambda args: {"agent_strategy": args["agent_strategy"], "model": args["model"]}),
        "record 0 (header): cannot derive label: run_args lacks env, user_mode"),
    "relabelled standard": (
        _run_args(lambda args: {**args, "protocol": RELEASE_PROTOCOL}),
        "run_args.protocol.standard is True but its texts and departures make the run custom"),
    "relabelled standard, an invented texts digest": (
        _run_args(lambda args: {**args, "protocol": {**RELEASE_PROTOCOL, "departures": ["agent_strategy heuristic: "
                                "the project's offline agent, not in the release"]},
                                "protocol_texts_digest": "0123456789abcdef"}),
        "run_args.protocol.standard is True but its texts and departures make the run custom"),
    "relabelled release texts, digest left": (
        _run_args(_relabelled_texts),
        "run_args.protocol.texts is 'release@23ff65c' but protocol_texts_digest"),
}


def _bad_file(valid_run: Path, tmp_path: Path, case: str) -> tuple[Path, str]:
    edit, message = BAD_FILES[case]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(edit(copy.deepcopy(json.loads(valid_run.read_text())))))
    return path, message


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_every_command_refuses_an_invalid_file_the_same_way(case, valid_run, tmp_path, capsys):
    bad, message = _bad_file(valid_run, tmp_path, case)
    assert main(["validate", str(bad)]) == 2
    out = capsys.readouterr().out
    assert any(message in line.replace("error: ", "") for line in out.splitlines())  # the same first error
    assert out.splitlines()[-1].startswith(f"{bad}: INVALID")

    pages = tmp_path / "pages"
    for argv in (["summarize", str(bad)], ["summarize", str(valid_run), str(bad), "--format", "csv"],
                 ["compare", str(valid_run), str(bad)], ["compare", str(bad), str(valid_run)],
                 ["report", str(bad), "--out", str(pages)], ["report", str(valid_run), "--compare", str(bad),
                                                             "--out", str(pages)],
                 ["plot", str(bad), "--out", str(tmp_path / "plots")], ["pack", str(bad), "--out", str(tmp_path)],
                 ["export", str(bad), "--out", str(tmp_path / "rows.csv")],
                 ["merge", str(bad), "--out", str(tmp_path / "merged.json")]):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        (line,) = captured.err.splitlines()
        assert line.startswith(f"error: {bad}: invalid result file: ") and message in line, (argv, line)
        assert captured.out == ""
    assert not pages.exists() and not (tmp_path / "plots").exists()
    assert not (tmp_path / "bad.submission.tar.gz").exists() and not (tmp_path / "rows.csv").exists()
    assert not (tmp_path / "merged.json").exists()


@pytest.mark.parametrize("case", ["run_args cut to strategy and model", "relabelled standard",
                                  "relabelled release texts, digest left"])
def test_resume_refuses_a_checkpoint_whose_labels_were_edited(case, valid_run, tiny_data_dir, tmp_path, capsys):
    edit, _ = BAD_FILES[case]
    content = edit(copy.deepcopy(json.loads(valid_run.read_text())))
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps([{"run_args": content[0]["run_args"], "unfinished": True}, *content[1:]]))
    before = checkpoint.read_bytes()
    assert run_main(["--data_dir", str(tiny_data_dir), "--agent_memory", "none", "--search_backend", "bm25s",
                     "--end_index", "6", "--resume_from", str(checkpoint)]) == 2
    err = capsys.readouterr().err
    assert f"{checkpoint}: cannot derive label" in err or f"{checkpoint} belongs to another run (protocol" in err
    assert checkpoint.read_bytes() == before


def test_markdown_shows_names_from_a_file_as_text(valid_run, tmp_path, capsys):
    content = json.loads(valid_run.read_text())
    content[0]["run_args"]["model"] = "<script>alert(1)</script>"
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(content))
    assert validate_file(evil).valid
    assert main(["summarize", str(evil), "--format", "md"]) == 0
    assert main(["compare", str(valid_run), str(evil), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "<script>" not in out and out.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2


def test_a_release_format_file_is_labelled_from_its_run_args(valid_run, tmp_path):
    content = json.loads(valid_run.read_text())
    args = content[0]["run_args"]
    release_keys = ("env", "model", "user_mode", "user_model", "agent_strategy", "agent_memory", "memory_length",
                    "task_split", "max_steps", "start_index", "end_index", "num_trials")
    content[0]["run_args"] = {**{key: args[key] for key in release_keys}, "agent_strategy": "function_calling"}
    release = tmp_path / "release.json"
    release.write_text(json.dumps(content))
    report = validate_file(release)
    assert report.valid and report.summary()["protocol"] == "standard" and "synthetic" not in report.flags
    content[0]["run_args"]["data_fingerprint"] = args["data_fingerprint"]  # this project's key, its version gone
    release.write_text(json.dumps(content))
    report = validate_file(release)
    assert not report.valid and "custom" in report.flags
    assert any("cannot derive label: run_args lacks project_version" in p.message for p in report.problems)


def test_a_data_source_other_than_the_fingerprinted_data_is_an_error(valid_run, tiny_data, tmp_path):
    content = json.loads(valid_run.read_text())
    content[0]["run_args"]["data_source"] = "official"
    official = tmp_path / "official.json"
    official.write_text(json.dumps(content))
    report = validate_file(official, tiny_data)
    assert not report.valid
    assert any(f"run_args.data_source is 'official' but the data it ran on (--data_dir, the same fingerprint) is "
               f"{tiny_data.source}" in p.message for p in report.problems)
