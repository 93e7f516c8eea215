"""Leaderboard tools on real result files (tiny synthetic runs) and hand-edited copies."""

from __future__ import annotations

import copy
import csv
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
from PersonalWAB.errors import DataError
from PersonalWAB.leaderboard.__main__ import main
from PersonalWAB.leaderboard.analysis import action_sequence, attempt_profile, transition_matrices
from PersonalWAB.leaderboard.pack import pack_file
from PersonalWAB.leaderboard.report import render_report
from PersonalWAB.leaderboard.summarize import (Row, comparisons, id_ranges, render_csv, render_html, render_markdown,
                                               summarize_files, tables)
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.results import build_header
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.result_files import full_split_file



RELEASE_RUN_ARGS = ("num_trials", "env", "model", "user_mode", "user_model", "agent_strategy", "temperature",
                    "task_split", "agent_memory", "memory_length", "max_steps", "start_index", "end_index",
                    "resume_from", "verbose", "log_dir", "num_gpus", "max_concurrency", "seed", "shuffle",
                    "interec_memory_file", "puma_param_file", "puma_function_file", "puma_generate",
                    "puma_model_path", "mem_token_length")  # the flags of the release's run.py


def read(path: Path) -> list:
    return json.loads(Path(path).read_text())


def write(path: Path, content: list) -> Path:
    Path(path).write_text(json.dumps(content, indent=2))
    return Path(path)


def rebuilt(content: list) -> list:
    """The same file with a header recomputed from its (edited) records."""
    return [build_header(content[0]["run_args"], content[1:]), *content[1:]]


def multi_turn_copy(content: list) -> list:
    """A multi-turn file made from a single-turn one: 1-3 attempts per task, a respond, then stop."""
    records = []
    for record in copy.deepcopy(content[1:]):
        n = 1 + record["task_id"] % 3
        first = record["res_acc"][0] if record["res_acc"] else 0.0
        action = record["info"]["actions"][0]
        record["action_acc"] = [1.0] * n
        record["res_acc"] = [min(1.0, first * (0.6 + 0.2 * k)) for k in range(n)]
        traj = record["traj"][:2] + [{"role": "assistant", "content": "Which brand do you prefer?"},
                                     {"role": "user", "content": "The usual one."}]
        for k in range(n):
            traj += [{"role": "assistant", "content": None, "tool_calls": [{
                         "id": f"c{k}", "type": "function",
                         "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])}}]},
                     {"role": "tool", "tool_call_id": f"c{k}", "name": action["name"], "content": f"results {k}"},
                     {"role": "user", "content": "Try again." if k < n - 1 else "Thanks!"}]
        traj.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": "s", "type": "function", "function": {"name": "stop", "arguments": "{}"}}]})
        record["traj"] = traj
        record["info"]["actions"] = [action] * n + [{"name": "stop", "arguments": {}}]
        steps = n + 2
        record["info"]["usage"].update(completion_tokens=[5] * steps, prompt_tokens=[50] * steps,
                                       total_tokens=[55] * steps, completion_price=0.001 * steps,
                                       prompt_price=0.002 * steps, total_price=0.003 * steps)
        record["info"]["user_cost"] = 0.0005
        records.append(record)
    run_args = {**content[0]["run_args"], "max_steps": 10, "user_mode": "naive", "user_model": "gpt-4o-mini"}
    return [build_header(run_args, records), *records]


@pytest.fixture(scope="module")
def files(tiny_data_dir, tmp_path_factory) -> dict[str, Path]:
    """Real result files written by run.py, plus derived copies the project can also produce."""
    out = tmp_path_factory.mktemp("results")
    paths = {}
    for name, overrides in (("last", {"memory_length": 50}), ("none", {"agent_memory": "none"}),
                            ("partial", {"start_index": 5, "end_index": 15})):
        config = RunConfig(data_dir=str(tiny_data_dir), out=str(out / f"{name}.json"),
                           **{"agent_memory": "last", **overrides})
        _, paths[name], _ = run(config, log=lambda _: None)
    paths["multi"] = write(out / "multi.json", multi_turn_copy(read(paths["last"])))
    paths["interrupted"] = write(out / "interrupted.json", read(paths["last"])[1:20])
    last = read(paths["last"])
    paths["checkpoint"] = write(out / "checkpoint.json",
                                [{"run_args": last[0]["run_args"], "unfinished": True}, *last[1:20]])
    original = read(paths["none"])  # as the release's run.py writes it: its own flags alone, a release agent
    original[0]["run_args"] = {**{key: original[0]["run_args"][key] for key in RELEASE_RUN_ARGS},
                               "agent_strategy": "function_calling"}
    paths["original"] = write(out / "original.json", original)
    return paths


# -- validate ---------------------------------------------------------------------------------

def test_validate_accepts_every_file_the_project_writes(files, tiny_data, capsys):
    for name in ("last", "none", "partial", "multi", "interrupted", "checkpoint", "original"):
        report = validate_file(files[name], tiny_data)
        assert report.valid, (name, report.lines())
    assert "synthetic" in validate_file(files["last"], tiny_data).flags
    assert "partial split" in validate_file(files["partial"], tiny_data).flags
    assert "interrupted" in validate_file(files["interrupted"], tiny_data).flags
    assert "interrupted" in validate_file(files["checkpoint"], tiny_data).flags
    original = validate_file(files["original"], tiny_data)
    assert "synthetic" not in original.flags
    assert any("original release" in p.message for p in original.problems)
    assert main(["validate", str(files["last"]), str(files["multi"]), "--data_dir", str(tiny_data.data_dir)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"{files['multi']}: VALID")
    # without --data_dir the split checks are skipped, with a note
    assert main(["validate", str(files["last"])]) == 0
    assert "pass --data_dir" in capsys.readouterr().out


def test_a_checkpoint_reports_problems_at_their_element(files, tiny_data):
    content = read(files["checkpoint"])
    content[3]["res_acc"] = [1.5]
    report = validate_file(write(files["checkpoint"].with_name("bad_checkpoint.json"), content), tiny_data)
    assert not report.valid
    assert any(p.element == 3 and p.task_id == content[3]["task_id"] for p in report.problems if p.severity == "error")


def _edit_record(content: list, element: int, edit) -> list:
    content = copy.deepcopy(content)
    edit(content[element])
    return content


def _other_target(content: list) -> str:
    return {r["info"]["task"]["target"] for r in content[1:]}.difference({content[3]["info"]["task"]["target"]}).pop()


NEGATIVE_CASES = {
    "tampered header score": (
        lambda c: [{**c[0], "results": {**c[0]["results"], "overall": {
            **c[0]["results"]["overall"], "avg_res_acc": c[0]["results"]["overall"]["avg_res_acc"] + 0.05}}},
            *c[1:]],
        0, "results.overall.avg_res_acc"),
    "duplicated task": (lambda c: rebuilt([*c, copy.deepcopy(c[3])]), -1,
                        "duplicate: task 2 of trial 0 is already record 3"),
    "res_acc of 1.5": (lambda c: _edit_record(c, 6, lambda r: r["res_acc"].__setitem__(0, 1.5)), 6,
                       "res_acc[0] = 1.5 is not a number in [0, 1]"),
    "task id out of range": (lambda c: rebuilt(_edit_record(c, 40, lambda r: r.__setitem__("task_id", 40))), 40,
                             "task_id 40 is out of range: the test split has 40 tasks"),
    "target not matching the split": (
        lambda c: rebuilt(_edit_record(c, 3, lambda r: r["info"]["task"].__setitem__("target", _other_target(c)))),
        3, "does not match task 2 of the test split: target"),
}


@pytest.mark.parametrize("case", sorted(NEGATIVE_CASES))
def test_validate_rejects_and_names_the_record(case, files, tiny_data, tmp_path, capsys):
    make, element, message = NEGATIVE_CASES[case]
    content = make(read(files["last"]))
    path = write(tmp_path / "bad.json", content)
    report = validate_file(path, tiny_data)
    assert not report.valid
    element = element % len(content)
    where = "record 0 (header)" if element == 0 else (
        f"record {element} (task_id {content[element]['task_id']}, trial {content[element]['trial']})")
    errors = [line for line in report.lines() if ": error: " in line]
    assert any(where in line and message in line for line in errors), errors
    assert main(["validate", str(path), "--data_dir", str(tiny_data.data_dir)]) == 2
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"{path}: INVALID")


def test_validate_names_the_record_a_truncated_file_breaks_in(files, tmp_path):
    text = files["last"].read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: int(len(text) * 0.6)])
    report = validate_file(path)
    (problem,) = report.problems
    assert not report.valid and problem.element is not None and problem.element > 1
    assert "ends inside this element" in problem.message
    assert f"last complete record is {problem.element - 1}" in problem.message
    assert f"record {problem.element}: error" in report.lines()[0]


def test_validate_flags_errors_backend_and_usage(files, tiny_data, tmp_path, capsys):
    content = read(files["last"])
    content[0]["run_args"]["search_backend"] = "bm25s"
    content[0]["run_args"]["protocol"]["departures"].append("search_backend bm25s: the release searched with Lucene")
    content[5]["info"]["error"] = "APIError: rate limited"
    report = validate_file(write(tmp_path / "flagged.json", content), tiny_data)
    assert report.valid
    assert {"backend bm25s", "errored records"} <= set(report.flags)
    assert any("record 5 (task_id 4, trial 0): warning: the task ended in an error" in line for line in report.lines())
    with pytest.raises(SystemExit) as exit_info:
        main(["validate"])
    assert exit_info.value.code == 2
    assert main(["validate", str(files["last"]), "--data_dir", str(tmp_path / "missing")]) == 2
    capsys.readouterr()


# -- summarize ----------------------------------------------------------------------------------

def test_summarize_reproduces_headers_and_ranks(files, tmp_path):
    worse_f = read(files["none"])  # higher Result Acc but one wrong function: must rank last
    for record in worse_f[1:]:
        record["res_acc"] = [1.0] * len(record["res_acc"])
    worse_f[1]["action_acc"] = [0.0]
    worse_f = write(tmp_path / "worse_f.json", rebuilt(worse_f))
    paths = [worse_f, files["none"], files["multi"], files["last"]]
    rows, reports = summarize_files(paths)
    assert all(r.valid for r in reports)
    for row in rows:
        header = read(row.path)[0]
        assert row.total_cost == pytest.approx(header["total cost"], abs=1e-9)
        for group, stats in header["results"].items():
            for key, value in stats.items():
                assert row.statistics[group][key] == pytest.approx(value, abs=1e-9)
    single = [row.path for row in rows if row.track == "single-turn"]
    assert single == [files["last"], files["none"], worse_f]  # by F. Acc, then R. Acc
    markdown = render_markdown(rows)
    assert markdown.index("Single-turn track") < markdown.index("Multi-turn track")
    single_table, multi_table = markdown.split("Multi-turn track")
    assert "Avg. Steps" not in single_table and "Overall Avg. Steps" in multi_table
    assert "never with the paper" in markdown
    total = sum(read(p)[0]["total cost"] for p in paths)
    assert f"Total cost: ${total:.4f} over 4 run(s)." in markdown
    table = list(csv.DictReader(io.StringIO(render_csv(rows))))
    assert [r["file"] for r in table if r["track"] == "single-turn"] == [str(p) for p in single]
    assert float(table[0]["overall_r_acc"]) == read(files["last"])[0]["results"]["overall"]["avg_res_acc"]


def test_summarize_cli_names_and_escaping(files, tmp_path, capsys):
    out = tmp_path / "board.html"
    assert main(["summarize", str(files["last"]), str(files["none"]), "--format", "html", "--out", str(out),
                 "--name", "<b>mine</b>", "--name", "baseline"]) == 0
    page = out.read_text()
    assert "&lt;b&gt;mine&lt;/b&gt;" in page and "<b>mine</b>" not in page
    assert render_html([]).count("<table") == 0
    assert main(["summarize", str(files["last"]), "--name", "a", "--name", "b"]) == 2
    assert "2 --name values for 1 files" in capsys.readouterr().err
    assert main(["summarize", str(files["last"]), str(tmp_path / "missing.json")]) == 2
    assert "missing.json: invalid result file: the file does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_summarizing_twenty_full_split_files(tmp_path):
    """Correctness at full size; the time it takes is measured by scripts/benchmark_leaderboard.py."""
    paths = [tmp_path / f"run{i:02d}.json" for i in range(20)]
    for i, path in enumerate(paths):
        full_split_file(path, i, multi_turn=i % 2 == 1)
    rows, reports = summarize_files(paths)
    text = render_markdown(rows)
    assert len(rows) == 20 and all(r.valid and not r.flags for r in reports)
    assert all(row.statistics["overall"]["total_count"] == 2174 for row in rows)
    assert text.count("| 1 |") == 2  # one table per track


# -- analysis and plots -------------------------------------------------------------------------

def test_action_sequences_transitions_and_attempts(files):
    content = read(files["multi"])
    record = content[3]  # task 2: three attempts
    name = {"search": "search", "recommend": "recommend", "review": "review"}[record["info"]["task"]["type"]]
    assert action_sequence(record) == ["respond", name, name, name, "stop"]
    react = copy.deepcopy(record)
    react["traj"] = [{"role": "assistant",
                      "content": f'Thought: go\nAction: {{"name": "{FUNCTION_FOR_TASK_TYPE[name]}"}}'}] * 3 + [
        {"role": "assistant", "content": "Thought: done\nAction: stop\nArguments: {}"}]
    assert action_sequence(react) == [name, name, name, "stop"]
    react["traj"] = react["traj"][:1]  # disagrees with info.actions: info.actions wins
    assert action_sequence(react) == [name, name, name, "stop"]

    records = content[1:]
    matrices = transition_matrices(records)
    search = matrices["search"]
    n_search = sum(r["info"]["task"]["type"] == "search" for r in records)
    assert search.counts[search.sources.index("start")][search.targets.index("respond")] == n_search
    assert search.counts[search.sources.index("stop")][search.targets.index("end")] == n_search
    profile = attempt_profile(records)
    assert profile["search"][0].tasks == n_search
    assert [row.attempt for row in profile["search"]] == [1, 2, 3]
    solved = sum(1 for r in records if r["info"]["task"]["type"] == "search" and max(r["res_acc"]) > 0)
    assert sum(row.solved for row in profile["search"]) == solved


def test_plot_cli_writes_pngs_and_import_stays_light(files, tmp_path, capsys):
    assert main(["plot", str(files["last"]), str(files["multi"]), "--out", str(tmp_path)]) == 0
    written = sorted(p.name.split("_")[0] for p in tmp_path.glob("*.png"))
    assert written == ["attempts", "transitions", "type", "type"]  # the multi-turn figures only for the multi-turn run
    assert {p.name for p in tmp_path.glob("type_*.png")} == {"type_accuracy_single_turn.png",
                                                            "type_accuracy_multi_turn.png"}  # tracks never mixed
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in tmp_path.glob("*.png"))
    probe = "import sys, PersonalWAB.leaderboard; print('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
    capsys.readouterr()


# -- report and pack ----------------------------------------------------------------------------

def test_report_is_self_contained_and_escapes_model_text(files, tmp_path):
    content = read(files["multi"])
    payload = "</script><script>window.__pwned=1</script><img src=x onerror=alert(1)>"
    review = next(r for r in content[1:] if r["info"]["task"]["type"] == "review")
    review["info"]["actions"][0] = {"name": "add_product_review", "arguments": {"review": payload}}
    review["traj"][-3]["content"] = payload
    content[0]["run_args"]["model"] = "<i>model</i>"
    page = render_report(validate_file(write(tmp_path / "evil.json", content)))
    assert page.count("<script") == 2 and "__pwned=1</script>" not in page
    assert "<img src=x" not in page and "<i>model</i>" not in page and "&lt;i&gt;model&lt;/i&gt;" in page
    assert "http://" not in page and "https://" not in page
    assert page.count('src="data:image/png;base64,') == 4  # per type, per-user Result Acc, transitions, attempts


def test_pack_bundle_and_refusal(files, tmp_path, capsys):
    bundle, report = pack_file(files["last"], tmp_path / "out")
    assert bundle.name == "last.submission.tar.gz" and report.valid
    with tarfile.open(bundle) as archive:
        members = {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
    raw = files["last"].read_bytes()
    assert gzip.decompress(members["last.json.gz"]) == raw
    sums = dict(line.split("  ")[::-1] for line in members["SHA256SUMS"].decode().splitlines())
    assert sums["last.json"] == hashlib.sha256(raw).hexdigest()
    assert sums["last.json.gz"] == hashlib.sha256(members["last.json.gz"]).hexdigest()
    summary = json.loads(members["validation.json"])
    assert summary["valid"] and summary["synthetic"] and summary["statistics"]["overall"]["total_count"] == 40
    again, _ = pack_file(files["last"], tmp_path / "again")
    assert again.read_bytes() == bundle.read_bytes()  # reproducible

    bad = read(files["last"])
    bad[4]["res_acc"] = [1.5]
    bad_path = write(tmp_path / "bad.json", bad)
    assert main(["pack", str(bad_path), "--out", str(tmp_path / "refused")]) == 2
    assert not (tmp_path / "refused").exists()
    assert main(["pack", str(bad_path), "--out", str(tmp_path / "forced"), "--force"]) == 2
    with tarfile.open(tmp_path / "forced" / "bad.submission.tar.gz") as archive:
        summary = json.loads(archive.extractfile("validation.json").read())
    assert summary["packed_despite_errors"] and not summary["valid"]
    capsys.readouterr()


# -- standard and custom runs ---------------------------------------------------------------------

def test_standard_and_custom_runs_are_labelled_and_never_ranked_together(files, tmp_path):
    from PersonalWAB.leaderboard.summarize import tables

    assert "custom" in validate_file(files["last"]).flags  # project texts, offline agent
    assert "custom" not in validate_file(files["original"]).flags  # written by the release's own run.py
    standard = files["original"]
    report = validate_file(standard)
    assert report.valid and "custom" not in report.flags and report.summary()["protocol"] == "standard"
    lying = read(files["none"])
    lying[0]["run_args"]["protocol"]["standard"] = True  # project texts cannot make a standard run
    report = validate_file(write(tmp_path / "lying.json", lying))
    assert not report.valid and any("make the run custom" in p.message for p in report.problems)

    rows, _ = summarize_files([files["last"], standard, files["none"]])
    titles = [title for title, _ in tables(rows)]
    assert len(titles) == 2 and "standard protocol" in titles[0] and "custom protocol" in titles[1]
    grouped = dict(tables(rows))
    assert [row.path for row in grouped[titles[0]]] == [standard]
    assert {row.path for row in grouped[titles[1]]} == {files["last"], files["none"]}
    assert "comparable only with each other" in render_markdown(rows)


def test_leaderboard_config_file_gives_the_flags_settings(files, tmp_path):
    from PersonalWAB.leaderboard.commands import ReportSettings, SummarizeSettings
    from PersonalWAB.settings import parse

    flags = [str(files["last"]), str(files["none"]), "--format", "csv", "--out", str(tmp_path / "b.csv"),
             "--name", "mine", "--name", "baseline"]
    config = tmp_path / "summarize.yaml"
    config.write_text(f"format: csv\nout: {tmp_path / 'b.csv'}\nname: [mine, baseline]\n")
    from_flags = parse(SummarizeSettings, flags)
    assert from_flags.name == ["mine", "baseline"]
    assert parse(SummarizeSettings, [str(files["last"]), str(files["none"]), "--config", str(config)]) == from_flags
    assert main(["summarize", str(files["last"]), str(files["none"]), "--config", str(config)]) == 0
    assert (tmp_path / "b.csv").read_text().count("\n") >= 2
    config.write_text("force: 1\ncompare: base.json\n")
    report = parse(ReportSettings, ["x.json", "--config", str(config)])
    assert report.force is True and report.compare == "base.json" and report.out == "."


def test_csv_text_cells_are_escaped_and_numbers_kept(result_file):
    rows, _ = summarize_files([result_file], ["=HYPERLINK(\"http://x\")"])
    [row] = list(csv.DictReader(io.StringIO(render_csv(rows))))
    assert row["method"] == "'=HYPERLINK(\"http://x\")"
    assert float(row["overall_f_acc"]) >= 0 and not row["overall_f_acc"].startswith("'")


@pytest.mark.parametrize("cell, shown", [("-0.5 gain", "'-0.5 gain"), ("+1", "'+1"), ("@SUM(A1)", "'@SUM(A1)"),
                                         ("plain", "plain"), ("a=b", "a=b")])
def test_csv_text(cell, shown):
    from PersonalWAB.leaderboard.summarize import csv_text

    assert csv_text(cell) == shown


def test_report_refuses_an_invalid_file_and_says_why(result_file, tmp_path, capsys):
    assert main(["report", str(result_file), "--out", str(tmp_path)]) == 0
    broken = tmp_path / "broken.json"
    content = json.loads(result_file.read_text())
    content[1]["res_acc"] = [7.0]
    broken.write_text(json.dumps(content))
    capsys.readouterr()
    assert main(["report", str(broken), "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert not (tmp_path / "broken.report.html").exists() and captured.out == ""
    assert captured.err == f"error: {broken}: invalid result file: record 1 (task_id 0, trial 0): res_acc[0] = 7.0 " \
                           "is not a number in [0, 1]\n"


def test_deeply_nested_result_files_are_reported_not_raised(tmp_path):
    from PersonalWAB.results import read_run_file

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    report = validate_file(deep)
    assert not report.valid and "nested deeper than the parser allows" in report.lines()[0]
    with pytest.raises(DataError, match="not valid JSON.*depth"):
        read_run_file(deep)


def quiet(_: str) -> None:
    pass


@pytest.fixture(scope="module")
def finished(tiny_data_dir, tmp_path_factory) -> Path:
    """A finished run of four tasks with the project's texts."""
    output = tmp_path_factory.mktemp("labels") / "r.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=4), log=quiet)
    return output


# -- leaderboard validate -------------------------------------------------------------------------

def _empty_run_args(header: dict) -> None:
    header["run_args"] = {}


def _drop_run_args(header: dict) -> None:
    del header["run_args"]


@pytest.mark.parametrize(("change", "reason"), [
    (_empty_run_args, "run_args is empty: the run's settings are unknown"),
    (_drop_run_args, "element 0 is a header without run_args"),
], ids=["emptied", "missing"])
def test_validate_refuses_a_header_whose_run_args_are_gone(finished, tiny_data, tmp_path, change, reason):
    content = json.loads(finished.read_text())
    change(content[0])
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(content))
    report = validate_file(edited, tiny_data)
    assert not report.valid and report.summary()["protocol"] == "custom"
    assert any(reason in line for line in report.lines())


def _relabelled(finished: Path, folder: Path, digest: str, standard: bool) -> Path:
    """The run's file as a hand would relabel it: the release's texts, no departures, `digest`."""
    content = json.loads(finished.read_text())
    run_args = content[0]["run_args"]
    run_args.update(agent_strategy="function_calling", model="gpt-4o-mini", memory_length=10,
                    protocol={"texts": "release@23ff65c", "departures": [], "standard": standard},
                    protocol_texts_digest=digest)
    path = folder / f"relabelled-{digest}-{standard}.json"
    path.write_text(json.dumps(content))
    return path


def test_a_label_of_the_release_texts_with_an_unknown_digest_is_custom_never_standard(finished, tmp_path):
    from PersonalWAB.leaderboard.summarize import summarize_files, tables
    from PersonalWAB.leaderboard.validate import protocol_label
    from PersonalWAB.protocol.spec import RELEASE_PROTOCOL_DIGEST

    forged = _relabelled(finished, tmp_path, "0123456789abcdef", standard=True)
    report = validate_file(forged)
    assert not report.valid and report.summary()["protocol"] == "custom"
    assert any("unknown texts (named release@23ff65c, but protocol_texts_digest '0123456789abcdef' is not the pinned "
               f"release's {RELEASE_PROTOCOL_DIGEST})" in line for line in report.lines())
    with pytest.raises(DataError):
        summarize_files([forged])  # an invalid file is refused, never ranked
    quiet_forgery = _relabelled(finished, tmp_path, "0123456789abcdef", standard=False)
    rows, _ = summarize_files([quiet_forgery])
    assert ["custom protocol" in title for title, _ in tables(rows)] == [True]
    genuine = json.loads(_relabelled(finished, tmp_path, RELEASE_PROTOCOL_DIGEST, standard=True).read_text())
    assert protocol_label(genuine[0]["run_args"]) == ("standard", [])
    older = {**genuine[0]["run_args"]}
    del older["protocol_texts_digest"]  # a label with no digest names no texts the project knows
    assert protocol_label(older)[0] == "custom"


def test_validate_refuses_a_checkpoint_with_emptied_run_args(finished, tiny_data, tmp_path):
    content = json.loads(finished.read_text())
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps([{"run_args": {}, "unfinished": True}, *content[1:]]))
    report = validate_file(checkpoint, tiny_data)
    assert not report.valid and "custom" in report.flags


def test_validate_and_summarize_count_format_errors(format_error_run, capsys):
    _, output = format_error_run
    capsys.readouterr()
    main(["validate", str(output)])
    assert "3 format errors" in capsys.readouterr().out
    main(["summarize", str(output)])
    table = capsys.readouterr().out
    head = next(line for line in table.splitlines() if line.startswith("| #"))
    row = next(line for line in table.splitlines() if line.startswith("| 1 "))
    cells, names = [c.strip() for c in row.split("|")], [c.strip() for c in head.split("|")]
    assert cells[names.index("Format errors")] == "3"


def test_old_records_without_format_errors_still_validate(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "old.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=2), log=quiet)
    capsys.readouterr()
    assert main(["validate", str(output)]) == 0
    assert "VALID (0 errors" in capsys.readouterr().out


# -- the leaderboard: partial runs apart, tracks apart --------------------------------------------

def test_summarize_never_ranks_a_partial_run_with_whole_split_runs(tiny_data_dir, tiny_engines, tmp_path):
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(whole), agent_memory="none"), log=quiet)
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(part), end_index=5), log=quiet)
    rows, _ = summarize_files([whole, part])
    grouped = tables(rows)
    assert len(grouped) == 2
    (whole_title, whole_rows), (part_title, part_rows) = grouped
    assert [r.path for r in whole_rows] == [whole] and [r.path for r in part_rows] == [part]
    assert "partial" not in whole_title and "tasks 0-4 only" in part_title
    assert "ranked only against runs of the same tasks" in render_markdown(rows)
    from PersonalWAB.leaderboard.validate import validate_file

    assert any("partial split: tasks 0-4 of the test split" in line for line in validate_file(part).lines())
    content = json.loads(part.read_text())
    content[0]["run_args"]["end_index"] = True  # read as 1 it would pass for a run of the whole split
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(content))
    report = validate_file(edited)
    assert not report.valid and any("run_args.end_index True is not a task index" in p.message
                                    for p in report.problems)


def test_task_id_ranges_are_exact():
    assert id_ranges([3, 0, 1, 2, 7, 9, 8, 12]) == "0-3,7-9,12"
    assert id_ranges([5, 5]) == "5"


def _row(name: str, score: float, bounds: tuple[float, float] | None) -> Row:
    trials = None if bounds is None else {"num_trials": 2, "results": {"overall": {
        key: {"ci95": list(bounds)} for key in ("avg_action_acc", "avg_res_acc")}}}
    stats = {"overall": {"avg_action_acc": score, "avg_res_acc": score}}
    return Row(name, Path(f"{name}.json"), "single-turn", "official", stats, 0.0, [], True, trials)


def test_summarize_claims_a_difference_only_between_intervals_with_width():
    flat = comparisons([_row("a", 0.8, (0.8, 0.8)), _row("b", 0.6, (0.6, 0.6))])
    assert all(note.endswith("not judged: the interval of a and b has no width (one trial, or trials that all "
                             "scored the same)") for note in flat)
    wide = comparisons([_row("a", 0.8, (0.75, 0.85)), _row("b", 0.6, (0.55, 0.65))])
    assert all(note.endswith("outside their 95% intervals") for note in wide)
    single = comparisons([_row("a", 0.8, (0.75, 0.85)), _row("b", 0.6, None)])
    assert all("the interval of b has no width" in note for note in single)
