"""Settings that travel between PUMA's steps: a step reads the records of its inputs
(`puma_run.json` / `*.puma_run.json`, `PUMA.recipe.write_record`) and compares the settings
it shares with the steps that made them.

Each rule (`CARRIED`) names the step that reads, the input flag, the setting on both sides
and whether a difference changes results (the step refuses, naming both values and the
flag) or only informs (the step says it and goes on). A rule may hold only under a setting
of the reading step: the memory is cut again at generation only under `--prompts release`. Inputs
without a record (made by hand or by the release's scripts) and records that lack the setting
are taken as they are; a recipe mismatch is `PUMA.recipe.check_inputs`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Mapping
from typing import Any

from PUMA.recipe import read_record, record_path


@dataclass(frozen=True)
class Carried:
    """One setting a step shares with the step that made one of its inputs."""

    step: str  # the reading step's record name (generate_param, sft, dpo, ...)
    input_flag: str  # the reading step's flag naming the input
    setting: str  # the setting's name on both sides (field and flag)
    refuse: bool  # True: a difference changes results; False: it is only said
    why: str  # what the difference does
    when: tuple[str, Any] | None = None  # (setting, value): the rule holds only where the reading step has it

    def applies(self, value_of: Callable[[str], Any]) -> bool:
        """Whether the rule holds for a reading step whose settings `value_of` gives by name."""
        return self.when is None or value_of(self.when[0]) == self.when[1]


CARRIED: tuple[Carried, ...] = (
    Carried("generate_param", "--data_file", "mem_token_length", True,
            "the release recipe cuts each example's memory again at this length, so the prompts would differ from "
            "the ones the model was trained on", ("prompts", "release")),
    Carried("sft", "--param_data", "model_path", False,
            "the data's memory was cut counting that model's tokens, not the trained model's"),
    Carried("dpo", "--data_file", "max_length", True,
            "step 5 shortened the prompts' memory to fit that length, so pairs would be cut differently",
            ("prompt_cut", "memory")),
    Carried("dpo", "--data_file", "model_path", False,
            "step 5 measured the prompts with that model's tokenizer", ("prompt_cut", "memory")),
)


def carried_mismatches(step: str, config: Any,
                       inputs: Mapping[str, str | None]) -> list[tuple[Carried, Any, Any, str]]:
    """(rule, this step's value, the input's value, the input's path) for every rule of `step`
    whose values differ."""
    found = []
    for rule in CARRIED:
        path = inputs.get(rule.input_flag)
        if rule.step != step or not path or not rule.applies(lambda name: getattr(config, name)):
            continue
        record = read_record(path)
        settings = (record or {}).get("settings") or {}
        if rule.setting not in settings:
            continue
        ours, theirs = getattr(config, rule.setting), settings[rule.setting]
        if ours != theirs:
            found.append((rule, ours, theirs, path))
    return found


def check_carried(step: str, config: Any, inputs: Mapping[str, str | None],
                  log: Callable[[str], None] = print) -> list[str]:
    """Refuse (ValueError) a difference that changes results; say (through `log`) one that
    only informs. Returns the lines said (for the step's record)."""
    said = []
    for rule, ours, theirs, path in carried_mismatches(step, config, inputs):
        flag = f"--{rule.setting}"
        text = (f"{flag} {ours}: {rule.input_flag} {path} was made with {flag} {theirs} (see {record_path(path)}); "
                f"{rule.why}")
        if rule.refuse:
            raise ValueError(f"{text}. Run this step with {flag} {theirs}, or make {rule.input_flag} again with "
                             f"{flag} {ours}")
        said.append(text)
        log(f"note: {text}")
    return said
