"""Step 6a: merge a LoRA adapter into its base model and save the merged model and tokenizer
(the modules the adapter saved whole, embed_tokens, lm_head and the norms, replace the base's).

`python -m PUMA.merge --adapter_path PUMA/output/sft --output_dir PUMA/output/sft_merged [--base_model_path P]`
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class MergeConfig:
    adapter_path: str = "PUMA/output/sft"
    output_dir: str = "PUMA/output/sft_merged"
    base_model_path: str | None = None  # default: the base recorded in the adapter's config
    recipe: str = "release"  # merging is the same in both recipes; recorded, and the adapter's recipe checked
    bf16: bool = False
    fp16: bool = False


def merge_adapter(config: MergeConfig) -> Path:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from PUMA.modeling import _offline_if_local, adapter_base_path, load_tokenizer, torch_dtype
    from PUMA.recipe import check_inputs, get_recipe, write_record

    recipe = get_recipe(config.recipe)
    check_inputs(recipe, {"--adapter_path": config.adapter_path})
    base_path = config.base_model_path or adapter_base_path(config.adapter_path)
    _offline_if_local(base_path)
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch_dtype(config.bf16, config.fp16))
    merged = PeftModel.from_pretrained(base, config.adapter_path).merge_and_unload()
    out = Path(config.output_dir)
    merged.save_pretrained(out)
    load_tokenizer(config.adapter_path).save_pretrained(out)
    write_record(out, "merge", recipe, config, {"--adapter_path": config.adapter_path, "base": base_path})
    return out


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    print(f"merged model saved in {merge_adapter(parse_config(MergeConfig, argv, 'python -m PUMA.merge', __doc__))}")
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
