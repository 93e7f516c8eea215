"""Bad input ends in one clear line naming the file, flag or key."""

import json
import os
import subprocess
import sys

import pytest

from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.errors import DataError
from tests.conftest import HANG_GUARD_S, REPO_ROOT, rewrite


# ---------------------------------------------------------------- data files


def test_a_missing_product_part_is_named_and_refused(data_copy):
    (data_copy / "all_products_part_2.json").rename(data_copy / "all_products_part_3.json")
    with pytest.raises(DataError, match=r"all_products_part_2\.json missing \(found all_products_part_1\.json, "
                                        r"all_products_part_3\.json\).*renumber"):
        load_benchmark_data(data_copy)


def test_a_missing_first_history_part_is_named(data_copy):
    (data_copy / "user_history_part_1.json").unlink()
    with pytest.raises(DataError, match=r"user_history_part_1\.json missing"):
        load_benchmark_data(data_copy)


def test_a_behaviour_given_twice_in_data_with_a_manifest_is_named_as_such(data_copy):
    part = data_copy / "user_history_part_1.json"
    user, behaviours = next(iter(json.loads(part.read_text()).items()))
    rewrite(part, lambda content: content[user].append(behaviours[0]))
    with pytest.raises(DataError, match=r"holds \d+ behaviours where .* says \d+: 1 behaviour\(s\) are given twice "
                                        rf"\(a part or an entry copied\?\), e.g. .*\[{user!r}\]"):
        load_benchmark_data(data_copy)


def test_an_asin_in_two_product_parts_is_reported_with_both_parts(data_copy):
    first, second = data_copy / "all_products_part_1.json", data_copy / "all_products_part_2.json"
    asin = next(iter(json.loads(first.read_text())))
    product = json.loads(first.read_text())[asin]
    rewrite(second, lambda content: content.update({asin: {**product, "title": "Second title"}}))
    data = load_benchmark_data(data_copy)
    assert data.products[asin]["title"] == "Second title"  # the later part wins, as before
    [warning] = [w for w in data.warnings if "ASIN" in w]
    assert f"1 ASIN(s) are in both {first} and {second} (e.g. {asin!r})" in warning


def test_a_duplicate_json_key_is_reported_with_its_places(data_copy):
    path = data_copy / "user_profiles.json"
    raw = path.read_text()
    user = next(iter(json.loads(raw)))
    entry = json.dumps(json.loads(raw)[user])
    path.write_text(raw.rstrip()[:-1] + f', "{user}": {entry}}}')  # the same user again, last
    data = load_benchmark_data(data_copy)
    [warning] = [w for w in data.warnings if "given twice" in w]
    assert str(path) in warning and repr(user) in warning and "at bytes 1 and " in warning


def test_a_duplicate_key_inside_a_record_is_reported(data_copy):
    path = data_copy / "user_instructions.json"
    raw = path.read_text()
    path.write_text(raw.replace('"type":', '"type":"search","type":', 1))
    data = load_benchmark_data(data_copy)
    assert any("key 'type' is given twice in one object" in w for w in data.warnings)


def test_clean_files_give_no_duplicate_warning(tiny_data):
    assert not [w for w in tiny_data.warnings if "given twice" in w or "ASIN" in w]


def test_a_profile_value_of_the_wrong_type_is_named(data_copy):
    path = data_copy / "user_profiles.json"
    user = next(iter(json.loads(path.read_text())))
    rewrite(path, lambda content: content[user]["user_profile"].update(Age=34))
    with pytest.raises(DataError, match=rf"user_profiles\.json: \['{user}'\]\.user_profile\['Age'\]: "
                                        r"expected str, got int"):
        load_benchmark_data(data_copy)


@pytest.mark.parametrize("text, problem", [("[1, 2]", "top level: expected dict, got list"),
                                           ('{"source": 5}', "source: expected str, got int"),
                                           ('{"scale": ', "not valid JSON")])
def test_a_malformed_manifest_is_named(data_copy, text, problem):
    (data_copy / "synthetic_manifest.json").write_text(text)
    with pytest.raises(DataError, match="synthetic_manifest.json: " + problem):
        load_benchmark_data(data_copy)


def test_deeply_nested_json_is_a_clear_data_error(data_copy):
    (data_copy / "user_profiles.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match=r"user_profiles\.json: not valid JSON \(.*depth"):
        load_benchmark_data(data_copy)


def test_a_quoted_text_with_a_colon_is_not_taken_for_a_key(data_copy):
    path = data_copy / "user_instructions.json"
    rewrite(path, lambda content: content["test"][0].update(task='I want the one labelled "pro": light and small'))
    assert not [w for w in load_benchmark_data(data_copy).warnings if "given twice" in w]


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


def test_a_write_failure_escaping_a_command_is_one_line(capsys):
    from PersonalWAB.cli import run_command

    def main(argv):
        raise PermissionError(13, "Permission denied", "/results/board.md")

    assert run_command(main, []) == 2
    assert capsys.readouterr().err == "error: /results/board.md: Permission denied\n"


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
    from PersonalWAB.outputs import output_problem

    assert output_problem(tmp_path / "new" / "deeper" / "x.json", "--out") is None
    assert output_problem(tmp_path, "--out", folder=True) is None
    assert output_problem(tmp_path, "--out") == f"--out {tmp_path}: is a folder; name a file"
    assert output_problem(a_file, "--out", folder=True) == f"--out {a_file}: is a file, not a folder"


# ---------------------------------------------------------------- PUMA steps: checked before the long work


@pytest.fixture()
def no_long_work(monkeypatch):
    """Fail a test whose step got as far as its long work (the memory embedding, building engines)."""
    import PersonalWAB.build
    import PersonalWAB.memory.embeddings

    def long_work(*args, **kwargs):
        raise AssertionError("the step started its long work before finding the bad input")

    monkeypatch.setattr(PersonalWAB.memory.embeddings, "build_behaviour_embeddings", long_work)
    monkeypatch.setattr(PersonalWAB.build, "build_artifacts", long_work)


def _step(step_main, argv, capsys):
    from PUMA.cli import STEP_BAD_INPUT
    from PersonalWAB.cli import run_command

    code = run_command(step_main, argv, STEP_BAD_INPUT)
    return code, capsys.readouterr().err


@pytest.fixture()
def empty_test_split(data_copy):
    rewrite(data_copy / "user_instructions.json", lambda content: content.update(test=[]))
    return data_copy


def test_puma_data_refuses_an_empty_split_before_embedding(empty_test_split, tiny_model_dir, tmp_path,
                                                           no_long_work, capsys):
    from PUMA.data import main

    code, err = _step(main, ["param", "--data_dir", str(empty_test_split), "--model_path", str(tiny_model_dir),
                             "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert f"error: --splits test: the 'test' split of {empty_test_split} has no tasks" in err
    assert not (tmp_path / "out").exists()


def test_puma_data_refuses_an_unknown_split(tiny_data_dir, tmp_path, no_long_work, capsys):
    from PUMA.data import main

    code, err = _step(main, ["function", "--data_dir", str(tiny_data_dir), "--splits", "train,dev",
                             "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "error: --splits 'dev': no such split; expected one of test, train" in err


@pytest.mark.parametrize("model", ["{tmp}/no_model", "{tmp}"])
def test_puma_data_refuses_a_missing_or_invalid_model_before_embedding(model, tiny_data_dir, tmp_path,
                                                                        no_long_work, capsys):
    from PUMA.data import main

    model_path = model.replace("{tmp}", str(tmp_path))
    code, err = _step(main, ["param", "--data_dir", str(tiny_data_dir), "--model_path", model_path,
                             "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and f"error: --model_path {model_path}: " in err and "Traceback" not in err


def test_puma_scoring_refuses_an_empty_split_before_building(empty_test_split, tmp_path, no_long_work, capsys):
    from PUMA.score import main

    candidates = tmp_path / "candidates.json"
    candidates.write_text("{}")
    code, err = _step(main, ["--data_dir", str(empty_test_split), "--task_split", "test", "--candidates_file",
                             str(candidates), "--out", str(tmp_path / "scores.json")], capsys)
    assert code == 2 and "error: --task_split test: the 'test' split" in err


def test_a_puma_input_that_is_not_json_is_named(tmp_path, capsys):
    from PUMA.dpo_data import main

    scores = tmp_path / "scores.json"
    scores.write_text("{not json")
    code, err = _step(main, ["--scores_file", str(scores), "--out", str(tmp_path / "pairs.json")], capsys)
    assert code == 2 and err.startswith(f"error: {scores}: not valid JSON (")


# ---------------------------------------------------------------- human user, CSV, report, nesting


@pytest.mark.slow
def test_human_mode_stops_at_end_of_input_and_keeps_what_finished(tiny_data_dir, tiny_engines, tmp_path):
    output = tmp_path / "human.json"
    argv = [sys.executable, str(REPO_ROOT / "run.py"), "--user_mode", "human", "--max_steps", "3",
            "--agent_strategy", "heuristic", "--agent_memory", "none", "--data_dir", str(tiny_data_dir),
            "--search_backend", "bm25s", "--end_index", "2", "--out", str(output)]
    done = subprocess.run(argv, input="", capture_output=True, text=True, cwd=REPO_ROOT, timeout=HANG_GUARD_S)
    assert done.returncode == 1, done.stderr
    assert "error: end of input on the user's turn (--user_mode human): the run stops" in done.stderr
    assert f"--resume_from {output}" in done.stderr
    records = json.loads(output.read_text())[1:]
    assert all(not any(turn.get("role") == "user" and turn.get("content") == "" for turn in record["traj"])
               for record in records)  # no empty user reply was recorded


def test_csv_text_cells_are_escaped_and_numbers_kept(result_file):
    import csv
    import io

    from PersonalWAB.leaderboard.summarize import render_csv, summarize_files

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
    from PersonalWAB.leaderboard.__main__ import main

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
    from PersonalWAB.leaderboard.validate import validate_file
    from PersonalWAB.results import read_run_file

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    report = validate_file(deep)
    assert not report.valid and "nested deeper than the parser allows" in report.lines()[0]
    with pytest.raises(DataError, match="not valid JSON.*depth"):
        read_run_file(deep)
