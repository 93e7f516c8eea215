"""PUMA's steps, each described once. A row gives the step's name (the command `puma NAME`, the
recipe file's `steps.NAME` section, the output rule's owner), the module run as `python -m`, its
settings class, the function that runs it on a settings object, its help line (its records carry
its name, the same one everywhere), whether `PUMA.launch` starts it on the processes
there are, the settings it must share with the steps that made its inputs (`carried`, checked by
`PUMA.lineage`), and where it runs in `puma run` (`calls`: each call's stage, config section, and
the files it reads and writes under the work folder). The CLI, the launcher, the recipe files'
check, the output rule, the lineage check, `puma run` and the tests read this table; adding a
step is its module plus one row here. `AGENT_SETTINGS` names the settings class of the puma
agent, which a recipe also sets.

Nothing here imports a step's module until a step's settings class or run function is asked
for, so `puma --help` stays instant.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Carried:
    """One setting a step shares with the step that made one of its inputs (`PUMA.lineage`)."""

    step: str  # the reading step (generate, sft, dpo, ...)
    input_flag: str  # the reading step's flag naming the input
    setting: str  # the setting's name on both sides (field and flag)
    refuse: bool  # True: a difference changes results; False: it is only said
    why: str  # what the difference does
    when: Mapping[str, Any] = field(default_factory=dict)  # the rule holds only where the reading step has these

    def applies(self, value_of: Callable[[str], Any]) -> bool:
        """Whether the rule holds for a reading step whose settings `value_of` gives by name."""
        return all(value_of(name) == value for name, value in self.when.items())


@dataclass(frozen=True)
class Call:
    """One run of a step inside `puma run` (PUMA/pipeline.py). Settings are named by field;
    `reads` and `writes` map a settings field to a path under `--work_dir`, `shared` takes
    `puma run`'s own setting of that name, `wired` settings `puma run` gives unless the config
    section says otherwise."""

    stage: int  # the `--steps` number it runs under (1-7)
    section: str  # the `puma run` config section its settings come from
    title: str = ""  # how the run names it (default: the section)
    reads: Mapping[str, str] = field(default_factory=dict)
    writes: Mapping[str, str] = field(default_factory=dict)
    shared: tuple[str, ...] = ()
    wired: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One PUMA step."""

    name: str
    module: str  # run as `python -m MODULE` (its `main(argv)`)
    settings: str  # the settings dataclass's name in `module`
    run: str  # the function in `module` that runs the step on a settings object
    help: str  # one line for `puma --help`
    writes_as: tuple[str, ...] = ()  # the steps whose outputs it writes too (their records name them)
    launched: bool = False  # training: started by PUMA.launch (accelerate, precision, DeepSpeed)
    recipe_settings: bool = True  # a recipe file's `steps.NAME` section may set its settings
    release_deepspeed: bool = False  # the release trained it under DeepSpeed ZeRO-2
    carried: tuple[Carried, ...] = ()
    calls: tuple[Call, ...] = ()

    @property
    def target(self) -> str:
        """`module:main`, what `puma NAME` runs."""
        return f"{self.module}:main"

    def settings_class(self) -> type:
        cls: type = getattr(importlib.import_module(self.module), self.settings)
        return cls

    def runner(self) -> Callable[[Any], Any]:
        """The function that runs the step on its settings object."""
        function: Callable[[Any], Any] = getattr(importlib.import_module(self.module), self.run)
        return function


FINAL_PREDICTIONS = {"num_return_sequences": 1, "num_beams": 1, "do_sample": False}  # step 7's parameters

STEPS: tuple[Step, ...] = (
    Step("data", "PUMA.data", "DataConfig", "prepare_data",
         "step 1: function and parameter SFT data (function | param | all)",
         calls=(Call(1, "data", writes={"out_dir": "data"}, shared=("data_dir", "model_path"),
                     wired={"kind": "all"}),)),
    Step("sft", "PUMA.sft", "SFTConfig", "train_sft", "step 2: LoRA SFT on function / param / function_param data",
         launched=True, release_deepspeed=True,
         carried=(Carried("sft", "--param_data", "model_path", False,
                          "the data's memory was cut counting that model's tokens, not the trained model's"),),
         calls=(Call(2, "sft", reads={"function_data": "data/function_train.json",
                                      "param_data": "data/param_train.json"},
                     writes={"output_dir": "sft"}, shared=("model_path",)),)),
    Step("generate", "PUMA.generate", "GenerateConfig", "generate_file",
         "step 3: function predictions or parameter candidates from a model",
         carried=(Carried("generate", "--data_file", "mem_token_length", True,
                          "the release recipe cuts each example's memory again at this length, so the prompts would "
                          "differ from the ones the model was trained on", {"mode": "param", "prompts": "release"}),),
         calls=(*(Call(3, "generate_function", f"generate_function ({split})",
                       reads={"model_path": "sft_merged", "data_file": f"data/function_{split}.json"},
                       writes={"output_file": f"function_{split}.json"}, wired={"mode": "function"})
                  for split in ("train", "test")),
                Call(3, "generate_param",
                     reads={"model_path": "sft_merged", "data_file": "data/param_train.json",
                            "function_file": "function_train.json"},
                     writes={"output_file": "param_candidates_train.json"}, wired={"mode": "param"}),
                Call(7, "generate_test",
                     reads={"model_path": "dpo", "data_file": "data/param_test.json",
                            "function_file": "function_test.json"},
                     writes={"output_file": "param_test.json"}, wired={"mode": "param", **FINAL_PREDICTIONS}))),
    Step("score", "PUMA.score", "ScoreConfig", "score_file",
         "step 4: the benchmark's score of every parameter candidate",
         calls=(Call(4, "score", reads={"candidates_file": "param_candidates_train.json"},
                     writes={"output_file": "param_candidates_train_scores.json"}, shared=("data_dir",),
                     wired={"task_split": "train"}),)),
    Step("merge_shards", "PUMA.merge_shards", "MergeShardsConfig", "merge_file",
         "steps 3-4 in shards: join the parts of generate/score --shard I/N",
         writes_as=("generate", "score"), recipe_settings=False),
    Step("dpo_data", "PUMA.dpo_data", "DPODataConfig", "build_dpo_data",
         "step 5: chosen / rejected pairs from the scored candidates",
         calls=(Call(5, "dpo_data", reads={"scores_file": "param_candidates_train_scores.json",
                                           "param_data": "data/param_train.json", "model_path": "sft_merged"},
                     writes={"output_file": "dpo_train.json"}),)),
    Step("merge", "PUMA.merge", "MergeConfig", "merge_adapter", "step 6a: merge a LoRA adapter into its base model",
         calls=(Call(2, "merge", reads={"adapter_path": "sft"}, writes={"output_dir": "sft_merged"}),)),
    Step("dpo", "PUMA.dpo", "DPOStepConfig", "train_dpo", "step 6b: DPO with LoRA on the merged SFT model",
         launched=True, release_deepspeed=True,
         carried=(Carried("dpo", "--data_file", "max_length", True,
                          "step 5 shortened the prompts' memory to fit that length, so pairs would be cut "
                          "differently", {"prompt_cut": "memory"}),
                  Carried("dpo", "--data_file", "model_path", False,
                          "step 5 measured the prompts with that model's tokenizer", {"prompt_cut": "memory"})),
         calls=(Call(6, "dpo", reads={"model_path": "sft_merged", "data_file": "dpo_train.json"},
                     writes={"output_dir": "dpo"}),)),
    Step("grpo", "PUMA.grpo", "GRPOStepConfig", "train_grpo",
         "steps 3-6 by online RL: GRPO on the benchmark's Result Acc", launched=True),
    Step("fast_test", "PUMA.fast_test", "FastTestConfig", "fast_test",
         "step 7 from files, as the release's test.py scores them"),
)
# The puma agent's settings (`pwab run --agent_strategy puma`, step 7): a recipe's `agent` section sets them.
AGENT_SETTINGS = Step("agent", "PUMA.agent_settings", "PumaAgentSettings", "puma_settings",
                      "step 7: the puma agent's settings")
BY_NAME = {step.name: step for step in STEPS}
LAUNCHED = tuple(step.name for step in STEPS if step.launched)
RECIPE_SECTIONS = tuple(step.name for step in STEPS if step.recipe_settings)  # a recipe file's `steps` keys
CARRIED = tuple(rule for step in STEPS for rule in step.carried)


def get_step(name: str) -> Step:
    if name not in BY_NAME:
        raise ValueError(f"unknown PUMA step {name!r}; expected one of {', '.join(BY_NAME)}")
    return BY_NAME[name]
