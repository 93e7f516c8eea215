"""Step 6a: merge a LoRA adapter into its base model and save the merged model and tokenizer.

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
    bf16: bool = False
    fp16: bool = False


def merge_adapter(config: MergeConfig) -> Path:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from PUMA.modeling import _offline_if_local, adapter_base_path, load_tokenizer, torch_dtype

    base_path = config.base_model_path or adapter_base_path(config.adapter_path)
    _offline_if_local(base_path)
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch_dtype(config.bf16, config.fp16))
    merged = PeftModel.from_pretrained(base, config.adapter_path).merge_and_unload()
    out = Path(config.output_dir)
    merged.save_pretrained(out)
    load_tokenizer(config.adapter_path).save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    print(f"merged model saved in {merge_adapter(parse_config(MergeConfig, argv, 'python -m PUMA.merge', __doc__))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
