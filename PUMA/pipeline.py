"""`puma run --config FILE.yaml [--steps 1,2,...]`: PUMA's seven steps in one command, from
one settings file.

    1  data           SFT data: function and parameter examples (PUMA.data all)
    2  sft, merge     LoRA SFT on function_param data (through PUMA.launch), merged into its base
    3  generate       function predictions of the train and test splits (generate_function), then
                      the train split's parameter candidates (generate_param)
    4  score          every candidate's Result Acc
    5  dpo_data       chosen / rejected pairs
    6  dpo            DPO with LoRA on the merged SFT model (through PUMA.launch)
    7  evaluate       the test split's parameters from the DPO model (generate_test), the puma
                      agent's run on them (`pwab run`, settings under `evaluate`), the result
                      file validated

What runs where is the steps table's (`calls` of each row of PUMA/steps.py): each call's stage,
the config section its settings come from, and the files it reads and writes under
`--work_dir`, so each step's inputs are the outputs of the steps before it. The settings file
holds shared keys and one section per call, each a mapping of that step's flags
(`puma STEP --help`):

    recipe: release             # every step's --recipe (a name or a recipe file)
    data_dir: data/synthetic    # steps 1, 4 and 7
    model_path: meta-llama/Llama-2-7b-chat-hf   # the base model (steps 1 and 2)
    work_dir: PUMA/run          # every output, at fixed names under it
    data: {mem_token_length: 192}
    sft: {num_train_epochs: 1}
    dpo: {max_length: 416}

A section names only what differs from the step's defaults (its recipe's `steps` section, then
the dataclass defaults). A setting an input was made with and the step must share (the
`carried` rules of PUMA/steps.py: the memory cut of the parameter data, the length step 5
fitted the pairs to) is taken from the input's record unless the section gives it.
generate_test starts from single greedy outputs (`num_return_sequences 1`, `num_beams 1`,
`do_sample 0`). Flags on the command line override the file's shared keys.

Each step runs in this process on its settings object, as `python -m PUMA.<step>` would run it;
a launched step (SFT, DPO) goes through `python -m PUMA.launch` with the same settings as flags,
and the evaluation is `pwab run` and `pwab leaderboard validate` in their own processes. The
first that fails stops the run with its exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, cast

from PersonalWAB.errors import DataError
from PersonalWAB.settings import (config_settings, flag_name, parse, setting, settings_fields,
                                  spec_of)
from PUMA.recipe import RECIPE_HELP, get_recipe, read_record
from PUMA.steps import STEPS, Call, Step

EVALUATION_STAGE = 7  # `pwab run` of the puma agent and the result file's validation close this stage
RESULT_NAME = "result_puma_singleturn.json"  # the evaluation's result file under --work_dir
# config section -> the step whose flags it may set (evaluate: `pwab run`'s, checked by it)
SECTIONS: dict[str, str | None] = {**{call.section: step.name for step in STEPS for call in step.calls},
                                   "evaluate": None}
STAGES = sorted({call.stage for step in STEPS for call in step.calls} | {EVALUATION_STAGE})


def stage_names() -> dict[int, str]:
    """Each stage's steps, as `--steps` lists them."""
    names: dict[int, list[str]] = {stage: [] for stage in STAGES}
    for step in STEPS:
        for call in step.calls:
            names[call.stage] = list(dict.fromkeys([*names[call.stage], step.name]))
    names[EVALUATION_STAGE].append("evaluate")
    return {stage: " + ".join(steps) for stage, steps in names.items()}


@dataclass
class PipelineBase:
    """`puma run`'s shared settings and the steps to run; `PipelineSettings` adds one section per
    config section of the steps table."""

    steps: str = setting(",".join(map(str, STAGES)), "comma-separated steps to run ("
                         + ", ".join(f"{number} {names}" for number, names in stage_names().items())
                         + "); a later step alone reads what earlier runs left in --work_dir")
    recipe: str = setting("release", f"every step's {RECIPE_HELP}", metavar="NAME|FILE")
    data_dir: str | None = setting(None, "the benchmark data (steps 1, 4 and 7)",
                                   default_text="the official data when placed, else the bundled synthetic data")
    model_path: str = setting("meta-llama/Llama-2-7b-chat-hf", "the base model: its tokenizer cuts step 1's memory, "
                              "step 2 trains an adapter on it")
    work_dir: str = setting("PUMA/run", "folder for every step's outputs, at fixed names")
    dry_run: bool = setting(False, "print each step's command instead of running it")

    def section(self, name: str) -> dict[str, Any]:
        """What config section `name` gives its step, by field name ({} where it gives nothing)."""
        section = getattr(self, name, None)
        return dict(section.values) if isinstance(section, Section) else {}


@dataclass(frozen=True)
class Section:
    """A `puma run` config section: settings of its step (`SECTIONS`) by field name, each checked as
    the step's flag checks it (the file gives them by flag name)."""

    name: str
    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, mapping: Any, where: str, name: str) -> Section:
        """Section `name` of a settings file (`where`): a mapping of its step's flags, each checked."""
        if not isinstance(mapping, dict):
            kind = "a YAML list" if isinstance(mapping, list) else f"the YAML value {mapping!r}"
            raise DataError(f"{where}: {name}: expected a mapping of the step's flags, got {kind}")
        return cls(name, config_settings(mapping, section_fields(name), where, name))


def _section(name: str) -> Any:
    return setting(None, f"the {name} section's settings, by flag name (in the --config file)", hidden=True,
                   factory=lambda: Section(name), section=Section.read)


PipelineSettings = cast(type[PipelineBase], make_dataclass(
    "PipelineSettings", [(name, Section, _section(name)) for name in SECTIONS], bases=(PipelineBase,)))
PipelineSettings.__doc__ = "`puma run`'s settings: the shared keys, the steps to run, and one section per call."
PipelineSettings.__module__ = __name__


@dataclass(frozen=True)
class Command:
    """One call of a stage: its title, the arguments after `python` that run it as a command, and,
    for a step that runs in this process, the step and its settings object."""

    step: int
    title: str
    args: tuple[str, ...]
    row: Step | None = None  # run in this process on `config` (None: `args` in a process of its own)
    config: Any = None


def flags(values: dict[str, Any]) -> list[str]:
    """Settings by flag name as command-line flags (a boolean as 1/0, a list as its items; None left out)."""
    argv: list[str] = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            argv += [f"--{key}", "1" if value else "0"]
        elif isinstance(value, (list, tuple)):
            argv += [f"--{key}", *map(str, value)]
        else:
            argv += [f"--{key}", str(value)]
    return argv


def command_line(cls: type, values: dict[str, Any]) -> list[str]:
    """Settings of `cls` by field name as its command line: operands first, then flags."""
    items = {item.name: item for item in settings_fields(cls)}
    operands = [str(values[name]) for name, item in items.items() if spec_of(item).positional and name in values]
    return operands + flags({flag_name(items[name]): value for name, value in values.items()
                             if not spec_of(items[name]).positional})


def section_fields(name: str) -> list[Any]:
    """The settings a section may give: its step's flags (evaluate: `pwab run`'s)."""
    from PUMA.steps import get_step

    step = SECTIONS[name]
    if step is None:
        from PersonalWAB.runner.config import run_settings_fields

        return run_settings_fields()
    return settings_fields(get_step(step).settings_class())


def pipeline_settings(sections: Mapping[str, Mapping[str, Any]] | None = None, **shared: Any) -> PipelineBase:
    """`puma run`'s settings made in code: `shared` keys, and `sections` by flag name, each read and
    checked as a settings file's would be."""
    read: dict[str, Any] = {name: Section.read(dict(values), "puma run", name)
                            for name, values in (sections or {}).items()}
    return PipelineSettings(**shared, **read)


def _carried(step: str, call: Call, settings: PipelineBase, inputs: dict[str, str]) -> dict[str, Any]:
    """The settings a call of `step` must share with its inputs (flag -> path), as their records say."""
    from PUMA.steps import CARRIED

    recipe, given_values = get_recipe(settings.recipe), settings.section(call.section)

    def value_of(name: str) -> Any:
        return given_values.get(name, call.wired.get(name, recipe.value(step, name)))

    values = {}
    for rule in CARRIED:
        if rule.step == step and rule.refuse and rule.applies(value_of) and rule.input_flag in inputs:
            recorded = ((read_record(inputs[rule.input_flag]) or {}).get("settings") or {})
            if rule.setting in recorded:
                values[rule.setting] = recorded[rule.setting]
    return values


def step_command(settings: PipelineBase, row: Step, call: Call, section: dict[str, Any],
                 reads: dict[str, str] | None = None, writes: dict[str, str] | None = None,
                 title: str | None = None) -> Command:
    """A call of `row`: its settings object (the recipe's values for the step, the call's wiring,
    what its inputs' records say it must share, then its config section by field name) and the
    same settings as its command line. `reads` / `writes`: files in place of the call's own
    (absolute, or under --work_dir)."""
    from PUMA.cli import recipe_config

    work, cls = Path(settings.work_dir), row.settings_class()
    names = {item.name: flag_name(item) for item in settings_fields(cls)}
    paths = {name: str(work / path) for name, path in {**call.reads, **(reads or {}), **call.writes,
                                                        **(writes or {})}.items()}
    inputs = {f"--{names[name]}": paths[name] for name in {**call.reads, **(reads or {})}}
    wired = {"recipe": settings.recipe, **{key: getattr(settings, key) for key in call.shared}, **paths,
             **call.wired, **_carried(row.name, call, settings, inputs)}
    wired = {key: value for key, value in wired.items() if value is not None}
    config: Any = recipe_config(cls, row.name, settings.recipe, **{**wired, **section})
    line = command_line(cls, wired) + command_line(cls, section)
    if row.launched:
        return Command(call.stage, title or call.title or call.section, ("-m", "PUMA.launch", row.name, "--", *line))
    return Command(call.stage, title or call.title or call.section, ("-m", row.module, *line), row, config)


def calls(stage: int) -> list[tuple[Step, Call]]:
    """The steps table's calls of `stage`, in table order."""
    return [(row, call) for row in STEPS for call in row.calls if call.stage == stage]


def commands(settings: PipelineBase, stage: int) -> list[Command]:
    """The calls of `stage` (built when it starts, so what earlier steps recorded is read)."""
    built = [step_command(settings, row, call, settings.section(call.section)) for row, call in calls(stage)]
    if stage == EVALUATION_STAGE:
        work = Path(settings.work_dir)
        call = _test_call()[1]
        built += evaluation_commands(settings, work / call.reads["function_file"], work / call.writes["output_file"],
                                     work / RESULT_NAME)
    return built


def outputs(work: Path) -> dict[str, Path]:
    """Where each call of the steps table writes under `work`, by the call's title."""
    return {call.title or call.section: work / path for step in STEPS for call in step.calls
            for path in call.writes.values()}


def _test_call() -> tuple[Step, Call]:
    """The call that generates the test split's parameters, which the evaluation reads."""
    return next((row, call) for row, call in calls(EVALUATION_STAGE) if call.section == "generate_test")


def evaluation_commands(settings: PipelineBase, functions: Path, params: Path, result: Path) -> list[Command]:
    """The puma agent's run on the two files (`evaluate`) into `result`, and the result file
    validated."""
    data_dir = {"data_dir": settings.data_dir}
    evaluate = {**data_dir, "agent_strategy": "puma", "recipe": settings.recipe, "task_split": "test",
                "puma_function_file": functions, "puma_param_file": params, "out": result, "overwrite": True}
    validate = Command(EVALUATION_STAGE, "validate", ("-m", "PersonalWAB.cli", "leaderboard", "validate", str(result),
                                                      *flags({**data_dir, "quiet": True})))
    names = {item.name: flag_name(item) for item in section_fields("evaluate")}
    given_values = {names[key]: value for key, value in settings.section("evaluate").items()}
    return [Command(EVALUATION_STAGE, "evaluate", ("-m", "PersonalWAB.cli", "run", *flags(evaluate),
                                                   *flags(given_values))), validate]


def generate_test_commands(settings: PipelineBase, model: Path, functions: Path, folder: Path) -> list[Command]:
    """Step 7 for another `model` (the learning benchmark's stages): its test parameters under
    `functions` into `folder`/param_test.json, the agent's run into `folder`/result.json, validated."""
    row, call = _test_call()
    params = folder / "param_test.json"
    generate = step_command(settings, row, call, settings.section(call.section),
                            reads={"model_path": str(model), "function_file": str(functions)},
                            writes={"output_file": str(params)})
    return [generate, *evaluation_commands(settings, functions, params, folder / "result.json")]


def chosen_steps(text: str) -> list[int]:
    """`--steps` as step numbers in pipeline order."""
    try:
        numbers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        numbers = []
    if not numbers or any(n not in STAGES for n in numbers):
        raise ValueError(f"--steps {text}: expected comma-separated step numbers of {', '.join(map(str, STAGES))}")
    return numbers


def execute(command: Command, recipe: str) -> int:
    """Run a command: a step in this process on its settings object, anything else in its own process."""
    if command.row is None:
        return subprocess.run([sys.executable, *command.args], env={**os.environ, "RECIPE": recipe}).returncode
    from PersonalWAB.cli import run_command
    from PUMA.cli import STEP_BAD_INPUT, check_step_outputs

    row, config = command.row, command.config

    def run(_: list[str] | None) -> int:
        check_step_outputs(config, row.name)
        row.runner()(config)
        return 0

    return run_command(run, None, STEP_BAD_INPUT)


def run_pipeline(settings: PipelineBase, log: Callable[[str], None] = print,
                 run: Callable[[Command], int] | None = None) -> int:
    """Run the chosen steps one call at a time; the first failing one's exit status (0: all ran).
    The sections were checked when read (`Section.read`), before any step runs and under --dry_run."""
    stages = chosen_steps(settings.steps)
    get_recipe(settings.recipe)
    run = run or (lambda command: execute(command, settings.recipe))
    start = time.monotonic()
    for stage in stages:
        for command in commands(settings, stage):
            log(f"== [{time.monotonic() - start:.0f}s] {command.step}. {command.title}: {' '.join(command.args)}")
            if settings.dry_run:
                continue
            status = run(command)
            if status:
                log(f"puma run: step {command.step} ({command.title}) failed with exit status {status}")
                return status
    done = "printed (--dry_run)" if settings.dry_run else f"done in {time.monotonic() - start:.0f}s"
    log(f"puma run: steps {','.join(map(str, stages))} {done} ({settings.work_dir})")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_pipeline(parse(PipelineSettings, argv, prog="puma run", description=__doc__))


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
