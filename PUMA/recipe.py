"""PUMA's two training recipes and the record each step leaves next to its output.

`release` does every step as the release's code does (DESIGN §10), quirks included, so a
researcher gets the release's model; `improved` keeps everything else and changes only
the choices listed in its `departures`, each with its reason. Each recipe is data,
`PUMA/configs/<name>.yaml`: its switches (the fields of `Recipe`: every behaviour in which
the recipes differ is one, and no code asks a recipe's name), its step settings (`steps`:
each step's settings under this recipe, the defaults `PUMA.cli.parse_step` gives the step)
and its departures from the release; release.yaml also holds the release's bugs every
recipe keeps fixed (`bug_fixes`). The files are read and checked once, on first use. Every step takes
`--recipe` (default `release`), refuses inputs another recipe made, and writes a record
(`puma_run.json` inside an output folder, `<name>.puma_run.json` beside an output file)
naming the recipe, its departures from the release, the step's settings and its inputs.

Nothing here loads torch: the runner imports it to label its result files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from PersonalWAB.scratch import atomic_write_text
from PUMA.steps import RECIPE_SECTIONS

RECIPES = ("release", "improved")
RECORD_NAME = "puma_run.json"
RECORD_SUFFIX = ".puma_run.json"
# The libraries whose versions decide what a step computes (each record names the ones installed).
LIBRARIES = ("torch", "transformers", "tokenizers", "trl", "peft", "accelerate", "datasets", "sentencepiece")


@dataclass(frozen=True)
class Departure:
    """One way a recipe differs from the release, at one step, and why."""

    step: str  # data | sft | score | dpo_data | dpo | agent ...
    what: str
    why: str

    def line(self) -> str:
        return f"{self.step}: {self.what} ({self.why})"


@dataclass(frozen=True)
class Recipe:
    """What differs between the two recipes, step by step (everything else is shared)."""

    name: str
    distinct_recommend_label: bool  # step 1
    raw_search_labels: bool  # step 1: an LLM search label kept as returned (False: cleaned, empty -> fallback)
    label_only_loss: bool  # step 2: False = the release's loss over max-length EOS padding
    sft_batch: tuple[int, int, int]  # step 2: (per-device batch, accumulation per process, global batch), 0 = unset
    dpo_batch: tuple[int, int, int]  # step 6: the same
    release_trainer: bool  # steps 2 and 6: the release's epoch order over accumulation and its adamw_torch
    release_launch: bool  # steps 2 and 6 on GPUs: DeepSpeed ZeRO-2 fp16 by default, other launches recorded
    gpu_train_dtype: str  # step 2 / 6 on a GPU: "float16" | "bfloat16"
    release_generation: bool  # step 3 (and live step 7): the release's prompts, GenerationConfig and decoding
    raw_review_cosine: bool  # step 4: a review candidate's raw cosine, "" for an empty one
    skip_uninformative_pairs: bool  # step 5
    keep_prompt_whole: bool  # steps 5-6: cut the memory instead of the prompt's start
    training_prompt_at_eval: bool  # step 7
    predicted_type_memory: bool  # step 7
    strict_release_parsing: bool  # steps 4 and 7: outputs read as the release reads them (unstripped)
    gpu_eval_dtype: str  # step 7 on a GPU
    repeat_action: bool  # step 7 multi-turn: the decided action every step (the release's agent)
    from_release: tuple[Departure, ...] = field(repr=False)  # the release's bug fixes, then the recipe's own
    steps: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # step -> its settings
    bug_fixes: int = 0  # how many of `from_release` are release.yaml's bug fixes (the first ones)

    def departures(self, step: str | None = None) -> list[str]:
        """This recipe's departures from the release (one step's, or all), as lines."""
        return [d.line() for d in self.from_release if step is None or d.step == step]

    def own_departures(self, step: str | None = None) -> list[str]:
        """The departures this recipe chose, without the bug fixes every recipe keeps (none for
        `release`): what makes a run of it differ from the release's."""
        return [d.line() for d in self.from_release[self.bug_fixes:] if step is None or d.step == step]


@dataclass(frozen=True)
class Reading:
    """A setting where the paper and the release's scripts state different values (or a script
    cannot run as shipped): the value the release recipe takes, the paper's, and where each is said."""

    steps: list
    setting: str
    release: Any
    paper: list
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
class RecipeBook:
    """The recipes as their files define them, what every recipe shares with the release, and
    where the paper and the release's scripts disagree."""

    recipes: dict[str, Recipe]
    shared_with_release: str
    readings: tuple[Reading, ...] = ()


CONFIGS = Path(__file__).with_name("configs")
_SWITCHES = tuple(f.name for f in fields(Recipe) if f.name not in ("name", "from_release", "steps", "bug_fixes"))
# The top-level keys of each recipe file (<name>.yaml): release.yaml also holds what every recipe shares
# with the release and the release's bugs every recipe keeps fixed.
_FILE_KEYS = {"release": {"switches": dict, "steps": dict, "shared_with_release": str, "readings": list,
                          "bug_fixes": list},
              "improved": {"switches": dict, "steps": dict, "departures": list}}


def _checked(path: Path, where: str, mapping: Any, types: Mapping[str, type]) -> dict[str, Any]:
    """`mapping` with exactly the keys of `types`, each of its type (`object`: any), or an error
    naming the file and key."""
    if not isinstance(mapping, dict):
        raise ValueError(f"{path}: {where or 'the file'}: expected a mapping, got {type(mapping).__name__}")
    prefix = f"{where}." if where else ""
    for key in mapping:
        if key not in types:
            raise ValueError(f"{path}: unknown key {prefix}{key} (expected: {', '.join(types)})")
    for key, kind in types.items():
        if key not in mapping:
            raise ValueError(f"{path}: missing key {prefix}{key}")
        if get_origin(kind) is tuple:  # a fixed-length list of ints in the file
            value = mapping[key]
            if not (isinstance(value, list) and len(value) == len(get_args(kind))
                    and all(type(v) is int for v in value)):
                raise ValueError(f"{path}: {prefix}{key}: expected a list of {len(get_args(kind))} integers, "
                                 f"got {value!r}")
            mapping[key] = tuple(value)
        elif kind is not object and type(mapping[key]) is not kind:
            raise ValueError(f"{path}: {prefix}{key}: expected {kind.__name__}, got {mapping[key]!r}")
    return mapping


def _read(path: Path, name: str) -> dict[str, Any]:
    """One recipe file, checked: its switches, and its lists of departures as `Departure`s."""
    import yaml

    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read recipe {name!r}: {exc}") from exc
    data = _checked(path, "", content, _FILE_KEYS[name])
    hints = get_type_hints(Recipe)
    _checked(path, "switches", data["switches"], {key: hints[key] for key in _SWITCHES})
    for step, values in data["steps"].items():
        if step not in RECIPE_SECTIONS or not isinstance(values, dict):
            raise ValueError(f"{path}: steps.{step}: expected a mapping of one of the steps "
                             f"{', '.join(RECIPE_SECTIONS)} to its settings")
    entry_keys = {f.name: str for f in fields(Departure)}
    for key in ("bug_fixes", "departures"):
        if key in data:
            data[key] = tuple(Departure(**_checked(path, f"{key}[{i}]", entry, entry_keys))
                              for i, entry in enumerate(data[key]))
    if "readings" in data:
        reading_keys = {"steps": list, "setting": str, "release": object, "paper": list, "source": str}
        data["readings"] = tuple(Reading(**_checked(path, f"readings[{i}]", entry, reading_keys))
                                 for i, entry in enumerate(data["readings"]))
    return data


def load_recipes(configs: Path = CONFIGS) -> RecipeBook:
    """Every recipe from its file in `configs`; a recipe departs from the release first where
    release.yaml's `bug_fixes` say, then where its own `departures` say."""
    files = {name: _read(configs / f"{name}.yaml", name) for name in RECIPES}
    fixes = files["release"]["bug_fixes"]
    recipes = {name: Recipe(name, **data["switches"], from_release=fixes + data.get("departures", ()),
                            steps=data["steps"], bug_fixes=len(fixes)) for name, data in files.items()}
    return RecipeBook(recipes, files["release"]["shared_with_release"], files["release"]["readings"])


@cache
def _book() -> RecipeBook:
    return load_recipes()


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"--recipe {name!r}: expected one of {', '.join(RECIPES)}")
    return _book().recipes[name]


def step_settings(recipe: str, step: str) -> dict[str, Any]:
    """The settings recipe file `recipe` gives `step` (by flag name; {} when it gives none)."""
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


def check_inputs(recipe: Recipe, inputs: Mapping[str, str | None]) -> None:
    """Refuse an input that a step of the other recipe wrote (inputs without a record, e.g.
    files made by hand or by the release's scripts, are taken as they are)."""
    for flag, path in inputs.items():
        if not path:
            continue
        record = read_record(path)
        if record is not None and record.get("recipe") != recipe.name:
            raise ValueError(f"{flag} {path}: made with --recipe {record.get('recipe')} (see "
                             f"{record_path(path)}), this step runs --recipe {recipe.name}; rerun that step "
                             f"with --recipe {recipe.name} or run this one with --recipe {record.get('recipe')}")


def reading_lines(step: str, settings: dict[str, Any]) -> list[str]:
    """For each setting of this step where the paper and the release's scripts disagree, what
    the value it ran with follows."""
    return [reading.line(settings[reading.setting]) for reading in _book().readings
            if step in reading.steps and reading.setting in settings]


def _plain(settings: Any) -> dict[str, Any]:
    """A step's resolved settings (`PersonalWAB.settings.resolved`), or a mapping as it is."""
    from PersonalWAB.settings import resolved

    return resolved(settings) if is_dataclass(settings) else dict(settings)


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
    record = {"step": step, "recipe": recipe.name, "departures_from_release": recipe.departures(step),
              "all_departures_of_recipe": recipe.departures(),
              "shared_with_release": _book().shared_with_release,
              "readings": reading_lines(step, _plain(settings)),
              "settings": _plain(settings), "inputs": {k: v for k, v in (inputs or {}).items() if v},
              "libraries": library_versions(), "written": datetime.now(UTC).isoformat(timespec="seconds"), **facts}
    if facts.get("base_model"):  # the base model the step ran on: where it is not Llama-2-like, the step differs
        from PUMA.modeling import family_departures

        lines = family_departures(facts["base_model"], step)
        record["departures_from_release"] = list(dict.fromkeys([*record["departures_from_release"], *lines]))
    atomic_write_text(path, json.dumps(record, indent=1, ensure_ascii=False, default=str))
    return path
