"""What PUMA's two training steps (SFT, DPO) share: the LoRA adapter as the release
configures it, batching, precision, checkpoints and logging.

The release's adapter: rank 16, alpha 32, dropout 0 on the q, k, v, o, gate, up and down
projections, and `modules_to_save` = embed_tokens, lm_head and every RMSNorm, trained
and saved whole (302 M trainable parameters on Llama-2-7B, 40 M of them LoRA). Both
recipes keep it. Warmup: 10% of the optimizer steps (the release's `warmup_ratio 0.1`).

Batch: the release's 64 examples per optimizer step (its 4 GPUs x batch 1 x accumulation 16)
on any number of processes: the accumulation is `global_batch_size / (world size x per-device
batch)`, the world size read from `WORLD_SIZE` (set by the launcher; 1 for a plain `python -m`),
and a layout that does not divide is refused. A `--gradient_accumulation_steps` above 0 wins over
the global batch (which is then what it makes): the improved recipe's per-GPU layout.

Epochs (`--epoch_order release`): the release's trainer (transformers 4.45) counted its gradient
accumulation over the whole run, so an epoch whose examples per process the accumulation does
not divide ends inside an accumulation that the next epoch's first examples complete, and it
stops after ceil(epochs x floor(examples per process / accumulation)) optimizer steps;
transformers 5 steps on each epoch's remainder instead. `ReleaseEpochOrder` feeds today's
trainer the release's order, so both take the same steps on the same examples (the record's
`epoch_order`). `--optim` is the trainer's optimizer: the release's `adamw_torch` (transformers 5
defaults to the fused kernel).

Precision: the release trained in fp16 under DeepSpeed ZeRO-2 (`PUMA/configs/
deepspeed_zero2_release.json`), the model loaded in fp16, so the trained weights stay fp16
under DeepSpeed's fp32 master copies; without DeepSpeed, AMP needs fp32 trainable weights
(`trainable_in_float32`). Each step records the path it took (`precision_path`) and, under
`--gpu_launch deepspeed_zero2` on a GPU, any launch choice that is not the release's
(`launch_departures`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields as dataclass_fields
from pathlib import Path
from collections.abc import Collection, Iterator
from typing import Any, Literal, cast

from PersonalWAB.settings import setting
from PUMA.recipe import RECIPE_HELP

LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
MODULES_TO_SAVE = "embed_tokens,lm_head,input_layernorm,post_attention_layernorm,norm"
RELEASE_GLOBAL_BATCH = 64  # the release's SFT: 4 GPUs (--include=localhost:0,1,2,3) x batch 1 x accumulation 16
RELEASE_PRECISION = "deepspeed-zero2-fp16"  # its llama_ds_config.json with --float16 (fp16 weights)
# transformers' optimizers a step may take (the release's transformers 4.45 defaulted to adamw_torch, 5 to the fused)
Optimizer = Literal["adamw_torch", "adamw_torch_fused", "adamw_8bit", "adafactor", "sgd"]
EpochOrder = Literal["release", "transformers"]
EPOCH_ORDER_HELP = ("release: the release's trainer's order (transformers 4.45: an accumulation runs on over an "
                    "epoch's end); transformers: transformers 5's epochs (each epoch's remainder makes a step)")
GpuDtype = Literal["float16", "bfloat16"]
GpuLaunch = Literal["deepspeed_zero2", "accelerate"]
# transformers' learning-rate schedules that need no arguments of their own
Scheduler = Literal["linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                    "inverse_sqrt"]


def world_size_from_env() -> int:
    """The number of training processes the launcher started (torchrun, accelerate and
    deepspeed set WORLD_SIZE); 1 without a launcher."""
    value = os.environ.get("WORLD_SIZE", "").strip()
    size = int(value) if value else 1
    if size < 1:
        raise ValueError(f"WORLD_SIZE={value}: expected a positive number of processes")
    return size


def main_process() -> bool:
    """Whether this is the run's rank-0 process, the one that writes (RANK, set by the launchers;
    a plain run is it)."""
    return int(os.environ.get("RANK", "").strip() or 0) == 0


def nodes_from_env() -> int:
    """The number of machines the processes run on (WORLD_SIZE over the launcher's processes per
    node, LOCAL_WORLD_SIZE); 1 without a launcher."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "").strip() or 1)
    return max(world_size_from_env() // max(local, 1), 1)


@dataclass(frozen=True)
class BatchLayout:
    """The batch a step trains with, resolved against the world size."""

    world_size: int
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    global_batch_size: int  # examples per optimizer step over all processes
    rule: str  # which setting decided the accumulation

    def facts(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "per_device_train_batch_size": self.per_device_train_batch_size,
                "gradient_accumulation_steps": self.gradient_accumulation_steps,
                "global_batch_size": self.global_batch_size, "batch_rule": self.rule}


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


@dataclass
class LoRATrainingConfig:
    """Settings the LoRA training steps (SFT, DPO, GRPO) share."""

    recipe: str = setting("release", RECIPE_HELP, metavar="NAME|FILE")
    per_device_train_batch_size: int = setting(1, "examples per device per micro-batch")
    gradient_accumulation_steps: int = setting(0, "micro-batches per optimizer step on each process; wins over "
                                               "--global_batch_size; 0: from the global batch")
    global_batch_size: int = setting(64, "examples per optimizer step over all processes (the accumulation is "
                                     "then this / (processes x per-device batch)); the release's 64")
    lora_r: int = setting(16, "LoRA rank")
    lora_alpha: int = setting(32, "LoRA alpha (the update is scaled by alpha / rank)")
    lora_dropout: float = setting(0.0, "dropout on the LoRA input")
    lora_target_modules: str = setting(LORA_TARGETS, "comma-separated module names that get LoRA matrices")
    modules_to_save: str = setting(MODULES_TO_SAVE, "comma-separated modules trained and saved whole, as the "
                                   "release; an empty value trains the LoRA matrices only")
    warmup_ratio: float = setting(0.1, "share of the optimizer steps over which the learning rate rises linearly")
    lr_scheduler_type: Scheduler = setting("linear", "learning-rate schedule after the warmup (the release's: "
                                           "linear decay to 0)")
    weight_decay: float = setting(0.0, "AdamW weight decay (the release's: none)")
    max_grad_norm: float = setting(1.0, "gradients are clipped to this global norm (the release's; 0: no clipping)")
    optim: Optimizer = setting("adamw_torch", "the trainer's optimizer (the release's transformers 4.45 default; "
                               "transformers 5 defaults to adamw_torch_fused)")
    gpu_dtype: GpuDtype = setting("float16", "the mixed precision PUMA.launch gives the step on a GPU (PRECISION "
                                  "overrides it; the release trained in fp16)")
    gpu_launch: GpuLaunch = setting("deepspeed_zero2", "how PUMA.launch starts SFT or DPO on GPUs: deepspeed_zero2 "
                                    "as the release (its ZeRO-2 fp16 config; a launch that is not the release's is "
                                    "recorded as a departure), accelerate without DeepSpeed (DEEPSPEED overrides both)")
    logging_steps: int = setting(10, "optimizer steps between two logged losses")
    save_strategy: str = setting("epoch", "when checkpoints are saved (no saves only the final adapter)",
                                 choices=("no", "epoch", "steps"))
    save_total_limit: int = setting(2, "checkpoints kept in the output folder")
    bf16: bool = setting(False, "bf16 mixed precision (GPU); PUMA/scripts set it from the recipe", aliases=("no-bf16",))
    fp16: bool = setting(False, "fp16 mixed precision (GPU; the release's)", aliases=("no-fp16",))
    gradient_checkpointing: bool = setting(False, "recompute activations in the backward pass: less memory, "
                                           "about a third slower", aliases=("no-gradient_checkpointing",))
    deepspeed: str | None = setting(None, "DeepSpeed config file, e.g. PUMA/configs/deepspeed_zero2.json (pip "
                                    "install -r requirements-gpu.txt); PUMA/scripts pass the recipe's")
    report_to: str = setting("none", "where the trainer reports metrics: none, tensorboard, wandb, ... (the "
                             "package must be installed)")
    seed: int = setting(42, "seed of the trainer's shuffling, dropout and LoRA initialisation")
    max_steps: int = setting(-1, "stop after this many optimizer steps; -1: the epochs decide")
    trainer_args: list[str] = setting(None, "more arguments of the trainer's own config (SFT: transformers' "
                                      "TrainingArguments, DPO: TRL's DPOConfig, GRPO: TRL's GRPOConfig), each "
                                      "NAME=VALUE, converted as that config's parser converts its flag (e.g. "
                                      "adam_beta2=0.95); one this step sets itself is refused (its own flag sets it)",
                                      factory=list, nargs="+", metavar="NAME=VALUE")
    resume: bool = setting(False, "continue from the newest checkpoint in --out (--save_strategy's checkpoint-N) "
                           "when there is one: an interrupted run, started again as it was (same processes and "
                           "nodes), takes the steps it had left", aliases=("no-resume",))

    def check(self) -> None:
        """Settings errors before any model is loaded."""
        from PUMA.recipe import get_recipe

        get_recipe(self.recipe)
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"--warmup_ratio {self.warmup_ratio}: must be in [0, 1)")
        if self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ValueError(f"--weight_decay {self.weight_decay} / --max_grad_norm {self.max_grad_norm}: "
                             "must not be negative")
        if self.bf16 and self.fp16:
            raise ValueError("--bf16 and --fp16: choose one")
        self.batch_layout()
        if self.trainer_args:  # names and values checked before any model loads
            self.trainer_overrides(self.trainer_config_class())
        if self.deepspeed and not Path(self.deepspeed).is_file():
            raise ValueError(f"--deepspeed {self.deepspeed}: no such file (see PUMA/configs/)")
        if self.deepspeed:
            import importlib.util

            if importlib.util.find_spec("deepspeed") is None:
                raise ValueError(f"--deepspeed {self.deepspeed}: the deepspeed package is not installed "
                                 "(pip install -r requirements-gpu.txt on the GPU machine)")

    def batch_layout(self, world_size: int | None = None) -> BatchLayout:
        """The per-device batch and accumulation to train with on `world_size` processes
        (default: WORLD_SIZE): an accumulation above 0 as given, else the global batch over the
        processes x per-device batch, refused when they do not divide it."""
        world = world_size_from_env() if world_size is None else world_size
        for flag in ("per_device_train_batch_size", "gradient_accumulation_steps", "global_batch_size"):
            if getattr(self, flag) < 0:
                raise ValueError(f"--{flag} {getattr(self, flag)}: must not be negative")
        per_device = self.per_device_train_batch_size
        if per_device < 1:
            raise ValueError(f"--per_device_train_batch_size {per_device}: must be at least 1")
        if self.gradient_accumulation_steps:
            accumulation = self.gradient_accumulation_steps
            return BatchLayout(world, per_device, accumulation, world * per_device * accumulation,
                               "--gradient_accumulation_steps")
        target = self.global_batch_size
        if not target:
            raise ValueError("--gradient_accumulation_steps 0 and --global_batch_size 0: give one of them")
        if target % (world * per_device):
            raise ValueError(
                f"global batch {target} (--global_batch_size) is not a multiple of {world} process(es) x per-device "
                f"batch {per_device}: run on a number of GPUs that divides it, change --per_device_train_batch_size, "
                f"or give --gradient_accumulation_steps")
        return BatchLayout(world, per_device, target // (world * per_device), target, "--global_batch_size")

    def trainer_config_class(self) -> type:
        """The trainer config `--trainer_args` name arguments of (SFT's; DPO and GRPO: TRL's own)."""
        from transformers import TrainingArguments

        return TrainingArguments

    def trainer_overrides(self, config_class: type, own: Collection[str] = ()) -> dict[str, Any]:
        """`--trainer_args` as arguments of the trainer's config class, each converted by that class's
        own parser (transformers' `HfArgumentParser`); a name the class lacks, a value its parser
        refuses, or a name the step sets itself (`own`) is a ValueError naming it."""
        if not self.trainer_args:
            return {}
        import argparse
        import tempfile

        from transformers import HfArgumentParser

        pairs = [arg.partition("=") for arg in self.trainer_args]
        known = {item.name for item in dataclass_fields(config_class)}
        set_here = {*own, *self.trainer_arguments()}
        for name, equals, _ in pairs:
            if not equals or not name:
                raise ValueError(f"--trainer_args {name}: expected NAME=VALUE")
            if name not in known:
                raise ValueError(f"--trainer_args {name}=...: {config_class.__name__} has no argument {name}")
            if name in set_here:
                raise ValueError(f"--trainer_args {name}=...: this step sets {name} itself (see its --help for the "
                                 "setting that decides it)")
        argv = ["--output_dir", tempfile.gettempdir(), "--bf16", str(self.bf16), "--fp16", str(self.fp16)]
        try:
            (parsed,) = HfArgumentParser(cast(Any, config_class), exit_on_error=False).parse_args_into_dataclasses(
                argv + [item for name, _, value in pairs for item in (f"--{name}", value)])
        except (argparse.ArgumentError, ValueError) as error:
            raise ValueError(f"--trainer_args: {error}") from error
        return {name: getattr(parsed, name) for name, _, _ in pairs}

    def trainer_arguments(self) -> dict[str, Any]:
        """The HF/TRL trainer arguments both steps set the same way (the batch resolved by
        `batch_layout`). transformers 5 takes the warmup ratio as a fractional
        `warmup_steps` (ceil(ratio x steps), as the release's)."""
        layout = self.batch_layout()
        names = ("logging_steps", "save_strategy", "save_total_limit", "bf16", "fp16", "seed", "deepspeed",
                 "report_to", "max_steps", "lr_scheduler_type", "weight_decay", "max_grad_norm", "optim")
        return {**{name: getattr(self, name) for name in names}, "warmup_steps": self.warmup_ratio,
                "per_device_train_batch_size": layout.per_device_train_batch_size,
                "gradient_accumulation_steps": layout.gradient_accumulation_steps, "disable_tqdm": True}


class ReleaseEpochOrder:
    """The order in which the release's trainer (transformers 4.45 with accelerate 0.34) fed the
    examples, as the train sampler of today's `Trainer`.

    That trainer shuffled each epoch with a generator seeded `seed + epoch`, gave each of the W
    processes every W-th example (the last round filled from the epoch's start) and ran its
    accumulation on over epoch ends. Here each epoch of today's trainer is the next
    floor(per process / accumulation) x accumulation examples per process of that running order
    (interleaved over the processes, which the trainer's sharding splits back), so the same
    examples meet in the same optimizer steps and the trainer plans the release's number of steps
    (and so its learning-rate schedule). With fewer examples per process than the accumulation,
    an epoch is its own examples, one step each epoch (as the release's)."""

    def __init__(self, examples: int, world_size: int, accumulation: int, seed: int):
        self.examples, self.world_size, self.seed = examples, world_size, seed
        self.per_process = -(-examples // world_size)
        self.per_epoch = self.per_process // accumulation * accumulation or self.per_process
        self.epoch = 0
        self._order: tuple[int, list[int]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """The trainer's epoch (it sets it before each; a resumed run starts at its own)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.per_epoch * self.world_size

    def release_epoch(self, epoch: int) -> list[int]:
        """One epoch of the release's order, padded to whole rounds over the processes."""
        import torch

        if self._order is None or self._order[0] != epoch:
            order = torch.randperm(self.examples, generator=torch.Generator().manual_seed(self.seed + epoch)).tolist()
            self._order = (epoch, order + order[:self.per_process * self.world_size - self.examples])
        return self._order[1]

    def __iter__(self) -> Iterator[int]:
        for position in range(self.epoch * self.per_epoch, (self.epoch + 1) * self.per_epoch):
            epoch, offset = divmod(position, self.per_process)
            yield from self.release_epoch(epoch)[offset * self.world_size:(offset + 1) * self.world_size]


class ReleaseEpochsMixin:
    """A `Trainer` that takes its examples in `ReleaseEpochOrder` when built with
    `epoch_order="release"` (SFT and DPO under `--epoch_order release`)."""

    train_dataset: Any  # the Trainer's, which this is mixed into
    args: Any

    def __init__(self, *args: Any, epoch_order: EpochOrder = "transformers", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.epoch_order = epoch_order

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        if self.epoch_order != "release":
            return super()._get_train_sampler(train_dataset)  # type: ignore[misc]  # the Trainer's
        dataset = self.train_dataset if train_dataset is None else train_dataset
        return ReleaseEpochOrder(len(dataset), self.args.world_size, self.args.gradient_accumulation_steps,
                                 self.args.seed)


def deepspeed_stage(path: str) -> int | None:
    """The ZeRO stage a DeepSpeed config file asks for (None: unreadable)."""
    try:
        return int(json.loads(Path(path).read_text(encoding="utf-8"))["zero_optimization"]["stage"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def precision_path(config: LoRATrainingConfig, device_type: str) -> str:
    """How the step computes and keeps its weights: `deepspeed-zero<stage>-<dtype>` (the model
    in that dtype, DeepSpeed's fp32 master copies), `amp-fp16` / `amp-bf16` (autocast,
    fp32 trainable weights), `fp32` on a GPU or `fp32-cpu`."""
    dtype = "fp16" if config.fp16 else "bf16" if config.bf16 else "fp32"
    if config.deepspeed:
        stage = deepspeed_stage(config.deepspeed)
        return f"deepspeed-zero{stage if stage is not None else '?'}-{dtype}"
    if dtype != "fp32":
        return f"amp-{dtype}"
    return "fp32" if device_type == "cuda" else "fp32-cpu"


def launch_departures(config: LoRATrainingConfig, step: str, layout: BatchLayout, precision: str,
                      device_type: str) -> list[str]:
    """Launch choices of a `--gpu_launch deepspeed_zero2` GPU run that are not the release's (a CPU
    run is a smoke test, not a reproduction: its record shows its batch and precision, nothing more)."""
    from PUMA.recipe import Departure

    if config.gpu_launch != "deepspeed_zero2" or device_type != "cuda":
        return []
    lines = []
    if precision != RELEASE_PRECISION:
        lines.append(Departure(step, f"precision {precision} (the release: {RELEASE_PRECISION}, fp16 weights under "
                                     "DeepSpeed's fp32 master copies)",
                               "chosen at launch (DEEPSPEED=none, PRECISION or --deepspeed/--fp16/--bf16)").line())
    if layout.global_batch_size != RELEASE_GLOBAL_BATCH:
        lines.append(Departure(step, f"global batch {layout.global_batch_size} (the release: {RELEASE_GLOBAL_BATCH})",
                               f"chosen at launch ({layout.rule})").line())
    return lines


def run_facts(trainer: Any, config: LoRATrainingConfig, step: str) -> dict[str, Any]:
    """What a step's record states about its batch and precision (from the trainer that ran:
    its world size and device), with the launch departures added to the recipe's own, and every
    argument of the trainer and the adapter as they ran (`training_arguments`, `lora`)."""
    args = trainer.args
    layout = BatchLayout(args.world_size, args.per_device_train_batch_size, args.gradient_accumulation_steps,
                         args.world_size * args.per_device_train_batch_size * args.gradient_accumulation_steps,
                         config.batch_layout(args.world_size).rule)
    device_type = args.device.type
    precision = precision_path(config, device_type)
    extra = launch_departures(config, step, layout, precision, device_type)
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in trainer.model.parameters() if p.requires_grad})
    # a trainer without ReleaseEpochsMixin (or a stand-in) keeps transformers 5's epochs
    order = ("the release's: accumulation carried over epoch ends (transformers 4.45)"
             if getattr(trainer, "epoch_order", None) == "release"
             else "each epoch's last accumulation stepped on its own")
    optimizer = getattr(args, "optim", None)
    facts = {**layout.facts(), "nodes": nodes_from_env(), "fsdp": bool(getattr(trainer, "is_fsdp_enabled", False)),
             "precision": precision, "trainable_dtype": ",".join(dtypes),
             "optimizer": str(getattr(optimizer, "value", optimizer)), "epoch_order": order,
             "launch_departures": extra, "training_arguments": json_value(args.to_dict()),
             "lora": json_value(trainer.model.peft_config["default"].to_dict())
             if hasattr(trainer.model, "peft_config") else None}
    if extra:
        facts["extra_departures"] = extra
    return facts


def json_value(value: Any) -> Any:
    """A trainer's or adapter's settings as JSON values (enums by value, sets sorted, objects as
    text), so a record holds exactly what the step ran with."""
    value = getattr(value, "value", value)
    if isinstance(value, (set, frozenset)):
        return sorted(json_value(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def resume_point(resume: bool, output_dir: str) -> str | None:
    """The checkpoint `--resume 1` continues from: the newest in the step's `--out`, None without
    one (the run then starts from the beginning) or without `--resume`."""
    if not resume or not Path(output_dir).is_dir():
        return None
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(output_dir)


def lora_config(config: LoRATrainingConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=_names(config.lora_target_modules),
                      modules_to_save=_names(config.modules_to_save) or None, bias="none", task_type="CAUSAL_LM")


def with_lora(model: Any, config: LoRATrainingConfig) -> Any:
    """`model` with the step's LoRA adapter, its random matrices drawn from `--seed`, so every
    process of a run, and a run on another number of processes, starts from the same adapter."""
    import torch
    from peft import get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    for flag in ("lora_target_modules", "modules_to_save"):
        missing = [name for name in _names(getattr(config, flag)) if name not in present]
        if missing:
            raise ValueError(f"--{flag}: the model ({type(model).__name__}) has no module named "
                             f"{', '.join(missing)}; give its own names (the defaults are Llama's)")
    torch.manual_seed(config.seed)
    return trainable_in_float32(get_peft_model(model, lora_config(config)), config)


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
    saved whole. Under DeepSpeed nothing is upcast: its fp16/bf16 engine casts the whole
    model to that dtype (PEFT's float32 LoRA matrices included, as the release's weights
    were fp16) and keeps float32 master copies in its optimizer."""
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
