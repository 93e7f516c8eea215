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
from PUMA.steps import STEPS

# command -> ("module:main" run with the remaining arguments, one line of help): the steps in pipeline
# order (PUMA/steps.py), then the tools around them
COMMANDS: dict[str, tuple[str, str]] = {
    **{step.name: (step.target, step.help) for step in STEPS},
    "launch": ("PUMA.launch:main", "start sft, dpo or grpo on the GPUs there are (launcher, precision, DeepSpeed)"),
    "model": ("PUMA.pretrained:main", "a real pretrained model as a model folder, offline (puma model prepare NAME "
              "--out DIR)"),
    "tiny_model": ("PUMA.tiny_model:main", "a tiny random Llama and local tokenizer for CPU tests and smoke runs"),
    "run": ("PUMA.pipeline:main", "steps 1-7 chained from one settings file (puma run --config FILE.yaml)"),
}


def main(argv: list[str] | None = None) -> int:
    from PUMA.quiet import quiet_libraries

    quiet_libraries()  # as `python -m PUMA.<step>` (run_step)
    return dispatch("puma", "PUMA: the fine-tuning pipeline of the PersonalWAB paper.", COMMANDS, argv, word="STEP",
                    bad_input=STEP_BAD_INPUT)


if __name__ == "__main__":
    sys.exit(main())
