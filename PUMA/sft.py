"""Step 2: supervised fine-tuning with LoRA on PUMA's function and/or parameter data.

`--loss padded_eos` (the release recipe) trains as the release's `finetune_llama.py`: each example is the
prompt, the label and EOS tokenized together, cut at `--max_length` and padded to it with
EOS; the labels copy the ids *including the EOS padding*, only the prompt is masked; the
loss is the mean over those positions of each micro-batch (batch 1 in the release), so
gradient accumulation averages per-example means, and every function example
(~60 tokens) carries ~1,200 positions of "predict EOS after EOS".

`--loss label_only` (the improved recipe) masks the prompt and the padding; with `--packing 1`
(improved) no padding is computed at all: the examples of a micro-batch are packed into one row
whose positions restart at every example (the attention is then block-diagonal, so each
example's loss is what it would be alone; the model must take `position_ids`, as every HF
Llama-style model does); `--packing 0` pads each batch to its longest example instead. The
loss averages the label tokens of the whole optimizer step (`--loss_weighting token`, the HF
default) or, with `--loss_weighting example`, each example's mean over its own label tokens,
so a 10-token function label weighs as much as a 233-token recommendation list.

Both recipes: the release's LoRA and `modules_to_save` (`PUMA/lora.py`), warmup ratio
0.1, 10 epochs, lr 3e-4, max length 1280. `--epoch_order release` takes the examples in the
release's order over epochs (its gradient accumulation running on over epoch ends), `--optim`
the release's optimizer (`PUMA/lora.py`, "Epochs"). Batch: `release` trains 64 examples per
optimizer step on any number of GPUs (batch 1 per device, the accumulation = 64 / processes: 64
on one, 16 on the release's 4); `improved` packs 4 examples per device x accumulation 4 per GPU.
Training runs through the Hugging Face `Trainer`; `PUMA/scripts/finetune_function_param.sh`
starts it on the GPUs there are (under `--gpu_launch deepspeed_zero2` with DeepSpeed ZeRO-2 in
fp16, as the release). The adapter folder holds a record (`puma_run.json`)
of the recipe, the settings, the batch actually used and the precision path.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from PersonalWAB.settings import setting
from PUMA.lora import EPOCH_ORDER_HELP, EpochOrder, LoRATrainingConfig

IGNORE_INDEX = -100
LOSS_WEIGHTINGS = ("token", "example")
TRAIN_ON = ("function", "param", "function_param")
Loss = Literal["padded_eos", "label_only"]


@dataclass
class SFTConfig(LoRATrainingConfig):
    model_path: str = setting("meta-llama/Llama-2-7b-chat-hf", "base model folder or hub name the adapter is "
                              "trained on")
    train_on: str = setting("function_param", "which data the adapter learns: function names, parameters, or both "
                            "(the release's one adapter for both)", choices=TRAIN_ON)
    function_data: str = setting("PUMA/data/function_train.json", "step 1's function examples")
    param_data: str = setting("PUMA/data/param_train.json", "step 1's parameter examples")
    output_dir: str = setting("PUMA/output/sft", "folder for the LoRA adapter, its tokenizer and its record "
                              "(puma_run.json)", flag="out", aliases=("output_dir",), metavar="DIR")
    num_train_epochs: float = setting(10.0, "passes over the examples")
    learning_rate: float = setting(3e-4, "peak learning rate (the release's script: 3e-4; the paper states 4e-3)")
    max_length: int = setting(1280, "tokens an example is cut to (release: also the length it is padded to)")
    max_examples: int = setting(-1, "train on the first N examples only (a quick check); -1: all")
    loss: Loss = setting("padded_eos", "padded_eos: the release's loss, every example padded to --max_length with "
                         "EOS and the padding trained on as labels; label_only: the loss on the label tokens only")
    packing: bool = setting(False, "--loss label_only: the examples of a micro-batch packed into one row (no "
                            "padding computed); 0 pads them to the longest (for a model that cannot take packed rows)",
                            aliases=("no-packing",))
    loss_weighting: str = setting("token", "--loss label_only: token averages the label tokens of an optimizer "
                                  "step, example averages each example's mean (a short function label weighs as "
                                  "much as a long recommendation list)", choices=LOSS_WEIGHTINGS)
    epoch_order: EpochOrder = setting("release", EPOCH_ORDER_HELP)

    def check(self) -> None:
        super().check()
        if self.train_on not in TRAIN_ON:
            raise ValueError(f"--train_on must be function, param or function_param, got {self.train_on!r}")
        if self.loss_weighting not in LOSS_WEIGHTINGS:
            raise ValueError(f"--loss_weighting {self.loss_weighting!r}: expected token or example")
        if self.loss == "padded_eos" and (self.loss_weighting != "token" or self.packing):
            raise ValueError("--loss_weighting example and --packing 1 need --loss label_only; the release's "
                             "padded_eos loss averages each micro-batch's positions over rows padded to --max_length")


# --- release recipe: the loss over max-length EOS padding -------------------------------------------------------
def encode_release(tokenizer: Any, prompt: str, label: str, max_length: int) -> dict[str, list[int]]:
    """prompt + label + EOS tokenized together (with BOS) and cut at `max_length`; labels
    mask the prompt's tokens (as many as the prompt alone tokenizes to). Padding comes in
    `ReleasePaddingCollator`."""
    ids = tokenizer(prompt + label + tokenizer.eos_token, add_special_tokens=True)["input_ids"][:max_length]
    masked = min(len(tokenizer(prompt, add_special_tokens=True)["input_ids"][:max_length]), len(ids))
    return {"input_ids": ids, "labels": [IGNORE_INDEX] * masked + ids[masked:]}


class ReleasePaddingCollator:
    """Pads every example to `max_length` with EOS, attention 0 on the padding and the EOS
    ids *kept as labels* there (the release's `padding="max_length"` with pad = EOS and
    labels copied from the padded ids)."""

    def __init__(self, eos_token_id: int, max_length: int):
        self.eos_token_id = eos_token_id
        self.max_length = max_length

    def __call__(self, features: list[dict[str, list[int]]]) -> dict[str, Any]:
        import torch

        rows: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
        for f in features:
            pad = self.max_length - len(f["input_ids"])
            rows["input_ids"].append(list(f["input_ids"]) + [self.eos_token_id] * pad)
            rows["attention_mask"].append([1] * len(f["input_ids"]) + [0] * pad)
            rows["labels"].append(list(f["labels"]) + [self.eos_token_id] * pad)
        return {name: torch.tensor(value) for name, value in rows.items()}


# --- improved recipe: label-only loss, no padding -----------------------------------------------------------------
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


class PackingCollator:
    """The micro-batch's examples in one row, no padding: `position_ids` restart at 0 for
    each example (HF then masks attention block-diagonally, with no attention mask given),
    each example's first label is masked so no example predicts into the next, and
    `example_index` says which example each position belongs to (for per-example loss)."""

    def __call__(self, features: list[dict[str, list[int]]]) -> dict[str, Any]:
        import torch

        input_ids: list[int] = []
        labels: list[int] = []
        positions: list[int] = []
        owner: list[int] = []
        for index, f in enumerate(features):
            input_ids += f["input_ids"]
            labels += [IGNORE_INDEX] + list(f["labels"][1:])
            positions += range(len(f["input_ids"]))
            owner += [index] * len(f["input_ids"])
        return {"input_ids": torch.tensor([input_ids]), "labels": torch.tensor([labels]),
                "position_ids": torch.tensor([positions]), "example_index": torch.tensor([owner])}


class PaddingCollator:
    """Right-pads a batch (pad id / attention 0 / label -100) to its longest example
    (`--packing 0`, for models that cannot take packed rows); `example_index` as above."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, features: list[dict[str, list[int]]]) -> dict[str, Any]:
        import torch

        width = max(len(f["input_ids"]) for f in features)
        rows: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": [], "example_index": []}
        for index, f in enumerate(features):
            pad = width - len(f["input_ids"])
            rows["input_ids"].append(list(f["input_ids"]) + [self.pad_token_id] * pad)
            rows["attention_mask"].append([1] * len(f["input_ids"]) + [0] * pad)
            rows["labels"].append(list(f["labels"]) + [IGNORE_INDEX] * pad)
            rows["example_index"].append([index] * width)
        return {name: torch.tensor(value) for name, value in rows.items()}


def per_example_loss(logits: Any, labels: Any, example_index: Any) -> Any:
    """The mean over examples of each example's mean token loss (next-token cross-entropy
    on its label positions); examples without a label position do not count."""
    import torch

    shift_logits = logits[..., :-1, :].reshape(-1, logits.shape[-1]).float()
    shift_labels = labels[..., 1:].reshape(-1)
    owners = example_index[..., 1:].reshape(-1)
    losses = torch.nn.functional.cross_entropy(shift_logits, shift_labels, ignore_index=IGNORE_INDEX,
                                               reduction="none")
    counted = shift_labels != IGNORE_INDEX
    count = int(example_index.max()) + 1
    sums = torch.zeros(count, device=losses.device).index_add(0, owners[counted], losses[counted])
    tokens = torch.zeros(count, device=losses.device).index_add(0, owners[counted], torch.ones_like(losses[counted]))
    present = tokens > 0
    return (sums[present] / tokens[present]).mean()


def trainer_class() -> type:
    from transformers import Trainer

    from PUMA.lora import ReleaseEpochsMixin

    class PumaSFTTrainer(ReleaseEpochsMixin, Trainer):
        """The HF `Trainer` with the recipe's loss. `token`: the model's loss normalised by
        the label tokens of the whole optimizer step (HF's default). `micro_batch` (the
        release): each micro-batch's mean, averaged over gradient accumulation.
        `example`: each micro-batch's mean of per-example means, averaged likewise."""

        def __init__(self, *args: Any, loss_mode: str = "token", **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.loss_mode = loss_mode
            if loss_mode != "token":
                self.loss_is_scaled_for_ga = False  # a per-micro-batch mean: the Trainer divides by accumulation

        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            example_index = inputs.pop("example_index", None)
            if self.loss_mode == "token":
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.loss_mode == "micro_batch":
                outputs = model(**inputs)
                loss = outputs.loss
            else:
                labels = inputs.pop("labels")
                outputs = model(**inputs)
                loss = per_example_loss(outputs.logits, labels, example_index)
            return (loss, outputs) if return_outputs else loss

    return PumaSFTTrainer


def load_examples(config: SFTConfig) -> list[dict[str, str]]:
    from PUMA.modeling import read_json

    examples: list[dict[str, str]] = []  # parameter examples first, as the release concatenates them
    if config.train_on in ("param", "function_param"):
        examples += read_json(config.param_data)
    if config.train_on in ("function", "function_param"):
        examples += read_json(config.function_data)
    if config.max_examples > 0:
        examples = examples[:config.max_examples]
    if not examples:
        raise ValueError("no SFT examples: run PUMA/scripts/pre_sft_func_data.sh and pre_sft_param_data.sh first")
    return examples


def data_files(config: SFTConfig) -> dict[str, str | None]:
    return {"--function_data": config.function_data if "function" in config.train_on else None,
            "--param_data": config.param_data if "param" in config.train_on else None}


def recipe_batches(config: SFTConfig, tokenizer: Any, examples: list[dict[str, str]]) -> tuple[list[Any], Any, str]:
    """(encoded examples, collator, loss mode) of the config's `--loss`."""
    if config.loss == "padded_eos":
        dataset = [encode_release(tokenizer, e["prompt"], e["label"], config.max_length) for e in examples]
        return dataset, ReleasePaddingCollator(tokenizer.eos_token_id, config.max_length), "micro_batch"
    dataset = [encode_example(tokenizer, e["prompt"], e["label"], config.max_length) for e in examples]
    collator = PackingCollator() if config.packing else PaddingCollator(tokenizer.pad_token_id)
    return dataset, collator, config.loss_weighting


def build_sft_trainer(config: SFTConfig, model: Any = None, tokenizer: Any = None,
                      examples: list[dict[str, str]] | None = None) -> tuple[Any, Any]:
    """The LoRA SFT trainer (not yet run) and its tokenizer. Model and tokenizer come from
    `config.model_path` and the examples from the config's data files unless given; a given
    model is wrapped with LoRA in place."""
    from transformers import TrainingArguments

    from PUMA.lora import model_and_tokenizer, with_lora

    config.check()
    examples = load_examples(config) if examples is None else examples
    model, tokenizer = model_and_tokenizer(config.model_path, config.bf16, config.fp16, model, tokenizer)
    dataset, collator, loss_mode = recipe_batches(config, tokenizer, examples)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    model = with_lora(model, config)
    own: dict[str, Any] = dict(output_dir=config.output_dir, num_train_epochs=config.num_train_epochs,
                               learning_rate=config.learning_rate, remove_unused_columns=False,
                               dataloader_num_workers=0)
    args = TrainingArguments(**own, **config.trainer_arguments(), **config.trainer_overrides(TrainingArguments, own))
    trainer = trainer_class()(model=model, args=args, train_dataset=dataset, data_collator=collator,
                              processing_class=tokenizer, loss_mode=loss_mode,
                              epoch_order=config.epoch_order)
    return trainer, tokenizer


def train_sft(config: SFTConfig) -> Path:
    """Fine-tune and save the LoRA adapter (and tokenizer) in `output_dir`; returns it."""
    from PUMA.lineage import check_carried
    from PUMA.lora import resume_point, run_facts, save_adapter
    from PUMA.modeling import local_files_only, model_family_of
    from PUMA.recipe import check_inputs, get_recipe, write_record
    from PUMA.train_progress import TrainingProgress

    config.check()
    recipe = get_recipe(config.recipe)
    check_inputs(recipe, data_files(config))
    notes = check_carried("sft", config, data_files(config))
    local_files_only(config.model_path, "--model_path")  # a model it cannot load ends here, before the libraries load
    trainer, tokenizer = build_sft_trainer(config)
    progress = TrainingProgress.attach(trainer, "sft")
    resumed = resume_point(config.resume, config.output_dir)
    result = trainer.train(resume_from_checkpoint=resumed)
    out = save_adapter(trainer, tokenizer, config.output_dir)
    write_record(out, "sft", recipe, config, {**data_files(config), "--model_path": config.model_path},
                 train_loss=result.training_loss, optimizer_steps=trainer.state.global_step,
                 trainable_parameters=sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
                 input_notes=notes, loss_history=progress.history, resumed_from=resumed,
                 base_model=model_family_of(config.model_path, tokenizer), **run_facts(trainer, config, "sft"))
    return out


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    from PUMA.lora import main_process

    out = train_sft(parse_step(SFTConfig, argv, "python -m PUMA.sft", __doc__, "sft"))
    if main_process():
        print(f"LoRA adapter saved in {out}")
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
