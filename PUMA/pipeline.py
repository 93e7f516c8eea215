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

The settings file holds shared keys and one section per step, each section a mapping of that
step's flags (`puma STEP --help`):

    recipe: release             # every step's --recipe (a name or a recipe file)
    data_dir: data/synthetic    # steps 1, 4 and 7
    model_path: meta-llama/Llama-2-7b-chat-hf   # the base model (steps 1 and 2)
    work_dir: PUMA/run          # every output, at fixed names under it
    data: {mem_token_length: 192}
    sft: {num_train_epochs: 1}
    dpo: {max_length: 416}

Each step's inputs are the outputs of the steps before it (in `--work_dir`), so a section
names only what differs from the step's defaults (its recipe file's `steps` section, then the
dataclass defaults). A setting an input was made with and the step must share (`PUMA.lineage`:
the memory cut of the parameter data, the length step 5 fitted the pairs to) is taken from the
input's record unless the section gives it. generate_test starts from single greedy outputs
(`num_return_sequences 1`, `num_beams 1`, `do_sample 0`). Flags on the command line override
the file's shared keys. Each step runs in its own process, as `python -m PUMA.<step>` would;
the first that fails stops the run with its exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.settings import CONFIG_FLAG, config_settings, given, parse, setting, settings_fields
from PUMA.recipe import RECIPE_HELP, get_recipe, read_record

STEP_NAMES = {1: "data", 2: "sft + merge", 3: "generate", 4: "score", 5: "dpo_data", 6: "dpo", 7: "evaluate"}
# section -> the step (PUMA/steps.py) whose flags the section may set (evaluate: `pwab run`'s, checked by it)
SECTIONS = {"data": "data", "sft": "sft", "merge": "merge", "generate_function": "generate",
            "generate_param": "generate", "score": "score", "dpo_data": "dpo_data", "dpo": "dpo",
            "generate_test": "generate", "evaluate": None}
FINAL_PREDICTIONS = {"num_return_sequences": 1, "num_beams": 1, "do_sample": False}


def _section(step: str) -> Any:
    return setting(None, f"the {step} section's settings, by flag name (in the --config file)", hidden=True,
                   section=True)


@dataclass
class PipelineSettings:
    """`puma run`'s settings: the shared keys, the steps to run, and one section per step."""

    steps: str = setting("1,2,3,4,5,6,7", "comma-separated steps to run (1 data, 2 SFT + merge, 3 generate, "
                         "4 score, 5 DPO data, 6 DPO, 7 evaluate); a later step alone reads what earlier runs "
                         "left in --work_dir")
    recipe: str = setting("release", f"every step's {RECIPE_HELP}", metavar="NAME|FILE")
    data_dir: str | None = setting(None, "the benchmark data (steps 1, 4 and 7)",
                                   default_text="the official data when placed, else the bundled synthetic data")
    model_path: str = setting("meta-llama/Llama-2-7b-chat-hf", "the base model: its tokenizer cuts step 1's memory, "
                              "step 2 trains an adapter on it")
    work_dir: str = setting("PUMA/run", "folder for every step's outputs, at fixed names")
    dry_run: bool = setting(False, "print each step's command instead of running it")
    data: dict[str, Any] | None = _section("data")
    sft: dict[str, Any] | None = _section("sft")
    merge: dict[str, Any] | None = _section("merge")
    generate_function: dict[str, Any] | None = _section("generate_function")
    generate_param: dict[str, Any] | None = _section("generate_param")
    score: dict[str, Any] | None = _section("score")
    dpo_data: dict[str, Any] | None = _section("dpo_data")
    dpo: dict[str, Any] | None = _section("dpo")
    generate_test: dict[str, Any] | None = _section("generate_test")
    evaluate: dict[str, Any] | None = _section("evaluate")

    def section(self, name: str) -> dict[str, Any]:
        return dict(getattr(self, name) or {})


@dataclass(frozen=True)
class Paths:
    """Where each step writes under the work folder (and so where the next one reads)."""

    work: Path

    @property
    def data(self) -> Path:
        return self.work / "data"

    @property
    def sft(self) -> Path:
        return self.work / "sft"

    @property
    def merged(self) -> Path:
        return self.work / "sft_merged"

    def functions(self, split: str) -> Path:
        return self.work / f"function_{split}.json"

    @property
    def candidates(self) -> Path:
        return self.work / "param_candidates_train.json"

    @property
    def scores(self) -> Path:
        return self.work / "param_candidates_train_scores.json"

    @property
    def pairs(self) -> Path:
        return self.work / "dpo_train.json"

    @property
    def dpo(self) -> Path:
        return self.work / "dpo"

    @property
    def test_params(self) -> Path:
        return self.work / "param_test.json"

    @property
    def result(self) -> Path:
        return self.work / "result_puma_singleturn.json"


@dataclass(frozen=True)
class Command:
    """One process of a step: its title and the arguments after `python`."""

    step: int
    title: str
    args: tuple[str, ...]


def flags(values: dict[str, Any]) -> list[str]:
    """Settings as command-line flags (a boolean as 1/0, a list as its items; None left out)."""
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


def section_fields(name: str) -> list[Any]:
    """The settings a section may give: its step's flags (evaluate: `pwab run`'s)."""
    from PUMA.steps import get_step

    step = SECTIONS[name]
    if step is None:
        from PersonalWAB.runner.config import run_settings_fields

        return run_settings_fields()
    return settings_fields(get_step(step).settings_class())


def check_sections(settings: PipelineSettings, source: str = "puma run") -> None:
    """Every section is a mapping of its step's flags, each value checked as that flag checks it
    (`source`: the --config file, named in the message), before any step runs and under --dry_run."""
    for name in SECTIONS:
        values = getattr(settings, name)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ValueError(f"{source}: {name}: expected a mapping of the step's flags, got {values!r}")
        config_settings(values, section_fields(name), source, name)


def _carried(step: str, section: str, settings: PipelineSettings, inputs: dict[str, str]) -> dict[str, Any]:
    """The settings `step` (run with config section `section`) must share with its inputs, as their
    records say."""
    from PUMA.lineage import CARRIED
    from PUMA.recipe import section_of

    recipe, given = get_recipe(settings.recipe), settings.section(section)

    def value_of(name: str) -> Any:
        return given.get(name, recipe.value(section_of(step), name))

    values = {}
    for rule in CARRIED:
        if rule.step == step and rule.refuse and rule.applies(value_of) and rule.input_flag in inputs:
            recorded = ((read_record(inputs[rule.input_flag]) or {}).get("settings") or {})
            if rule.setting in recorded:
                values[rule.setting] = recorded[rule.setting]
    return values


def _command(step: int, title: str, module: tuple[str, ...], wired: dict[str, Any],
             section: dict[str, Any]) -> Command:
    """A step's process: the wiring's flags first, the section's after (a flag given twice: the last wins)."""
    return Command(step, title, ("-m", *module, *flags(wired), *flags(section)))


def commands(settings: PipelineSettings, step: int) -> list[Command]:
    """The processes of `step` (built when it starts, so what earlier steps recorded is read)."""
    paths, recipe, section = Paths(Path(settings.work_dir)), settings.recipe, settings.section
    data_dir = {"data_dir": settings.data_dir}
    if step == 1:
        return [_command(1, "data", ("PUMA.data", "all"), {"recipe": recipe, **data_dir,
                         "model_path": settings.model_path, "out": paths.data}, section("data"))]
    if step == 2:
        sft = {"recipe": recipe, "model_path": settings.model_path, "function_data": paths.data / "function_train.json",
               "param_data": paths.data / "param_train.json", "out": paths.sft}
        merge = {"recipe": recipe, "adapter_path": paths.sft, "out": paths.merged}
        return [_command(2, "sft", ("PUMA.launch", "sft", "--"), sft, section("sft")),
                _command(2, "merge", ("PUMA.merge",), merge, section("merge"))]
    if step == 3:
        calls = [_command(3, f"generate_function ({split})", ("PUMA.generate",),
                          {"recipe": recipe, "mode": "function", "model_path": paths.merged,
                           "data_file": paths.data / f"function_{split}.json", "out": paths.functions(split)},
                          section("generate_function")) for split in ("train", "test")]
        inputs = {"--data_file": str(paths.data / "param_train.json")}
        wired = {"recipe": recipe, "mode": "param", "model_path": paths.merged, "data_file": inputs["--data_file"],
                 "function_file": paths.functions("train"), "out": paths.candidates,
                 **_carried("generate_param", "generate_param", settings, inputs)}
        return [*calls, _command(3, "generate_param", ("PUMA.generate",), wired, section("generate_param"))]
    if step == 4:
        return [_command(4, "score", ("PUMA.score",), {"recipe": recipe, **data_dir, "task_split": "train",
                         "candidates_file": paths.candidates, "out": paths.scores}, section("score"))]
    if step == 5:
        return [_command(5, "dpo_data", ("PUMA.dpo_data",), {"recipe": recipe, "scores_file": paths.scores,
                         "param_data": paths.data / "param_train.json", "model_path": paths.merged,
                         "out": paths.pairs}, section("dpo_data"))]
    if step == 6:
        inputs = {"--data_file": str(paths.pairs)}
        wired = {"recipe": recipe, "model_path": paths.merged, "data_file": paths.pairs, "out": paths.dpo,
                 **_carried("dpo", "dpo", settings, inputs)}
        return [_command(6, "dpo", ("PUMA.launch", "dpo", "--"), wired, section("dpo"))]
    return evaluation_commands(settings, paths.dpo, paths.functions("test"), paths.test_params, paths.result)


def evaluation_commands(settings: PipelineSettings, model: Path, functions: Path, params: Path,
                        result: Path) -> list[Command]:
    """Step 7 for `model`: the test split's parameters (`generate_test`, single greedy outputs
    unless the section says otherwise) under the predicted `functions`, into `params`; the puma
    agent's run on the two files (`evaluate`) into `result`; the result file validated."""
    paths, data_dir = Paths(Path(settings.work_dir)), {"data_dir": settings.data_dir}
    inputs = {"--data_file": str(paths.data / "param_test.json")}
    generate = {"recipe": settings.recipe, "mode": "param", "model_path": model, "data_file": inputs["--data_file"],
                "function_file": functions, "out": params, **FINAL_PREDICTIONS,
                **_carried("generate_param", "generate_test", settings, inputs)}
    evaluate = {**data_dir, "agent_strategy": "puma", "recipe": settings.recipe, "task_split": "test",
                "puma_function_file": functions, "puma_param_file": params, "out": result, "overwrite": True}
    validate = Command(7, "validate", ("-m", "PersonalWAB.cli", "leaderboard", "validate", str(result),
                                       *flags({**data_dir, "quiet": True})))
    return [_command(7, "generate_test", ("PUMA.generate",), generate, settings.section("generate_test")),
            _command(7, "evaluate", ("PersonalWAB.cli", "run"), evaluate, settings.section("evaluate")), validate]


def chosen_steps(text: str) -> list[int]:
    """`--steps` as step numbers in pipeline order."""
    try:
        numbers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        numbers = []
    if not numbers or any(n not in STEP_NAMES for n in numbers):
        raise ValueError(f"--steps {text}: expected comma-separated step numbers from 1 to 7")
    return numbers


def run_pipeline(settings: PipelineSettings, log: Callable[[str], None] = print,
                 execute: Callable[[list[str]], int] | None = None, source: str = "puma run") -> int:
    """Run the chosen steps one process at a time; the first failing one's exit status (0: all ran)."""
    steps = chosen_steps(settings.steps)
    get_recipe(settings.recipe)
    check_sections(settings, source)
    execute = execute or (lambda argv: subprocess.run(argv, env={**os.environ, "RECIPE": settings.recipe}).returncode)
    start = time.monotonic()
    for step in steps:
        for command in commands(settings, step):
            argv = [sys.executable, *command.args]
            log(f"== [{time.monotonic() - start:.0f}s] {command.step}. {command.title}: {' '.join(argv[1:])}")
            if settings.dry_run:
                continue
            status = execute(argv)
            if status:
                log(f"puma run: step {command.step} ({command.title}) failed with exit status {status}")
                return status
    done = "printed (--dry_run)" if settings.dry_run else f"done in {time.monotonic() - start:.0f}s"
    log(f"puma run: steps {','.join(map(str, steps))} {done} ({settings.work_dir})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    config = given(args, CONFIG_FLAG)
    return run_pipeline(parse(PipelineSettings, args, prog="puma run", description=__doc__),
                        source=f"{CONFIG_FLAG} {config}" if config else "puma run")


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
