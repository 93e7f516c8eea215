"""Step 2: supervised fine-tuning with LoRA on PUMA's function and/or parameter data.

The loss covers only the label tokens (and the EOS after them): prompt and padding
positions get label -100. Batches are padded to their longest example. Training
runs through the Hugging Face `Trainer`, so `accelerate launch` (optionally with a
DeepSpeed config) spreads it over several GPUs:

    accelerate launch --config_file PUMA/configs/accelerate_multi_gpu.yaml -m PUMA.sft \\
        --model_path meta-llama/Llama-2-7b-chat-hf --train_on function_param --bf16

Defaults are the release's: LoRA r=16, alpha=32, dropout 0 on q,k,v,o,gate,up,down;
10 epochs; lr 3e-4; per-device batch 1 x gradient accumulation 16; max length 1280.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IGNORE_INDEX = -100
LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


@dataclass
class LoRATrainingConfig:
    """Settings SFT and DPO share: LoRA, batching, precision, checkpoints, logging."""

    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 16
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: str = LORA_TARGETS
    logging_steps: int = 10
    save_strategy: str = "epoch"
    save_total_limit: int = 2
    bf16: bool = False
    fp16: bool = False
    gradient_checkpointing: bool = False
    deepspeed: str | None = None  # e.g. PUMA/configs/deepspeed_zero2.json
    report_to: str = "none"  # "tensorboard" or "wandb" (the package must be installed)
    seed: int = 42
    max_steps: int = -1  # optimizer steps; -1: num_train_epochs decides

    def trainer_arguments(self) -> dict[str, Any]:
        """The HF/TRL trainer arguments both steps set the same way."""
        names = ("per_device_train_batch_size", "gradient_accumulation_steps", "logging_steps", "save_strategy",
                 "save_total_limit", "bf16", "fp16", "seed", "deepspeed", "report_to", "max_steps")
        return {**{name: getattr(self, name) for name in names}, "disable_tqdm": True}


def model_and_tokenizer(model_path: str, bf16: bool, fp16: bool, model: Any = None,
                        tokenizer: Any = None) -> tuple[Any, Any]:
    """The given model and tokenizer (a caller such as the training benchmark builds them in
    memory), or both loaded from `model_path` in the training precision; the model gets a pad id."""
    from PUMA.modeling import load_causal_lm, torch_dtype

    if (model is None) != (tokenizer is None):
        raise ValueError("pass both model and tokenizer, or neither (both are then loaded from model_path)")
    if model is None:
        model, tokenizer = load_causal_lm(model_path, dtype=torch_dtype(bf16, fp16))
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def save_adapter(trainer: Any, tokenizer: Any, output_dir: str) -> Path:
    """Save the trained adapter, and the tokenizer once (main process), so the folder loads by path."""
    trainer.save_model(output_dir)
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(output_dir)
    return Path(output_dir)


@dataclass
class SFTConfig(LoRATrainingConfig):
    model_path: str = "meta-llama/Llama-2-7b-chat-hf"
    train_on: str = "function_param"  # function | param | function_param
    function_data: str = "PUMA/data/function_train.json"
    param_data: str = "PUMA/data/param_train.json"
    output_dir: str = "PUMA/output/sft"
    num_train_epochs: float = 10
    learning_rate: float = 3e-4
    max_length: int = 1280
    warmup_steps: int = 0
    max_examples: int = -1  # -1: all
    # "group_by_length": batches of similar lengths (less padding when batches hold several examples)
    train_sampling_strategy: str = "random"


def encode_example(tokenizer: Any, prompt: str, label: str, max_length: int) -> dict[str, list[int]]:
    """input_ids = [BOS] prompt label EOS; labels = -100 over the prompt. Over-long
    examples keep the label (up to half the budget) and the prompt's head and tail."""
    prompt_ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    label_ids = tokenizer(label, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    if len(prompt_ids) + len(label_ids) > max_length:
        label_ids = label_ids[:max(max_length // 2, max_length - len(prompt_ids))]
        room = max_length - len(label_ids)
        if len(prompt_ids) > room:
            head = room // 2
            prompt_ids = prompt_ids[:head] + prompt_ids[len(prompt_ids) - (room - head):]
    return {"input_ids": prompt_ids + label_ids,
            "labels": [IGNORE_INDEX] * len(prompt_ids) + label_ids}


class PaddingCollator:
    """Right-pads a batch (pad id / attention 0 / label -100) to its longest example, or to a
    fixed `pad_to_length` when given: static shapes, and the baseline the training benchmark
    measures dynamic padding against."""

    def __init__(self, pad_token_id: int, pad_to_length: int | None = None):
        self.pad_token_id = pad_token_id
        self.pad_to_length = pad_to_length

    def __call__(self, features: list[dict[str, list[int]]]) -> dict[str, Any]:
        import torch

        longest = max(len(f["input_ids"]) for f in features)
        width = longest if self.pad_to_length is None else self.pad_to_length
        if longest > width:
            raise ValueError(f"an example has {longest} tokens, more than pad_to_length={width}")
        input_ids, attention, labels = [], [], []
        for f in features:
            pad = width - len(f["input_ids"])
            input_ids.append(list(f["input_ids"]) + [self.pad_token_id] * pad)
            attention.append([1] * len(f["input_ids"]) + [0] * pad)
            labels.append(list(f["labels"]) + [IGNORE_INDEX] * pad)
        return {"input_ids": torch.tensor(input_ids), "attention_mask": torch.tensor(attention),
                "labels": torch.tensor(labels)}


def load_examples(config: SFTConfig) -> list[dict[str, str]]:
    from PUMA.modeling import read_json

    if config.train_on not in ("function", "param", "function_param"):
        raise ValueError(f"--train_on must be function, param or function_param, got {config.train_on!r}")
    examples: list[dict[str, str]] = []
    if config.train_on in ("function", "function_param"):
        examples += read_json(config.function_data)
    if config.train_on in ("param", "function_param"):
        examples += read_json(config.param_data)
    if config.max_examples > 0:
        examples = examples[:config.max_examples]
    if not examples:
        raise ValueError("no SFT examples: run PUMA/scripts/pre_sft_func_data.sh and pre_sft_param_data.sh first")
    return examples


def lora_config(config: Any) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=[m.strip() for m in config.lora_target_modules.split(",") if m.strip()],
                      bias="none", task_type="CAUSAL_LM")


def build_sft_trainer(config: SFTConfig, model: Any = None, tokenizer: Any = None,
                      examples: list[dict[str, str]] | None = None,
                      pad_to_length: int | None = None) -> tuple[Any, Any]:
    """The LoRA SFT `Trainer` (not yet run) and its tokenizer. Model and tokenizer come from
    `config.model_path` and the examples from the config's data files unless given; a given
    model is wrapped with LoRA in place. `pad_to_length` pads every batch to that length."""
    from peft import get_peft_model
    from transformers import Trainer, TrainingArguments

    examples = load_examples(config) if examples is None else examples
    model, tokenizer = model_and_tokenizer(config.model_path, config.bf16, config.fp16, model, tokenizer)
    dataset = [encode_example(tokenizer, e["prompt"], e["label"], config.max_length) for e in examples]
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    model = get_peft_model(model, lora_config(config))
    args = TrainingArguments(
        output_dir=config.output_dir, num_train_epochs=config.num_train_epochs, learning_rate=config.learning_rate,
        warmup_steps=config.warmup_steps, train_sampling_strategy=config.train_sampling_strategy,
        remove_unused_columns=False, dataloader_num_workers=0,
        **config.trainer_arguments(),
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset,
                      data_collator=PaddingCollator(tokenizer.pad_token_id, pad_to_length), processing_class=tokenizer)
    return trainer, tokenizer


def train_sft(config: SFTConfig) -> Path:
    """Fine-tune and save the LoRA adapter (and tokenizer) in `output_dir`; returns it."""
    trainer, tokenizer = build_sft_trainer(config)
    trainer.train()
    return save_adapter(trainer, tokenizer, config.output_dir)


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    out = train_sft(parse_config(SFTConfig, argv, "python -m PUMA.sft", __doc__))
    print(f"LoRA adapter saved in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
