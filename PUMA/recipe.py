"""PUMA's recipes and the record each step leaves next to its output.

A recipe is a file of step settings: `steps.<step>` holds settings of that step (flag names,
`puma STEP --help`), `steps.agent` settings of the puma agent (`pwab run`'s `--puma_*`). It is the
layer under `--config`: a step's value of a setting comes from, last wins, the dataclass default,
the recipe, `--config FILE.yaml`, the command line (`PUMA.cli.parse_step`). `--recipe` takes
`release`, `improved` (the files in PUMA/configs/) or the path of a recipe file of one's own.

`release.yaml` does every step as the release's code does (DESIGN §10), quirks included, so a
researcher gets the release's model; its values are the settings' documented defaults. It also
holds why a recipe may choose another value (`reasons`), where the paper and the release's
scripts disagree (`readings`), and the release's bugs every recipe keeps fixed (`bug_fixes`).
Any other recipe file names only what it changes: the rest is release.yaml's. A recipe's
departures from the release are computed, never looked up by its name: every setting whose
value differs from release.yaml's (or, for a setting release.yaml leaves out, from the step's
default), with release.yaml's reason for that value where it gives one.

Every step takes `--recipe` (default `release`), refuses inputs made under another recipe, and
writes a record (`puma_run.json` inside an output folder, `<name>.puma_run.json` beside an output
file) naming the recipe, its departures from the release, the step's settings and its inputs.

Nothing here loads torch: the runner imports it to label its result files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, is_dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from PersonalWAB.scratch import atomic_write_text
from PUMA.steps import AGENT_SETTINGS, BY_NAME, RECIPE_SECTIONS

RECIPES = ("release", "improved")  # the recipe files the project ships, PUMA/configs/<name>.yaml
RECIPE_HELP = ("PUMA recipe: release (every step as the release's code), improved (PUMA/configs/improved.yaml), "
               "or a recipe file of your own (YAML: steps.<step>.<setting>, the rest as release.yaml)")
AGENT = AGENT_SETTINGS.name  # the recipe section of the puma agent's settings (`pwab run --agent_strategy puma`)
SECTIONS = (*RECIPE_SECTIONS, AGENT)
RECORD_NAME = "puma_run.json"
RECORD_SUFFIX = ".puma_run.json"
# The libraries whose versions decide what a step computes (each record names the ones installed).
LIBRARIES = ("torch", "transformers", "tokenizers", "trl", "peft", "accelerate", "datasets", "sentencepiece")
CONFIGS = Path(__file__).with_name("configs")
RELEASE_FILE = CONFIGS / "release.yaml"


@dataclass(frozen=True)
class Departure:
    """One way a run differs from the release, at one step, and why."""

    step: str  # data | sft | generate | score | dpo_data | dpo | agent ...
    what: str
    why: str

    def line(self) -> str:
        return f"{self.step}: {self.what} ({self.why})"


@dataclass(frozen=True)
class Reason:
    """Why a recipe may give a setting a value other than the release's (release.yaml `reasons`)."""

    step: str
    setting: str
    value: Any
    what: str
    why: str


@dataclass(frozen=True)
class Reading:
    """A setting where the paper and the release's scripts state different values (or a script
    cannot run as shipped): the value the release recipe takes, the paper's, and where each is said."""

    steps: list[str]
    setting: str
    release: Any
    paper: list[Any]
    source: str

    def line(self, value: Any) -> str:
        """What a step run with `value` follows."""
        paper = ", ".join(map(str, self.paper)) or "no value"
        if value == self.release:
            follows = "the release recipe's reading" + (", also the paper's" if value in self.paper else "")
        elif value in self.paper:
            follows = f"the paper's stated value, not the release recipe's ({self.release})"
        else:
            follows = f"neither the release recipe's reading ({self.release}) nor the paper's ({paper})"
        return f"{self.setting} {value}: {follows}; {self.source}"


@dataclass(frozen=True)
class ReleaseBook:
    """release.yaml: the release's step settings and what it says about departing from them."""

    steps: dict[str, dict[str, Any]]
    reasons: tuple[Reason, ...]
    readings: tuple[Reading, ...]
    bug_fixes: tuple[Departure, ...]
    shared_with_release: str

    def value(self, section: str, key: str) -> Any:
        """The release's value of a setting: release.yaml's, else the setting's default."""
        if key in self.steps.get(section, {}):
            return self.steps[section][key]
        return field_defaults(section).get(key)

    def why(self, section: str, key: str, value: Any) -> list[Departure]:
        return [Departure(section, r.what, r.why) for r in self.reasons
                if r.step == section and r.setting == key and r.value == value]


@dataclass(frozen=True)
class Recipe:
    """A recipe: each section's settings (release.yaml's, then its file's) and those in which it
    differs from the release."""

    name: str  # release | improved | the recipe file as given
    steps: dict[str, dict[str, Any]]
    changes: dict[str, dict[str, Any]]  # section -> {setting: value} where the file differs from the release

    def departure_lines(self, section: str, values: Mapping[str, Any]) -> list[str]:
        """The departures of `values` (a section's settings, by flag name) from the release: each
        setting release.yaml gives or gives a reason to change, or this recipe changes, whose value is
        not the release's; with release.yaml's reason where this recipe chose that value."""
        book = release_book()
        changes = self.changes.get(section, {})
        keys = dict.fromkeys([*book.steps.get(section, {}), *(r.setting for r in book.reasons if r.step == section),
                              *changes])
        lines = []
        for key in keys:
            if key not in values or values[key] == book.value(section, key):
                continue
            chosen = key in changes and changes[key] == values[key]
            reasons = book.why(section, key, values[key]) if chosen else []
            lines += [d.line() for d in reasons] or [Departure(
                section, f"{key} {values[key]} (the release: {book.value(section, key)})",
                f"set by recipe {self.name}" if chosen else "given for this run").line()]
        return lines

    def departures(self, step: str | None = None) -> list[str]:
        """This recipe's own departures from the release (one section's, or all) as lines: what
        makes a run of it differ from the release's (the release's bug fixes, which every recipe
        keeps, are `bug_fixes`)."""
        sections = [step] if step else list(SECTIONS)
        return [line for section in sections for line in self.departure_lines(section, self.steps.get(section, {}))]

    def value(self, section: str, key: str) -> Any:
        """The recipe's value of a setting (the release's where it says nothing)."""
        if key in self.steps.get(section, {}):
            return self.steps[section][key]
        return release_book().value(section, key)


def section_class(section: str) -> type:
    """The settings class whose flags a recipe section sets."""
    return (AGENT_SETTINGS if section == AGENT else BY_NAME[section]).settings_class()


@cache
def field_defaults(section: str) -> dict[str, Any]:
    """A section's settings' documented defaults, by flag name."""
    from PersonalWAB.settings import default_of, flag_name, settings_fields

    if section not in SECTIONS:
        return {}
    return {flag_name(item): default_of(item) for item in settings_fields(section_class(section))}


def bug_fixes(step: str | None = None) -> list[str]:
    """The release's bugs every recipe keeps fixed (one record step's, or all), as lines."""
    return [d.line() for d in release_book().bug_fixes if step is None or d.step == step]


def _mapping(path: Path, where: str, value: Any, keys: Mapping[str, type], required: tuple[str, ...]
             ) -> dict[str, Any]:
    """`value` as a mapping of the given keys (each of its type; `object`: any), or an error naming
    the file and key."""
    if not isinstance(value, dict):
        raise ValueError(f"{path}: {where or 'the file'}: expected a mapping, got {type(value).__name__}")
    prefix = f"{where}." if where else ""
    for key in value:
        if key not in keys:
            raise ValueError(f"{path}: unknown key {prefix}{key} (expected: {', '.join(keys)})")
    for key in required:
        if key not in value:
            raise ValueError(f"{path}: missing key {prefix}{key}")
    for key, kind in keys.items():
        if key in value and kind is not object and type(value[key]) is not kind:
            raise ValueError(f"{path}: {prefix}{key}: expected {kind.__name__}, got {value[key]!r}")
    return value


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read the recipe: {exc}") from exc


def _steps(path: Path, steps: Any) -> dict[str, dict[str, Any]]:
    """A recipe file's `steps`: each a section of SECTIONS mapping its settings (by flag name) to
    values each checked as its flag checks it."""
    from PersonalWAB.settings import config_settings, flag_name, settings_fields

    _mapping(path, "steps", steps, {section: dict for section in SECTIONS}, ())
    checked: dict[str, dict[str, Any]] = {}
    for section, values in steps.items():
        items = settings_fields(section_class(section))
        flags = {item.name: flag_name(item) for item in items}
        given = config_settings(values, items, str(path), f"steps.{section}")  # by field name
        checked[section] = {flags[name]: value for name, value in given.items()}
    return checked


def read_release_book(path: Path) -> ReleaseBook:
    """A release.yaml, checked: an unknown or missing key or a value of the wrong type is a
    ValueError naming the file and key."""
    keys = {"steps": dict, "reasons": list, "readings": list, "bug_fixes": list, "shared_with_release": str}
    data = _mapping(path, "", _yaml(path), keys, tuple(keys))
    entry = {"step": str, "what": str, "why": str}
    fixes = tuple(Departure(**_mapping(path, f"bug_fixes[{i}]", e, entry, tuple(entry)))
                  for i, e in enumerate(data["bug_fixes"]))
    reason_keys = {**entry, "setting": str, "value": object}
    reasons = tuple(Reason(**_mapping(path, f"reasons[{i}]", e, reason_keys, tuple(reason_keys)))
                    for i, e in enumerate(data["reasons"]))
    reading_keys = {"steps": list, "setting": str, "release": object, "paper": list, "source": str}
    readings = tuple(Reading(**_mapping(path, f"readings[{i}]", e, reading_keys, tuple(reading_keys)))
                     for i, e in enumerate(data["readings"]))
    return ReleaseBook(_steps(path, data["steps"]), reasons, readings, fixes, data["shared_with_release"])


@cache
def release_book() -> ReleaseBook:
    """PUMA/configs/release.yaml, read and checked once."""
    return read_release_book(RELEASE_FILE)


def recipe_file(name: str) -> Path:
    """The file of recipe `name`: a shipped recipe's, else `name` as a path to a YAML file."""
    if name in RECIPES:
        return CONFIGS / f"{name}.yaml"
    path = Path(name)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise ValueError(f"--recipe {name!r}: expected {', '.join(RECIPES)} or a recipe file (.yaml)")
    return path


def read_recipe(name: str, path: Path, book: ReleaseBook) -> Recipe:
    """The recipe in `path` (named `name`) over the release's settings in `book`: its `steps`,
    each setting checked as its flag checks it."""
    data = _mapping(path, "", _yaml(path), {"steps": dict}, ("steps",))
    own = _steps(path, data["steps"])
    steps = {section: {**book.steps.get(section, {}), **own.get(section, {})} for section in SECTIONS}
    changes = {section: {k: v for k, v in values.items() if v != book.value(section, k)}
               for section, values in own.items()}
    return Recipe(name, steps, {section: values for section, values in changes.items() if values})


@cache
def get_recipe(name: str) -> Recipe:
    """Recipe `name` (a shipped recipe or a file), read and checked once."""
    path, book = recipe_file(name), release_book()
    if path.resolve() == RELEASE_FILE.resolve():
        return Recipe(name, {s: dict(v) for s, v in book.steps.items()}, {})
    return read_recipe(name, path, book)


def step_settings(recipe: str, step: str) -> dict[str, Any]:
    """The settings recipe `recipe` gives `step` (by flag name; {} when it gives none)."""
    return dict(get_recipe(recipe).steps.get(step) or {})


def record_path(output: str | Path) -> Path:
    """Where a step's record goes: inside an output folder, or beside an output file."""
    output = Path(output)
    if output.is_dir() or not output.suffix:
        return output / RECORD_NAME
    return output.with_name(output.name.removesuffix(".json") + RECORD_SUFFIX)


def read_record(output: str | Path) -> dict[str, Any] | None:
    path = record_path(output)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _changes_text(changes: Mapping[str, Mapping[str, Any]]) -> str:
    return json.dumps(changes, sort_keys=True, default=str)


def check_inputs(recipe: Recipe, inputs: Mapping[str, str | None]) -> None:
    """Refuse an input made under a recipe with other settings (inputs without a record, e.g.
    files made by hand or by the release's scripts, are taken as they are)."""
    for flag, path in inputs.items():
        if not path:
            continue
        record = read_record(path)
        if record is None or "recipe_changes" not in record:
            continue
        if _changes_text(record["recipe_changes"]) != _changes_text(recipe.changes):
            raise ValueError(f"{flag} {path}: made with --recipe {record.get('recipe')} (see "
                             f"{record_path(path)}), this step runs --recipe {recipe.name}, whose settings differ; "
                             f"rerun that step with --recipe {recipe.name} or run this one with --recipe "
                             f"{record.get('recipe')}")


def reading_lines(step: str, settings: dict[str, Any]) -> list[str]:
    """For each setting of this step where the paper and the release's scripts disagree, what
    the value it ran with follows."""
    return [reading.line(settings[reading.setting]) for reading in release_book().readings
            if step in reading.steps and reading.setting in settings]


def _plain(settings: Any) -> dict[str, Any]:
    """A step's resolved settings (`PersonalWAB.settings.resolved`), or a mapping as it is."""
    from PersonalWAB.settings import resolved

    return resolved(settings) if is_dataclass(settings) else dict(settings)


def _by_flag(step: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A step's settings by flag name (records hold them by field name)."""
    from PersonalWAB.settings import flag_name, settings_fields

    if step not in SECTIONS:
        return dict(settings)
    names = {item.name: flag_name(item) for item in settings_fields(section_class(step))}
    return {names.get(key, key): value for key, value in settings.items()}


def step_departures(step: str, recipe: Recipe, settings: Any) -> list[str]:
    """How a step run with `settings` under `recipe` differs from the release: the release's bugs
    every recipe keeps fixed, then every setting whose value is not the release's."""
    values = _by_flag(step, _plain(settings))
    return [*bug_fixes(step), *recipe.departure_lines(step, values)]


def library_versions() -> dict[str, str]:
    """The installed version of each library of LIBRARIES (read from the installed metadata,
    nothing imported); a library not installed is left out."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def write_record(output: str | Path, step: str, recipe: Recipe, settings: Any,
                 inputs: Mapping[str, str | None] | None = None, **facts: Any) -> Path:
    """Write the step's record next to `output` (on the main process only under accelerate)."""
    if int(os.environ.get("RANK", "0")) != 0:
        return record_path(output)
    path = record_path(output)
    plain = _plain(settings)
    departures = [*step_departures(step, recipe, plain), *facts.pop("extra_departures", [])]
    record = {"step": step, "recipe": recipe.name, "departures_from_release": departures,
              "recipe_departures": recipe.departures(), "recipe_changes": recipe.changes,
              "shared_with_release": release_book().shared_with_release,
              "readings": reading_lines(step, plain),
              "settings": plain, "inputs": {k: v for k, v in (inputs or {}).items() if v},
              "libraries": library_versions(), "written": datetime.now(UTC).isoformat(timespec="seconds"), **facts}
    if facts.get("base_model"):  # the base model the step ran on: where it is not Llama-2-like, the step differs
        from PUMA.modeling import family_departures

        lines = family_departures(facts["base_model"], step)
        record["departures_from_release"] = list(dict.fromkeys([*record["departures_from_release"], *lines]))
    atomic_write_text(path, json.dumps(record, indent=1, ensure_ascii=False, default=str))
    return path
