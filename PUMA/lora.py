"""What PUMA's two training steps (SFT, DPO) share: the LoRA adapter as the release
configures it, batching, precision, checkpoints and logging.

The release's adapter: rank 16, alpha 32, dropout 0 on the q, k, v, o, gate, up and down
projections, and `modules_to_save` = embed_tokens, lm_head and every RMSNorm, trained
and saved whole (302 M trainable parameters on Llama-2-7B, 40 M of them LoRA). Both
recipes keep it. Warmup: 10% of the optimizer steps (the release's `warmup_ratio 0.1`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
MODULES_TO_SAVE = "embed_tokens,lm_head,input_layernorm,post_attention_layernorm,norm"


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


@dataclass
class LoRATrainingConfig:
    """Settings SFT and DPO share. `--recipe` decides what the two recipes do differently."""

    recipe: str = "release"
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 16
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: str = LORA_TARGETS
    modules_to_save: str = MODULES_TO_SAVE  # "" trains the LoRA matrices only
    warmup_ratio: float = 0.1  # share of the optimizer steps with a linearly rising learning rate
    logging_steps: int = 10
    save_strategy: str = "epoch"
    save_total_limit: int = 2
    bf16: bool = False
    fp16: bool = False
    gradient_checkpointing: bool = False
    deepspeed: str | None = None  # e.g. PUMA/configs/deepspeed_zero2.json (pip install -r requirements-gpu.txt)
    report_to: str = "none"  # "tensorboard" or "wandb" (the package must be installed)
    seed: int = 42
    max_steps: int = -1  # optimizer steps; -1: num_train_epochs decides

    def check(self) -> None:
        """Settings errors before any model is loaded."""
        from PUMA.recipe import get_recipe

        get_recipe(self.recipe)
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"--warmup_ratio {self.warmup_ratio}: must be in [0, 1)")
        if self.bf16 and self.fp16:
            raise ValueError("--bf16 and --fp16: choose one")
        if self.deepspeed and not Path(self.deepspeed).is_file():
            raise ValueError(f"--deepspeed {self.deepspeed}: no such file (see PUMA/configs/)")
        if self.deepspeed:
            import importlib.util

            if importlib.util.find_spec("deepspeed") is None:
                raise ValueError(f"--deepspeed {self.deepspeed}: the deepspeed package is not installed "
                                 "(pip install -r requirements-gpu.txt on the GPU machine)")

    def trainer_arguments(self) -> dict[str, Any]:
        """The HF/TRL trainer arguments both steps set the same way. transformers 5 takes the
        warmup ratio as a fractional `warmup_steps` (ceil(ratio x steps), as the release's)."""
        names = ("per_device_train_batch_size", "gradient_accumulation_steps", "logging_steps", "save_strategy",
                 "save_total_limit", "bf16", "fp16", "seed", "deepspeed", "report_to", "max_steps")
        return {**{name: getattr(self, name) for name in names}, "warmup_steps": self.warmup_ratio,
                "disable_tqdm": True}


def lora_config(config: LoRATrainingConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=_names(config.lora_target_modules),
                      modules_to_save=_names(config.modules_to_save) or None, bias="none", task_type="CAUSAL_LM")


def model_and_tokenizer(model_path: str, bf16: bool, fp16: bool, model: Any = None,
                        tokenizer: Any = None) -> tuple[Any, Any]:
    """The given model and tokenizer (a caller such as the training benchmark builds them in
    memory), or both loaded from `model_path` in the training precision; the model gets a
    pad id and no key/value cache (training needs none, and packed rows need its absence)."""
    from PUMA.modeling import load_causal_lm, torch_dtype

    if (model is None) != (tokenizer is None):
        raise ValueError("pass both model and tokenizer, or neither (both are then loaded from model_path)")
    if model is None:
        model, tokenizer = load_causal_lm(model_path, dtype=torch_dtype(bf16, fp16))
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    model.config.use_cache = False
    return model, tokenizer


def trainable_in_float32(model: Any, config: LoRATrainingConfig) -> Any:
    """Mixed precision without DeepSpeed needs float32 master copies of what it trains (the
    fp16 gradient scaler refuses half-precision gradients; Adam on bf16 weights loses small
    updates). PEFT makes the LoRA matrices float32; this does the same for the modules
    saved whole. DeepSpeed keeps its own float32 copies."""
    import torch

    if (config.bf16 or config.fp16) and not config.deepspeed:
        for parameter in model.parameters():
            if parameter.requires_grad and parameter.dtype != torch.float32:
                parameter.data = parameter.data.float()
    return model


def save_adapter(trainer: Any, tokenizer: Any, output_dir: str) -> Path:
    """Save the trained adapter (its LoRA matrices and the modules saved whole), and the
    tokenizer once (main process), so the folder loads by path."""
    trainer.save_model(output_dir)
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(output_dir)
    return Path(output_dir)
