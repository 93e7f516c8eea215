"""Property-based: every setting of every command, given in a `--config` file as any YAML type,
is taken exactly as its flag would take the same text, or refused with exit 2 and one line
naming the file and the key. A YAML value of another type (a boolean for a number, a list for
one value, a float for text, null for a setting that has a value) is never taken as it is."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import PersonalWAB.settings as settings_module
from PersonalWAB.cli import EXIT_BAD_INPUT, run_command
from PersonalWAB.settings import converter, default_of, flag_name, is_boolean, parse_many, settings_fields, spec_of
from tests.test_command_help import COMMAND_LIST

REFUSED = object()


def _classes_of(target: str) -> list[tuple[type, ...]]:
    """The settings classes each parser of a command is built from (its `--help` builds them all)."""
    built: list[tuple[type, ...]] = []
    original = settings_module.build_parser

    def recording(*classes: type, **options: Any) -> argparse.ArgumentParser:
        built.append(classes)
        return original(*classes, **options)

    module, _, function = target.partition(":")
    settings_module.build_parser = recording  # type: ignore[assignment]
    try:
        with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit):
            getattr(importlib.import_module(module), function)(["--help"])
    finally:
        settings_module.build_parser = original
    return built


COMMAND_SETTINGS = {f"{name} ({'+'.join(c.__name__ for c in classes)})": classes
                    for name, target in COMMAND_LIST for classes in _classes_of(target)}
SETTINGS = [(command, flag_name(item)) for command, classes in COMMAND_SETTINGS.items()
            for item in settings_fields(*classes) if not spec_of(item).section]


def _item(classes: tuple[type, ...], flag: str) -> Any:
    return next(item for item in settings_fields(*classes) if flag_name(item) == flag)


def _required_values(classes: tuple[type, ...]) -> dict[str, Any]:
    """A value for each setting the command cannot run without (positional files, required flags)."""
    values: dict[str, Any] = {}
    for item in settings_fields(*classes):
        spec = spec_of(item)
        if spec.required or (spec.positional and spec.nargs in ("+", None)):
            one = spec.choices[0] if spec.choices else "x"
            values[flag_name(item)] = [one] if spec.nargs in ("+", "*", 1) else one
    return values


def _written(mapping: dict[str, Any], folder: Path) -> tuple[Path, dict[str, Any]]:
    """A settings file holding `mapping`, and what the file says (YAML reads some text back
    otherwise than it was given, e.g. a NEL character as a space)."""
    path = folder / "settings.yaml"
    path.write_text(yaml.safe_dump(mapping, allow_unicode=True), encoding="utf-8")
    return path, yaml.safe_load(path.read_text(encoding="utf-8"))


def _from_config(classes: tuple[type, ...], path: Path) -> tuple[int, str, Any]:
    """(exit status, stderr, the settings) of the command's settings read from the file `path`."""
    parsed: list[Any] = []

    def command(argv: list[str] | None) -> int:
        parsed.extend(parse_many(classes, argv))
        return 0

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = run_command(command, ["--config", str(path)])
    return code, err.getvalue(), parsed


def _value(parsed: list[Any], item: Any) -> Any:
    return next(getattr(one, item.name) for one in parsed if hasattr(one, item.name))


def _from_command_line(classes: tuple[type, ...], item: Any, texts: list[str], required: dict[str, Any]) -> Any:
    """What the flag takes from `texts` on the command line, each as one value of it (REFUSED when
    the parser refuses them)."""
    argv = []
    for flag, value in required.items():
        if flag != flag_name(item):
            is_positional = spec_of(_item(classes, flag)).positional
            argv += [*([] if is_positional else [f"--{flag}"]), *(value if isinstance(value, list) else [value])]
    given = ["--", *texts] if spec_of(item).positional else [f"--{flag_name(item)}={text}" for text in texts]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parsed = parse_many(classes, [*argv, *given])
    except SystemExit:
        return REFUSED
    return _value(parsed, item)


def _as_flag_text(value: Any) -> str | None:
    """The text the command line would give for a YAML scalar whose reading is that text (None:
    no such text: a boolean or a float, whose YAML reading is not what a flag of text receives)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


SCALARS = st.one_of(st.booleans(), st.integers(-10**6, 10**6), st.floats(), st.text(max_size=12), st.none(),
                    st.sampled_from(["true", "1", "0", "-1", "nan", "1.5", "0/4", "1/2", "a=b", "lucene", "0.15,0.6",
                                     "test", "md", "release", "off"]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.text(max_size=4), SCALARS, max_size=2))


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                                  HealthCheck.too_slow])
@given(choice=st.sampled_from(SETTINGS), value=VALUES)
def test_every_setting_of_every_command_takes_a_config_value_as_its_flag_or_names_key_and_file(choice, value):
    command, flag = choice
    classes = COMMAND_SETTINGS[command]
    item = _item(classes, flag)
    required = _required_values(classes)
    with tempfile.TemporaryDirectory() as folder:
        path, said = _written({**required, flag: value}, Path(folder))
        value = said[flag]
        code, err, parsed = _from_config(classes, path)
        if value is None:  # null is the setting's default, as the key left out gives it
            default = _from_config(classes, _written(required, Path(folder))[0])[2]
            assert code == EXIT_BAD_INPUT or (default_of(item) is None
                                              and _value(parsed, item) == _value(default, item))
        if code:
            assert code == EXIT_BAD_INPUT
            assert err.count("\n") == 1 and f"--config {folder}/settings.yaml: {flag}" in err, err
            assert "Traceback" not in err
            return
    taken = _value(parsed, item)
    listed = spec_of(item).nargs in ("+", "*", 1)
    items = value if isinstance(value, list) else [value]
    if isinstance(value, dict) or (isinstance(value, list) and not listed) or (listed and not items):
        pytest.fail(f"{command}: {flag}: {value!r} taken as {taken!r}")
    if value is None:
        return
    texts = []
    for one in items:
        if isinstance(one, bool):  # only a boolean setting takes a YAML boolean, as itself
            assert is_boolean(item) and taken is one, (command, flag, one, taken)
            return
        text = _as_flag_text(one)
        if text is None:  # a float: only a setting with a converter (a number, a path) takes it, as its text
            assert converter(item) is not None, (command, flag, one)
            text = repr(one)
        texts.append(text)
    expected = _from_command_line(classes, item, texts, required)
    assert expected is not REFUSED and _same(taken, expected), (command, flag, value, taken, expected)


def test_the_property_covers_every_command():
    names = {command.split(" (")[0] for command in COMMAND_SETTINGS}
    assert {"pwab run", "pwab reproduce", "pwab leaderboard export", "pwab data synthetic", "puma score",
            "puma run", "puma sft", "puma merge_shards"} <= names
    assert len(SETTINGS) > 300
