"""`puma` (or `python -m PUMA`): one command for PUMA's steps, each the same as its `python -m` form.

    puma data ...       = python -m PUMA.data ...       (step 1: function / param / all SFT data)
    puma sft ...        = python -m PUMA.sft ...        (step 2)
    puma launch sft -- ...  = python -m PUMA.launch sft -- ...  (a training step on the GPUs there are)

Each step's module is imported only when it is chosen, so `puma --help` is instant;
`puma STEP --help` shows the step's own flags.
"""

from __future__ import annotations

import importlib
import sys

# step -> (module whose main(argv) runs it, one line of help), in pipeline order
STEPS: dict[str, tuple[str, str]] = {
    "data": ("PUMA.data", "step 1: function and parameter SFT data (function | param | all)"),
    "sft": ("PUMA.sft", "step 2: LoRA SFT on function / param / function_param data"),
    "generate": ("PUMA.generate", "step 3: function predictions or parameter candidates from a model"),
    "score": ("PUMA.score", "step 4: the benchmark's score of every parameter candidate"),
    "dpo_data": ("PUMA.dpo_data", "step 5: chosen / rejected pairs from the scored candidates"),
    "merge": ("PUMA.merge", "step 6a: merge a LoRA adapter into its base model"),
    "dpo": ("PUMA.dpo", "step 6b: DPO with LoRA on the merged SFT model"),
    "grpo": ("PUMA.grpo", "steps 3-6 by online RL: GRPO on the benchmark's Result Acc"),
    "fast_test": ("PUMA.fast_test", "step 7 from files, as the release's test.py scores them"),
    "launch": ("PUMA.launch", "start sft, dpo or grpo on the GPUs there are (launcher, precision, DeepSpeed)"),
    "tiny_model": ("PUMA.tiny_model", "a tiny random Llama and local tokenizer for CPU tests and smoke runs"),
}


def usage() -> str:
    width = max(map(len, STEPS))
    lines = [f"  {name:<{width}}  {help_line}" for name, (_, help_line) in STEPS.items()]
    return ("usage: puma STEP [ARGS...]   (puma STEP --help for a step's flags)\n\n"
            "PUMA: the fine-tuning pipeline of the PersonalWAB paper.\n\nsteps:\n" + "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in STEPS:
        print(f"puma: unknown step {name!r}; expected one of {', '.join(STEPS)}\n\n{usage()}", file=sys.stderr)
        return 2
    return int(importlib.import_module(STEPS[name][0]).main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
