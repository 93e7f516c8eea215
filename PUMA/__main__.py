"""`puma` (or `python -m PUMA`): one command for PUMA's steps, each the same as its `python -m` form.

    puma data ...       = python -m PUMA.data ...       (step 1: function / param / all SFT data)
    puma sft ...        = python -m PUMA.sft ...        (step 2)
    puma launch sft -- ...  = python -m PUMA.launch sft -- ...  (a training step on the GPUs there are)
    puma run --config FILE.yaml [--steps 1,2]  = python -m PUMA.pipeline ...  (the steps chained)

Each step's module is imported only when it is chosen, so `puma --help` is instant;
`puma STEP --help` shows the step's own flags.
"""

from __future__ import annotations

import sys

from PersonalWAB.cli import dispatch
from PUMA.cli import STEP_BAD_INPUT

# step -> ("module:main" run with the remaining arguments, one line of help), in pipeline order
STEPS: dict[str, tuple[str, str]] = {
    "data": ("PUMA.data:main", "step 1: function and parameter SFT data (function | param | all)"),
    "sft": ("PUMA.sft:main", "step 2: LoRA SFT on function / param / function_param data"),
    "generate": ("PUMA.generate:main", "step 3: function predictions or parameter candidates from a model"),
    "score": ("PUMA.score:main", "step 4: the benchmark's score of every parameter candidate"),
    "merge_shards": ("PUMA.merge_shards:main", "steps 3-4 in shards: join the parts of generate/score --shard I/N"),
    "dpo_data": ("PUMA.dpo_data:main", "step 5: chosen / rejected pairs from the scored candidates"),
    "merge": ("PUMA.merge:main", "step 6a: merge a LoRA adapter into its base model"),
    "dpo": ("PUMA.dpo:main", "step 6b: DPO with LoRA on the merged SFT model"),
    "grpo": ("PUMA.grpo:main", "steps 3-6 by online RL: GRPO on the benchmark's Result Acc"),
    "fast_test": ("PUMA.fast_test:main", "step 7 from files, as the release's test.py scores them"),
    "launch": ("PUMA.launch:main", "start sft, dpo or grpo on the GPUs there are (launcher, precision, DeepSpeed)"),
    "model": ("PUMA.pretrained:main", "a real pretrained model as a model folder, offline (puma model prepare NAME "
              "--out DIR)"),
    "tiny_model": ("PUMA.tiny_model:main", "a tiny random Llama and local tokenizer for CPU tests and smoke runs"),
    "run": ("PUMA.pipeline:main", "steps 1-7 chained from one settings file (puma run --config FILE.yaml)"),
}


def main(argv: list[str] | None = None) -> int:
    from PUMA.quiet import quiet_libraries

    quiet_libraries()  # as `python -m PUMA.<step>` (run_step)
    return dispatch("puma", "PUMA: the fine-tuning pipeline of the PersonalWAB paper.", STEPS, argv, word="STEP",
                    bad_input=STEP_BAD_INPUT)


if __name__ == "__main__":
    sys.exit(main())
