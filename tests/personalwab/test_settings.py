"""The one settings system (`PersonalWAB.settings`): flags made from dataclass fields, one
boolean style, old spellings that warn, `--config FILE.yaml` under the flags and what such a file
may hold (each fault one line naming the file and the key), resume keys from marks, and `run.py`
taking the release's own command lines as they are."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from PersonalWAB.cli import EXIT_BAD_INPUT, run_command
from PersonalWAB.errors import DataError
from PersonalWAB.runner.config import RunConfig, parse_config, run_resume_keys
from PersonalWAB.settings import (build_parser, help_problems, parse, read_config_file, resume_keys, setting,
                                  settings_fields)


@dataclass
class Example:
    files: list[str] = setting(list, "files to read", positional=True, nargs="+")
    out: str = setting("result.json", "where the output goes", aliases=("output", "output_dir"))
    count: int = setting(3, "how many", resume=True)
    rate: float | None = setting(None, "a rate")
    shuffle: bool = setting(False, "shuffle the order")
    packing: bool = setting(True, "pack the examples", aliases=("no-packing",))
    mode: str = setting("a", "the mode", choices=["a", "b"], resume=True)


def test_one_boolean_style_takes_a_bare_flag_and_every_spelling_of_a_value():
    assert parse(Example, ["f", "--shuffle"]).shuffle is True
    for word, value in (("1", True), ("0", False), ("true", True), ("False", False), ("yes", True), ("off", False)):
        assert parse(Example, ["f", "--shuffle", word]).shuffle is value
    with pytest.raises(SystemExit):
        parse(Example, ["f", "--shuffle", "maybe"])


def test_an_old_spelling_works_and_names_the_flag_that_replaced_it(capsys):
    settings = parse(Example, ["f", "--output", "x.json", "--no-packing"])
    assert (settings.out, settings.packing) == ("x.json", False)
    err = capsys.readouterr().err
    assert "--output is deprecated; use --out" in err and "--no-packing is deprecated; use --packing 0" in err
    assert parse(Example, ["f", "--out", "y.json"]).out == "y.json" and capsys.readouterr().err == ""


def test_a_config_file_gives_settings_and_flags_override_it(tmp_path):
    config = tmp_path / "settings.yaml"
    config.write_text("count: 7\nmode: b\nshuffle: 1\nrate: 0.5\nfiles: [a, b]\n")
    settings = parse(Example, ["--config", str(config), "--count", "9"])
    assert (settings.count, settings.mode, settings.shuffle, settings.rate, settings.files) == (9, "b", True, 0.5,
                                                                                                ["a", "b"])


@pytest.mark.parametrize("text, fault", [
    ("cuont: 7\n", "cuont: unknown setting (did you mean count?)"),
    ("mode: c\n", "mode: 'c' is not one of a, b"),
    ("count: many\n", "count: invalid literal"),
    ("- count\n", "expected a mapping of settings, found list"),
    ("count: [1\n", "not valid YAML"),
])
def test_a_bad_config_file_names_the_file_and_the_fault(tmp_path, text, fault):
    config = tmp_path / "settings.yaml"
    config.write_text(text)
    with pytest.raises(DataError) as caught:
        parse(Example, ["f", "--config", str(config)])
    assert str(config) in str(caught.value) and fault in str(caught.value)


def test_every_flag_has_help_and_an_empty_help_is_refused():
    assert help_problems(build_parser(Example)) == []
    with pytest.raises(ValueError, match="help"):
        setting(1, " ")


def test_resume_keys_come_from_the_marks():
    assert resume_keys(Example) == ("count", "mode")
    keys = run_resume_keys()
    assert {"task_split", "agent_memory", "model", "puma_param_file", "recipe", "protocol"} <= set(keys)
    assert "verbose" not in keys and "max_concurrency" not in keys


def test_run_config_file_equals_the_same_flags(tmp_path):
    flags = ["--agent_strategy", "puma", "--agent_memory", "taskspe", "--end_index", "20", "--shuffle", "1",
             "--puma_function_file", "f.json", "--puma_param_file", "p.json", "--recipe", "improved",
             "--temperature", "0.5", "--max_concurrency", "4", "--verbose"]
    config = tmp_path / "run.yaml"
    config.write_text("agent_strategy: puma\nagent_memory: taskspe\nend_index: 20\nshuffle: true\n"
                      "puma_function_file: f.json\npuma_param_file: p.json\nrecipe: improved\ntemperature: 0.5\n"
                      "max_concurrency: 4\nverbose: true\n")
    from_flags, from_file = parse_config(flags), parse_config(["--config", str(config)])
    assert from_flags.settings() == from_file.settings()
    assert from_file.options("puma").recipe == "improved" and from_file.shuffle is True
    assert from_flags.settings() != parse_config([]).settings()


RELEASE_RUN_FLAGS = [  # every flag of the release's run.py, spelled and valued as its scripts pass them
    "--num_trials", "1", "--env", "pwab", "--model", "gpt-4o-mini", "--user_mode", "no", "--user_model", "gpt-4o",
    "--agent_strategy", "puma", "--temperature", "0.0", "--task_split", "test", "--agent_memory", "taskspe",
    "--memory_length", "10", "--max_steps", "-1", "--start_index", "0", "--end_index", "-1", "--resume_from", "r.json",
    "--verbose", "--log_dir", "results", "--num_gpus", "1", "--max_concurrency", "1", "--seed", "2024",
    "--shuffle", "0", "--interec_memory_file", "m.json", "--puma_param_file", "p.json", "--puma_function_file",
    "f.json", "--puma_generate", "0", "--puma_model_path", "model/", "--mem_token_length", "768",
]


def test_run_takes_the_release_run_py_flags_as_they_are(capsys):
    config = parse_config(RELEASE_RUN_FLAGS)
    puma = config.options("puma")
    assert (config.shuffle, config.verbose, config.num_gpus, config.log_dir) == (False, True, 1, "results")
    assert (puma.puma_generate, puma.puma_model_path, puma.mem_token_length) == (False, "model/", 768)
    assert capsys.readouterr().err == ""  # the release's spellings are current flags, no warning
    assert parse_config(["--shuffle", "1", "--puma_generate", "1"]).shuffle is True


def test_the_projects_older_run_flags_still_work_with_a_warning(capsys):
    config = parse_config(["--output", "x.json", "--puma_recipe", "improved"])
    assert config.out == "x.json" and config.options("puma").recipe == "improved"
    err = capsys.readouterr().err
    assert "--output is deprecated; use --out" in err and "--puma_recipe is deprecated; use --recipe" in err


def test_the_header_records_every_resolved_setting():
    settings = RunConfig().settings()
    assert {"out", "agent_memory", "puma_generate", "recipe", "mem_token_length"} <= set(settings)
    assert "agent_options" not in settings


def test_a_strategy_with_a_memory_of_its_own_is_run_and_named_by_it(tmp_path):
    from PersonalWAB.runner.checks import SettingsError, check_settings
    from PersonalWAB.runner.records import default_output_path

    puma = parse_config(["--agent_strategy", "puma", "--puma_generate", "--puma_model_path", "m"])
    assert puma.agent_memory == "taskspe" and "_memtaskspe_" in default_output_path(puma, 10).name
    assert parse_config([]).agent_memory == "last"
    with pytest.raises(SettingsError, match="--agent_memory last: the live puma agent reads task-specific memory"):
        check_settings(parse_config(["--agent_strategy", "puma", "--puma_generate", "--puma_model_path", "m",
                                     "--agent_memory", "last"]), keys=False)


# -- what a --config file may hold -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, fault", [
    ("end_index: true\n", "end_index: expected a whole number, got the YAML boolean true"),
    ("end_index: 2.7\n", "end_index: expected a whole number, got the YAML number 2.7"),
    ("end_index: [1, 2]\n", "end_index: expected one value (a whole number), got a YAML list"),
    ("max_usd: .nan\n", "max_usd: the YAML number .nan: expected a finite amount of USD above 0"),
    ("max_usd: .inf\n", "max_usd: the YAML number inf: expected a finite amount of USD above 0"),
    ("max_usd: -5\n", "max_usd: the YAML number -5: expected a finite amount of USD above 0"),
    ("seed: 1.5\n", "seed: expected a whole number, got the YAML number 1.5"),
    ("shard: 0.5\n", "shard: the YAML number 0.5: '0.5': expected I/N"),
    ("agent_memory: [last]\n", "agent_memory: expected one value (text), got a YAML list"),
    ("temperature: [0.5]\n", "temperature: expected one value (a number), got a YAML list"),
    ("tag: [[a]]\n", "tag: expected text, got a YAML list"),
    ("run_name: {a: 1}\n", "run_name: expected text, got a YAML mapping"),
    ("end_index: null\n", "end_index: expected a whole number, got null"),
    ("seed: 1\nseed: 2\n", "'seed' is given twice (lines 1 and 2); keep one"),
    ("out: a.json\noutput: b.json\n", "out and output both set --out; keep one"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
     "run_name: *f\n", "its YAML aliases (*name) expand to more than 1024 KiB"),
])
def test_each_config_fault_of_a_run_is_one_line_naming_the_file_and_the_key(text, fault, tmp_path, capsys):
    from PersonalWAB.runner.config import parse_config

    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert run_command(parse_config, ["--config", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err == f"error: --config {path}: {fault}" + err.split(fault, 1)[1] and err.count("\n") == 1, err


def test_an_int_for_a_text_setting_is_its_text_and_a_null_leaves_the_default(tmp_path):
    from PersonalWAB.runner.config import parse_config

    path = tmp_path / "run.yaml"
    path.write_text("run_name: 42\nmodel: null\ntag: lr=1\n")
    config = parse_config(["--config", str(path)])
    assert (config.run_name, config.model, config.tag) == ("42", None, ["lr=1"])


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "large", "not utf-8"])
def test_only_a_regular_settings_file_of_bounded_size_is_read(kind, tmp_path):
    import os

    from PersonalWAB.runner.config import parse_config

    path = {"device": Path("/dev/zero"), "fifo": tmp_path / "pipe.yaml", "folder": tmp_path,
            "large": tmp_path / "large.yaml", "not utf-8": tmp_path / "latin.yaml"}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # opened, it would wait for a writer for ever
    if kind == "large":
        path.write_text("# " + "x" * (1 << 20) + "\n")
    if kind == "not utf-8":
        path.write_bytes(b"run_name: caf\xe9\n")
    fault = {"device": "is a device", "fifo": "is a FIFO", "folder": "is a folder", "large": "larger than 1024 KiB",
             "not utf-8": "not UTF-8 text"}[kind]
    with pytest.raises(DataError, match=f"--config {path}: {fault}"):
        parse_config(["--config", str(path)])


def test_a_null_operand_in_a_config_file_is_refused(tmp_path):
    """A command's operand (the file `pack` packs) has no default: null in the file is no file,
    where it would pass the parser as given."""
    from PersonalWAB.leaderboard.commands import pack

    path = tmp_path / "pack.yaml"
    path.write_text("file: null\n")
    with pytest.raises(DataError, match=f"--config {path}: file: expected text, got null"):
        pack(["--config", str(path)])


@dataclass
class Typed:
    """Settings whose defaults do not say their type: the annotation does."""

    source: Path = setting(Path, "a required folder", required=True)
    limit: int | None = setting(None, "at most this many")
    rate: float = setting(1, "a rate written with a whole-number default")
    sizes: list[int] = setting(None, "sizes", factory=list, nargs="+")
    mode: Literal["fast", "exact"] = setting("exact", "how to compute")


def test_the_annotation_is_the_type_the_parser_converts_to():
    settings = parse(Typed, ["--source", "d", "--limit", "3", "--rate", "0.5", "--sizes", "4", "5", "--mode", "fast"])
    assert settings == Typed(source=Path("d"), limit=3, rate=0.5, sizes=[4, 5], mode="fast")
    assert parse(Typed, ["--source", "d"]).limit is None
    for bad in (["--limit", "many"], ["--sizes", "x"], ["--mode", "slow"], []):  # [] lacks the required --source
        with pytest.raises(SystemExit):
            parse(Typed, ["--source", "d", *bad] if bad else bad)


def test_a_config_file_is_checked_against_the_annotation_too(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text("limit: 4\nmode: fast\nrate: 2\n")
    assert read_config_file(config, settings_fields(Typed)) == {"limit": 4, "mode": "fast", "rate": 2.0}
    for text, fault in (("limit: four\n", "limit"), ("mode: slow\n", "slow"), ("rate: true\n", "rate")):
        config.write_text(text)
        with pytest.raises(DataError, match=fault):
            read_config_file(config, settings_fields(Typed))


def test_setting_is_typed_as_its_default_for_mypy():
    """No overload of `setting` returns Any: mypy checks every default against the field's annotation
    (the package's mypy run, scripts/lint.sh, is where a mismatch fails)."""
    from PersonalWAB import settings

    overloads = typing.get_overloads(settings.setting)
    assert len(overloads) == 4
    assert all(typing.get_type_hints(o)["return"] is not typing.Any for o in overloads)
