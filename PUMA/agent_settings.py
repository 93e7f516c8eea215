"""The `puma` strategy's own settings: its `run.py` flags, which keep the release's `--puma_*`
names. Light on purpose (no torch): `run.py` reads these classes to build its parser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PersonalWAB.settings import setting
from PUMA.recipe import RECIPES

DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")


@dataclass
class PumaInputs:
    """Where the agent's function and parameters come from (what `pwab reproduce` asks for too)."""

    puma_param_file: str | None = setting(None, "PUMA parameter outputs per instruction (step 3's file)",
                                          resume=True)
    puma_function_file: str | None = setting(None, "PUMA function outputs per instruction (step 3's file)",
                                             resume=True)
    puma_model_path: str | None = setting(None, "fine-tuned model (merged, or a LoRA adapter folder) for "
                                                "--puma_generate", resume=True)


@dataclass
class PumaAgentSettings(PumaInputs):
    """How the `puma` agent reads its model."""

    puma_generate: bool = setting(
        False, "generate PUMA's function and parameters live with --puma_model_path; 0: read them from "
               "--puma_function_file / --puma_param_file", resume=True)
    recipe: str = setting(
        "release", "how the puma agent reads its model (PUMA/recipe.py): release = the release's evaluation prompt "
                   "and rules; improved = the training prompt, predicted-type memory (a departure)",
        choices=RECIPES, aliases=("puma_recipe",), resume=True)
    puma_dtype: str = setting(
        "auto", "live generation precision; auto: the recipe's on a GPU (release fp16, improved bf16), float32 on "
                "a CPU", choices=DTYPE_CHOICES, resume=True)
    mem_token_length: int = setting(768, "tokens of task-specific memory in PUMA's prompt", resume=True)


def puma_settings(config: Any) -> PumaAgentSettings:
    """The puma strategy's settings of a run's `RunConfig`."""
    return config.options("puma")
