"""The `puma` strategy's own settings: its `run.py` flags, which keep the release's `--puma_*`
names. Light on purpose (no torch): `run.py` reads these classes to build its parser.

`--recipe` is the layer under `--config` here too: its `agent` section gives the defaults of the
`--puma_*` settings below (`argv_defaults`), which a config file and flags override."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from PersonalWAB.settings import setting
from PUMA.prompting import Parsing
from PUMA.recipe import RECIPE_HELP

DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
LivePrompt = Literal["release", "training"]
MemoryType = Literal["task", "predicted"]
LiveDecoding = Literal["release", "new_tokens"]


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
    recipe: str = setting("release", f"{RECIPE_HELP}; its `agent` section gives the --puma_* settings' defaults",
                          aliases=("puma_recipe",), resume=True, metavar="NAME|FILE")
    puma_dtype: str = setting(
        "auto", "live generation precision; auto: --puma_gpu_dtype on a GPU, float32 on a CPU", choices=DTYPE_CHOICES,
        resume=True)
    mem_token_length: int = setting(768, "tokens of task-specific memory in PUMA's prompt", resume=True)
    puma_prompt: LivePrompt = setting(
        "release", "the live parameter prompt: release = the release agent's evaluation prompt (memory ranked by the "
                   "agents' behaviour text, `none` for a user without history); training = the training prompt",
        resume=True)
    puma_memory_type: MemoryType = setting(
        "task", "the memory is formatted for the task's true type (the release's) or for the predicted function",
        resume=True)
    puma_parsing: Parsing = setting(
        "strict", "how outputs are read: strict = as the release's agent (the exact function name; a parameter "
                  "unstripped, `Say:` case-sensitive, any output starting with stop stops); lenient = the one task "
                  "function named anywhere in any case, `Say:` in any case, only an exact stop stops", resume=True)
    puma_decoding: LiveDecoding = setting(
        "release", "live generation: release = the release's GenerationConfig, an adapter unmerged, the whole "
                   "sequence read after the prompt's cue; new_tokens = the new tokens decoded, an adapter merged",
        resume=True)
    puma_gpu_dtype: Literal["float16", "bfloat16"] = setting(
        "float16", "live generation precision on a GPU under --puma_dtype auto (the release's fp16)", resume=True)
    puma_repeat_action: bool = setting(
        True, "multi-turn: the decided action sent every step until the episode ends (the release's agent decides "
              "again each step, the same action); 0: one action, then stop", resume=True)

    @classmethod
    def argv_defaults(cls, argv: Sequence[str]) -> dict[str, Any]:
        """The defaults the command line's recipe (`--recipe`, else its --config file's) gives these
        settings, by field name ({} for a recipe that cannot be read: the run's checks name it)."""
        from PUMA.cli import chosen_recipe
        from PUMA.recipe import AGENT, get_recipe

        try:
            return dict(get_recipe(chosen_recipe(argv, aliases=("--puma_recipe",))).steps.get(AGENT, {}))
        except ValueError:
            return {}


def puma_settings(config: Any) -> PumaAgentSettings:
    """The puma strategy's settings of a run's `RunConfig`."""
    return config.options("puma")
