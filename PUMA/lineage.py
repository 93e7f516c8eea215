"""Settings that travel between PUMA's steps: a step reads the records of its inputs
(`puma_run.json` / `*.puma_run.json`, `PUMA.recipe.write_record`) and compares the settings
it shares with the steps that made them.

Each rule (`Carried`, in its step's row of PUMA/steps.py) names the step that reads, the input
flag, the setting on both sides and whether a difference changes results (the step refuses,
naming both values and the flag) or only informs (the step says it and goes on). A rule may hold only under a setting
of the reading step: the memory is cut again at generation only under `--prompts release`. Inputs
without a record (made by hand or by the release's scripts) and records that lack the setting
are taken as they are; a recipe mismatch is `PUMA.recipe.check_inputs`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from PUMA.recipe import read_record, record_path
from PUMA.steps import CARRIED, Carried


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
