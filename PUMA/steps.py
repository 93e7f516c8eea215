"""PUMA's steps, each described once. A row gives the step's name (the command `puma NAME`, the
recipe file's `steps.NAME` section, the output rule's owner), the module run as `python -m`, its
settings class, its help line, the names its records carry (one a mode, where it has modes), and
whether `PUMA.launch` starts it on the processes there are. The CLI, the launcher, the recipe
files' check, the output rule and the tests read this table; adding a step is its module plus one
row here. `AGENT_SETTINGS` names the settings class of the puma agent, which a recipe also sets.

Nothing here imports a step's module until a step's settings class is asked for, so `puma --help`
stays instant.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One PUMA step."""

    name: str
    module: str  # run as `python -m MODULE` (its `main(argv)`)
    settings: str  # the settings dataclass's name in `module`
    help: str  # one line for `puma --help`
    records: tuple[str, ...] = ()  # the `step` its records name, where not `name` (one per mode)
    launched: bool = False  # training: started by PUMA.launch (accelerate, precision, DeepSpeed)
    recipe_settings: bool = True  # a recipe file's `steps.NAME` section may set its settings
    release_deepspeed: bool = False  # the release trained it under DeepSpeed ZeRO-2

    @property
    def record_names(self) -> tuple[str, ...]:
        return self.records or (self.name,)

    @property
    def target(self) -> str:
        """`module:main`, what `puma NAME` runs."""
        return f"{self.module}:main"

    def settings_class(self) -> type:
        cls: type = getattr(importlib.import_module(self.module), self.settings)
        return cls


STEPS: tuple[Step, ...] = (
    Step("data", "PUMA.data", "DataConfig", "step 1: function and parameter SFT data (function | param | all)",
         records=("data_function", "data_param")),
    Step("sft", "PUMA.sft", "SFTConfig", "step 2: LoRA SFT on function / param / function_param data",
         launched=True, release_deepspeed=True),
    Step("generate", "PUMA.generate", "GenerateConfig",
         "step 3: function predictions or parameter candidates from a model",
         records=("generate_function", "generate_param")),
    Step("score", "PUMA.score", "ScoreConfig", "step 4: the benchmark's score of every parameter candidate"),
    Step("merge_shards", "PUMA.merge_shards", "MergeShardsConfig",
         "steps 3-4 in shards: join the parts of generate/score --shard I/N",
         records=("generate_function", "generate_param", "score"), recipe_settings=False),
    Step("dpo_data", "PUMA.dpo_data", "DPODataConfig", "step 5: chosen / rejected pairs from the scored candidates"),
    Step("merge", "PUMA.merge", "MergeConfig", "step 6a: merge a LoRA adapter into its base model"),
    Step("dpo", "PUMA.dpo", "DPOStepConfig", "step 6b: DPO with LoRA on the merged SFT model", launched=True,
         release_deepspeed=True),
    Step("grpo", "PUMA.grpo", "GRPOStepConfig", "steps 3-6 by online RL: GRPO on the benchmark's Result Acc",
         launched=True),
    Step("fast_test", "PUMA.fast_test", "FastTestConfig", "step 7 from files, as the release's test.py scores them"),
)
# The puma agent's settings (`pwab run --agent_strategy puma`, step 7): a recipe's `agent` section sets them.
AGENT_SETTINGS = Step("agent", "PUMA.agent_settings", "PumaAgentSettings", "step 7: the puma agent's settings")
BY_NAME = {step.name: step for step in STEPS}
LAUNCHED = tuple(step.name for step in STEPS if step.launched)
RECIPE_SECTIONS = tuple(step.name for step in STEPS if step.recipe_settings)  # a recipe file's `steps` keys


def get_step(name: str) -> Step:
    if name not in BY_NAME:
        raise ValueError(f"unknown PUMA step {name!r}; expected one of {', '.join(BY_NAME)}")
    return BY_NAME[name]
