"""Step 6a: merge a LoRA adapter into its base model and save the merged model and tokenizer
(the modules the adapter saved whole, embed_tokens, lm_head and the norms, replace the base's).

`python -m PUMA.merge --adapter_path PUMA/output/sft --out PUMA/output/sft_merged [--base_model_path P]`
"""

from __future__ import annotations

import sys

from PUMA.merging import MergeConfig, merge_adapter


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    config = parse_step(MergeConfig, argv, "python -m PUMA.merge", __doc__, "merge")
    print(f"merged model saved in {merge_adapter(config)}")
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
