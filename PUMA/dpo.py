"""Step 6b: DPO (TRL `DPOTrainer`) with a LoRA adapter on the merged SFT model.

Defaults are the release's: beta 0.1, lr 5e-5, 5 epochs, max length 1024, max prompt
length 768. TRL 1.16's `DPOConfig` has no prompt-length field, so prompts longer than
`max_prompt_length` tokens are cut here, keeping their end (memory tail and the
parameter cue), before TRL truncates whole sequences to `max_length`.
Runs under `accelerate launch` like the SFT step.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PUMA.sft import LoRATrainingConfig, save_adapter


@dataclass
class DPOStepConfig(LoRATrainingConfig):
    model_path: str = "PUMA/output/sft_merged"
    data_file: str = "PUMA/data/dpo_train.json"
    output_dir: str = "PUMA/output/dpo"
    beta: float = 0.1
    learning_rate: float = 5e-5
    num_train_epochs: float = 5
    max_length: int = 1024
    max_prompt_length: int = 768


def cut_prompt(tokenizer: Any, prompt: str, max_tokens: int) -> str:
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return prompt if len(ids) <= max_tokens else tokenizer.decode(ids[-max_tokens:], skip_special_tokens=True)


def build_dpo_trainer(config: DPOStepConfig, model: Any = None, tokenizer: Any = None,
                      pairs: list[dict[str, str]] | None = None) -> tuple[Any, Any]:
    """The LoRA `DPOTrainer` (not yet run) and its tokenizer. Model and tokenizer come from
    `config.model_path` and the pairs from `config.data_file` unless given (the training
    benchmark passes in-memory ones); a given model is wrapped with LoRA in place."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from PUMA.modeling import read_json
    from PUMA.sft import lora_config, model_and_tokenizer

    if pairs is None:
        pairs = read_json(config.data_file)
        if not pairs:
            raise ValueError(f"{config.data_file}: no preference pairs (all candidates scored alike?)")
    model, tokenizer = model_and_tokenizer(config.model_path, config.bf16, config.fp16, model, tokenizer)
    dataset = Dataset.from_list([{"prompt": cut_prompt(tokenizer, p["prompt"], config.max_prompt_length),
                                  "chosen": p["chosen"], "rejected": p["rejected"]} for p in pairs])
    args = DPOConfig(
        output_dir=config.output_dir, beta=config.beta, learning_rate=config.learning_rate,
        num_train_epochs=config.num_train_epochs, max_length=config.max_length,
        gradient_checkpointing=config.gradient_checkpointing, **config.trainer_arguments(),
    )
    trainer = DPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=lora_config(config))
    return trainer, tokenizer


def train_dpo(config: DPOStepConfig) -> Path:
    """Train and save the DPO LoRA adapter (and tokenizer) in `output_dir`; returns it."""
    trainer, tokenizer = build_dpo_trainer(config)
    trainer.train()
    return save_adapter(trainer, tokenizer, config.output_dir)


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    print(f"DPO LoRA adapter saved in {train_dpo(parse_config(DPOStepConfig, argv, 'python -m PUMA.dpo', __doc__))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
