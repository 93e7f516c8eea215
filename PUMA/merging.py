"""Merging a LoRA adapter into its base model (step 6a, and the vLLM backend for an adapter that
saves whole modules): the merged model and tokenizer saved, the modules the adapter saved whole
(embed_tokens, lm_head and the norms) replacing the base's, and the record written beside them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.settings import setting
from PUMA.recipe import RECIPE_HELP


@dataclass
class MergeConfig:
    """Step 6a's settings."""

    adapter_path: str = setting("PUMA/output/sft", "the LoRA adapter folder to merge")
    output_dir: str = setting("PUMA/output/sft_merged", "folder for the merged model, its tokenizer and its record",
                              flag="out", aliases=("output_dir",), metavar="DIR")
    base_model_path: str | None = setting(None, "the base model to merge into",
                                          default_text="the base named in the adapter's adapter_config.json")
    recipe: str = setting("release", f"{RECIPE_HELP}; merging is the same in every recipe: recorded, and the "
                          "adapter's recipe checked against it", metavar="NAME|FILE")
    bf16: bool = setting(False, "load and save the merged model in bfloat16", aliases=("no-bf16",))
    fp16: bool = setting(False, "load and save the merged model in float16", aliases=("no-fp16",))


def merge_adapter(config: MergeConfig) -> Path:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from PUMA.modeling import adapter_base_path, load_tokenizer, local_files_only, torch_dtype
    from PUMA.recipe import check_inputs, get_recipe, write_record

    recipe = get_recipe(config.recipe)
    check_inputs(recipe, {"--adapter_path": config.adapter_path})
    base_path = config.base_model_path or adapter_base_path(config.adapter_path)
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch_dtype(config.bf16, config.fp16),
                                                local_files_only=local_files_only(base_path, "base model"))
    merged = PeftModel.from_pretrained(base, config.adapter_path).merge_and_unload()
    out = Path(config.output_dir)
    merged.save_pretrained(out)
    load_tokenizer(config.adapter_path).save_pretrained(out)
    write_record(out, "merge", recipe, config, {"--adapter_path": config.adapter_path, "base": base_path})
    return out
