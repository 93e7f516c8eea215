"""How a PUMA step reads its settings: the step's settings dataclass (`PersonalWAB.settings`)
over the defaults its recipe file gives the step, its outputs checked before any work, and
how a step ends on bad input.

A step's value of a setting comes from, last wins: the dataclass default (the documented
default), the chosen recipe's `steps.<step>` section (`PUMA/configs/<recipe>.yaml`),
`--config FILE.yaml`, the command line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from PersonalWAB.cli import BAD_INPUT, run_command
from PersonalWAB.errors import DataError
from PersonalWAB.outputs import FILE, FOLDER, OutputChoice, claim_outputs
from PersonalWAB import settings
from PersonalWAB.settings import (CONFIG_FLAG, flag_name, given, make, parse_namespace,
                                 read_config_mapping, settings_fields)
from PersonalWAB.schema_types import Task

if TYPE_CHECKING:
    from PersonalWAB.data.loader import BenchmarkData

T = TypeVar("T")
# A step's settings problems are ValueErrors naming the flag (e.g. --recipe, an input another
# recipe made): one line and exit 2, like a DataError or an output that cannot be written.
STEP_BAD_INPUT = (*BAD_INPUT, ValueError)
# What records written before every step took one name call a step (an output they name stays the step's own).
EARLIER_RECORD_NAMES = {"data": ("data_function", "data_param"), "generate": ("generate_function", "generate_param"),
                        "merge_shards": ("generate_function", "generate_param")}
# The config fields that name a step's output (each the step's `--out`): a folder or a file.
OUTPUT_FIELDS = {"output_dir": FOLDER, "out_dir": FOLDER, "output_file": FILE, "out": FOLDER}


def made_by_step(step: str) -> Callable[[Path], bool]:
    """Whether an existing output is one `step` wrote: a PUMA record beside it (in a folder: any
    of its records) names the step, or a training step's folder holds its checkpoints (GRPO, which
    writes no record: its log)."""
    import json

    from PUMA.recipe import RECORD_NAME, RECORD_SUFFIX, record_path

    from PUMA.steps import BY_NAME, LAUNCHED

    steps = (step, *BY_NAME[step].writes_as, *EARLIER_RECORD_NAMES.get(step, ())) if step in BY_NAME else (step,)

    def names_step(record: Path) -> bool:
        try:
            content = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(content, dict) and content.get("step") in steps

    def own(path: Path) -> bool:
        if not path.is_dir():
            return names_step(record_path(path))
        if step in LAUNCHED and (any(path.glob("checkpoint-*/trainer_state.json"))
                                       or (step == "grpo" and (path / "grpo_log.jsonl").is_file())):
            return True
        return any(map(names_step, [path / RECORD_NAME, *path.glob(f"*{RECORD_SUFFIX}")]))

    return own


def check_step_outputs(config: Any, step: str, overwrite: bool = False) -> None:
    """Claim the step's outputs by the output rule (`PersonalWAB.outputs`) before it loads a
    model or data: writable, none of its inputs, and not an output of something else unless
    --overwrite; DataError naming the flag otherwise."""
    outputs = {item.name: OUTPUT_FIELDS[item.name] for item in settings_fields(type(config))
               if item.name in OUTPUT_FIELDS}
    claim_outputs(config, outputs, own=made_by_step(step), overwrite=overwrite)


def chosen_recipe(argv: Sequence[str], default: str = "release", aliases: Sequence[str] = ()) -> str:
    """The `--recipe` a command line asks for (or one of its `aliases`): the flag, else its
    `--config` file's, else `default`."""
    flags = ("--recipe", *aliases)
    for flag in flags:
        if given(argv, flag):
            return str(given(argv, flag))
    config = given(argv, CONFIG_FLAG)
    if config:
        loaded = read_config_mapping(config)  # a file that cannot be read is named here
        for flag in flags:
            if loaded.get(flag.removeprefix("--")):
                return str(loaded[flag.removeprefix("--")])
    return default


def recipe_defaults(cls: type, step: str, recipe: str) -> dict[str, Any]:
    """The values recipe `recipe` (a name or a file, checked when read) gives the settings of
    `step`, by field name."""
    from PUMA.recipe import step_settings

    names = {flag_name(item): item.name for item in settings_fields(cls)}
    return {names[key]: value for key, value in step_settings(recipe, step).items()}


def recipe_config(cls: type[T], step: str, recipe: str = "release", /, **settings: Any) -> T:
    """The settings `cls` of `step` under `recipe` (a name or a file) as `puma STEP --recipe RECIPE`
    makes them without other flags, then `settings` over them: for code that builds a step's
    settings in memory (benchmarks, tests)."""
    return cls(**{**recipe_defaults(cls, step, recipe), "recipe": recipe, **settings})


def parse_step(cls: type[T], argv: Sequence[str] | None, prog: str, doc: str | None, step: str) -> T:
    """The step's settings from `argv` (flags over `--config` over the recipe's step defaults
    over the dataclass defaults), its outputs checked."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = settings.build_parser(cls, OutputChoice, prog=prog, description=doc)
    parser.set_defaults(**recipe_defaults(cls, step, chosen_recipe(args, _default_recipe(cls))))
    config, choice = make([cls, OutputChoice], parse_namespace(parser, settings_fields(cls, OutputChoice), args))
    check_step_outputs(config, step, choice.overwrite)
    return config


def _default_recipe(cls: type) -> str:
    for item in settings_fields(cls):
        if item.name == "recipe":
            return str(item.default)
    return "release"


def output_setting(cls: type) -> str:
    """The field name of a step's `--out`."""
    for item in settings_fields(cls):
        if flag_name(item) == "out":
            return item.name
    raise TypeError(f"{cls.__name__} has no --out setting")


def run_step(main: Callable[[list[str] | None], int | None]) -> int:
    """`python -m PUMA.<step>`: the step's exit status, bad input in one line (exit 2), the
    libraries' warnings kept out of its console (`PUMA.quiet`)."""
    from PUMA.quiet import quiet_libraries

    quiet_libraries()
    return run_command(main, None, STEP_BAD_INPUT)


def nonempty_split(data: BenchmarkData, name: str, flag: str) -> list[Task]:
    """The tasks of split `name`, or a DataError naming `flag` when it is unknown or empty
    (checked before a step's long work: the memory embedding, building the engines)."""
    if name not in data.tasks:
        raise DataError(f"{flag} {name!r}: no such split; expected one of {', '.join(sorted(data.tasks))}")
    tasks = data.split(name)
    if not tasks:
        raise DataError(f"{flag} {name}: the {name!r} split of {data.data_dir} has no tasks")
    return tasks
