"""Step 6b: DPO (TRL `DPOTrainer`) with a LoRA adapter on the merged SFT model.

Defaults are the release's: beta 0.1, lr 5e-5, 5 epochs, max length 1024, max prompt
length 768, warmup ratio 0.1, the release's LoRA with `modules_to_save`; the reference
model is the same model with the adapter disabled. `--epoch_order release` takes the pairs in
the release's order over epochs (`PUMA/lora.py`, "Epochs").

Each pair is tokenized here (prompt with BOS; each response continuing it, plus EOS) and
cut by `--prompt_cut` before TRL sees it:
- `start` (the release's): the rule of the TRL the release ran: only when prompt + the longer response
  exceed `--max_length` is the prompt cut to its last `--max_prompt_length` tokens (its
  start, instruction included, is lost), and if that is still too long the responses keep
  their first `max_length - max_prompt_length` tokens;
- `memory` (improved): the prompt is never cut (step 5 shortened its memory to fit); a response
  that still does not fit loses its end.
TRL 1.16 has no prompt-length setting, so its own truncation is switched off.

Batch: the release's DPO script ran batch 1 x accumulation 16 on every GPU of its node, so its
step size was 16 x that node's GPUs; `release` fixes it at 64 (`--global_batch_size`; the
accumulation = 64 / processes), what the paper's 4-GPU node (the SFT script's
`--include=localhost:0,1,2,3`) made. `improved` keeps batch 1 x accumulation 16 per GPU.
`PUMA/scripts/dpo_llama.sh` starts it like the SFT step (release: DeepSpeed ZeRO-2, fp16).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.settings import setting
from PUMA.lora import EPOCH_ORDER_HELP, EpochOrder, LoRATrainingConfig
from PUMA.prompting import PromptCut


@dataclass
class DPOStepConfig(LoRATrainingConfig):
    model_path: str = setting("PUMA/output/sft_merged", "the merged SFT model the adapter is trained on (also the "
                              "reference model, with the adapter disabled)")
    data_file: str = setting("PUMA/data/dpo_train.json", "step 5's preference pairs")
    output_dir: str = setting("PUMA/output/dpo", "folder for the DPO LoRA adapter, its tokenizer and its record "
                              "(puma_run.json)", flag="out", aliases=("output_dir",), metavar="DIR")
    beta: float = setting(0.1, "DPO's beta: how far the policy may move from the reference model")
    learning_rate: float = setting(5e-5, "peak learning rate")
    num_train_epochs: float = setting(5.0, "passes over the pairs")
    max_length: int = setting(1024, "tokens of prompt + the longer response a pair is cut to")
    max_prompt_length: int = setting(768, "--prompt_cut start: a pair over --max_length keeps its prompt's last "
                                     "this many tokens")
    prompt_cut: PromptCut = setting("start", "start: a pair over --max_length loses its prompt's start (the release's "
                                    "TRL); memory: the prompt is kept whole (step 5 fitted its memory, with "
                                    "--prompt_cut memory) and a response that still does not fit loses its end")
    epoch_order: EpochOrder = setting("release", EPOCH_ORDER_HELP)

    def trainer_config_class(self) -> type:
        from trl import DPOConfig

        return DPOConfig


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def tokenize_pair(tokenizer: Any, prompt: str, chosen: str, rejected: str) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids with BOS, chosen ids + EOS, rejected ids + EOS). Each response is
    tokenized together with the prompt, so a token merging across the boundary goes to the
    response (the prompt keeps what both tokenizations share)."""
    prompt_ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    with_chosen = tokenizer(prompt + chosen, add_special_tokens=True)["input_ids"]
    with_rejected = tokenizer(prompt + rejected, add_special_tokens=True)["input_ids"]
    n = min(common_prefix(prompt_ids, with_chosen), common_prefix(prompt_ids, with_rejected))
    eos = [tokenizer.eos_token_id]
    return prompt_ids[:n], with_chosen[n:] + eos, with_rejected[n:] + eos


def release_cut(prompt: list[int], chosen: list[int], rejected: list[int], max_length: int,
                max_prompt_length: int) -> tuple[list[int], list[int], list[int]]:
    longer = max(len(chosen), len(rejected))
    if len(prompt) + longer > max_length:
        prompt = prompt[-max_prompt_length:]
    if len(prompt) + longer > max_length:
        room = max_length - max_prompt_length
        chosen, rejected = chosen[:room], rejected[:room]
    return prompt, chosen, rejected


def whole_prompt_cut(prompt: list[int], chosen: list[int], rejected: list[int],
                     max_length: int) -> tuple[list[int], list[int], list[int]]:
    room = max_length - len(prompt)
    if room < 1:
        raise ValueError(f"a DPO prompt of {len(prompt)} tokens leaves no room for a response within --max_length "
                         f"{max_length}: make the pairs again with PUMA.dpo_data --prompt_cut memory --max_length "
                         f"{max_length}")
    return prompt, chosen[:room], rejected[:room]


def encode_pairs(config: DPOStepConfig, tokenizer: Any, pairs: list[dict[str, str]]) -> list[dict[str, list[int]]]:
    """The pairs as TRL's preference collator takes them, cut by `--prompt_cut`."""
    keep_whole = config.prompt_cut == "memory"
    rows = []
    for pair in pairs:
        ids = tokenize_pair(tokenizer, pair["prompt"], pair["chosen"], pair["rejected"])
        prompt, chosen, rejected = (whole_prompt_cut(*ids, config.max_length) if keep_whole else
                                    release_cut(*ids, config.max_length, config.max_prompt_length))
        rows.append({"prompt_ids": prompt, "chosen_ids": chosen, "rejected_ids": rejected})
    return rows


def trainer_class() -> type:
    from trl import DPOTrainer

    from PUMA.lora import ReleaseEpochsMixin

    class PumaDPOTrainer(ReleaseEpochsMixin, DPOTrainer):
        """TRL's trainer on pairs already tokenized and cut (`encode_pairs`)."""

        def _prepare_dataset(self, dataset: Any, processing_class: Any, args: Any, dataset_name: str) -> Any:
            return dataset

    return PumaDPOTrainer


def build_dpo_trainer(config: DPOStepConfig, model: Any = None, tokenizer: Any = None,
                      pairs: list[dict[str, str]] | None = None) -> tuple[Any, Any]:
    """The LoRA DPO trainer (not yet run) and its tokenizer. Model and tokenizer come from
    `config.model_path` and the pairs from `config.data_file` unless given (the training
    benchmark passes in-memory ones); a given model is wrapped with LoRA in place."""
    from datasets import Dataset
    from trl import DPOConfig

    from PUMA.lora import model_and_tokenizer, with_lora
    from PUMA.modeling import read_json

    config.check()
    if pairs is None:
        pairs = read_json(config.data_file)
        if not pairs:
            raise ValueError(f"{config.data_file}: no preference pairs (all candidates scored alike?)")
    model, tokenizer = model_and_tokenizer(config.model_path, config.bf16, config.fp16, model, tokenizer)
    dataset = Dataset.from_list(encode_pairs(config, tokenizer, pairs))
    model = with_lora(model, config)
    own: dict[str, Any] = dict(output_dir=config.output_dir, beta=config.beta, learning_rate=config.learning_rate,
                               num_train_epochs=config.num_train_epochs, max_length=None,
                               gradient_checkpointing=config.gradient_checkpointing)
    args = DPOConfig(**own, **config.trainer_arguments(), **config.trainer_overrides(DPOConfig, own))
    trainer = trainer_class()(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                              epoch_order=config.epoch_order)
    return trainer, tokenizer


def train_dpo(config: DPOStepConfig) -> Path:
    """Train and save the DPO LoRA adapter (and tokenizer) in `output_dir`; returns it."""
    from PUMA.lineage import check_carried
    from PUMA.lora import resume_point, run_facts, save_adapter
    from PUMA.modeling import local_files_only, model_family_of
    from PUMA.recipe import check_inputs, get_recipe, write_record
    from PUMA.train_progress import TrainingProgress

    config.check()
    recipe = get_recipe(config.recipe)
    inputs = {"--data_file": config.data_file, "--model_path": config.model_path}
    check_inputs(recipe, inputs)
    notes = check_carried("dpo", config, inputs)
    local_files_only(config.model_path, "--model_path")  # a model it cannot load ends here, before the libraries load
    trainer, tokenizer = build_dpo_trainer(config)
    progress = TrainingProgress.attach(trainer, "dpo")
    resumed = resume_point(config.resume, config.output_dir)
    result = trainer.train(resume_from_checkpoint=resumed)
    out = save_adapter(trainer, tokenizer, config.output_dir)
    write_record(out, "dpo", recipe, config, inputs, train_loss=result.training_loss,
                 optimizer_steps=trainer.state.global_step, pairs=len(trainer.train_dataset), input_notes=notes,
                 loss_history=progress.history, resumed_from=resumed,
                 base_model=model_family_of(config.model_path, tokenizer), **run_facts(trainer, config, "dpo"))
    return out


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step
    from PUMA.lora import main_process

    config = parse_step(DPOStepConfig, argv, "python -m PUMA.dpo", __doc__, "dpo")
    out = train_dpo(config)
    if main_process():
        print(f"DPO LoRA adapter saved in {out}")
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
