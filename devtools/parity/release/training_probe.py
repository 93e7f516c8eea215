"""What a Hugging Face `Trainer` computed while it trained, per optimizer step, on either side of
the parity harness: the release's training scripts on the libraries of its time (transformers
4.45, TRL 0.11, PEFT 0.13) and this project's PUMA steps on today's.

It imports nothing from this project, so the release worker loads it by path. A probe is
attached to a built trainer before `train()`: it notes how the trainer's own adapter starts
(`initialisation`), puts the initial adapter weights (one file, the same for both sides) into the
trainer's PEFT model, and records for every optimizer step
the loss of each micro-batch (as the trainer's `compute_loss` returned it, in training mode
only), the gradient norm before clipping, the learning rate the step used and, for DPO, each
micro-batch's mean chosen and rejected rewards. `observation` then reads the settings the
trainer actually used and the trained weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

REWARD_KEYS = ("rewards/chosen", "rewards/rejected")


def trainable(model: Any) -> dict[str, Any]:
    """The trainable parameters by name (the adapter's LoRA matrices and its modules saved whole)."""
    return {name: parameter for name, parameter in model.named_parameters() if parameter.requires_grad}


def save_trainable(model: Any, path: Path) -> Path:
    from safetensors.torch import save_file

    save_file({name: p.detach().cpu().contiguous() for name, p in trainable(model).items()}, str(path))
    return path


def load_trainable(model: Any, path: Path) -> dict[str, Any]:
    """Copy the tensors of `path` into the model's trainable parameters of the same name and
    shape; says what loaded and what did not (a model with another LoRA layout loads less)."""
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(path))
    parameters = trainable(model)
    fits = [name for name, tensor in tensors.items()
            if name in parameters and tuple(tensor.shape) == tuple(parameters[name].shape)]
    with torch.no_grad():
        for name in fits:
            parameters[name].copy_(tensors[name].to(parameters[name].dtype))
    return {"loaded": len(fits), "not_in_file": sorted(set(parameters) - set(fits)),
            "not_loaded": sorted(set(tensors) - set(fits))}


def initialisation(model: Any) -> dict[str, dict[str, Any]]:
    """How the trainer's own adapter starts, per trainable tensor: shape, dtype, whether it is all
    zeros, whether it equals the module it was copied from (the modules saved whole), the largest
    value against the bound of PEFT's LoRA initialisation (kaiming-uniform, 1/sqrt(fan-in)), and a
    digest of the values."""
    import torch

    everything = dict(model.named_parameters())
    summary = {}
    for name, parameter in trainable(model).items():
        values = parameter.detach().float().cpu()
        original = everything.get(name.replace("modules_to_save.default", "original_module"))
        entry: dict[str, Any] = {"shape": list(values.shape), "dtype": str(parameter.dtype).removeprefix("torch."),
                                 "zero": bool(torch.count_nonzero(values) == 0),
                                 "max_abs": float(values.abs().max()) if values.numel() else 0.0,
                                 "digest": hashlib.sha1(values.numpy().tobytes()).hexdigest()[:16]}
        if original is not None:
            entry["equals_original"] = bool(torch.equal(values, original.detach().float().cpu()))
        if ".lora_A." in name and values.dim() == 2:
            entry["within_kaiming_bound"] = entry["max_abs"] <= (1 / values.shape[1] ** 0.5) * (1 + 1e-6)
        summary[name] = entry
    return summary


def tensor_record(tensor: Any) -> dict[str, Any]:
    """A tensor as JSON: dtype, shape and its values (float) in row-major order."""
    return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
            "values": tensor.detach().cpu().float().flatten().tolist()}


def digest(ids: Any) -> str:
    return hashlib.sha1(json.dumps(ids.tolist()).encode()).hexdigest()[:16]


def last_metric(trainer: Any, key: str) -> float | None:
    """The value TRL's DPO trainer last stored for `key` in training (TRL 0.11 keeps them in
    `_stored_metrics`, TRL 1.x in `_metrics`)."""
    for store in (getattr(trainer, "_stored_metrics", None), getattr(trainer, "_metrics", None)):
        values = store.get("train", {}).get(key) if store is not None else None
        if values:
            return float(values[-1])
    return None


class TrainingProbe:
    """Attach to a built trainer; the observation comes out after `train()`."""

    def __init__(self, input_key: str | None = None, rewards: bool = False):
        self.input_key = input_key  # a batch field to fingerprint per micro-batch (the data order), if any
        self.rewards = rewards
        self.steps: list[dict[str, Any]] = []
        self._micro: list[dict[str, Any]] = []
        self._grad_norm: float | None = None
        self._lr: float | None = None
        self.initial: dict[str, Any] = {}
        self.own_initial: dict[str, Any] = {}

    def attach(self, trainer: Any, initial_adapter: Path) -> Any:
        """Load the initial adapter into the trainer's model and record from now on. Training then
        runs single-threaded, on either side alike (the same order of reductions on the CPU)."""
        import torch
        from transformers import TrainerCallback

        torch.set_num_threads(1)
        self.own_initial = initialisation(trainer.model)  # before the shared adapter replaces it
        self.initial = load_trainable(trainer.model, initial_adapter)
        probe, compute_loss, clip = self, trainer.compute_loss, trainer.accelerator.clip_grad_norm_

        def recorded_loss(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            fingerprint = digest(inputs[probe.input_key]) if probe.input_key else None
            result = compute_loss(model, inputs, *args, **kwargs)
            if model.training:
                loss = result[0] if isinstance(result, tuple) else result
                entry: dict[str, Any] = {"loss": float(loss.detach()), "input": fingerprint}
                if probe.rewards:
                    entry.update({key.split("/")[1]: last_metric(trainer, key) for key in REWARD_KEYS})
                probe._micro.append(entry)
            return result

        def recorded_clip(*args: Any, **kwargs: Any) -> Any:
            norm = clip(*args, **kwargs)
            probe._grad_norm = float(norm)
            return norm

        class StepEnd(TrainerCallback):
            def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None,
                                      **kwargs: Any) -> None:
                probe._lr = float(optimizer.param_groups[0]["lr"])

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                probe.close_step(state.global_step)

        trainer.compute_loss = recorded_loss
        trainer.accelerator.clip_grad_norm_ = recorded_clip
        trainer.add_callback(StepEnd())
        return trainer

    def close_step(self, global_step: int) -> None:
        losses = [m["loss"] for m in self._micro]
        self.steps.append({"step": global_step, "loss": sum(losses) / len(losses) if losses else None,
                           "grad_norm": self._grad_norm, "lr": self._lr, "micro_batches": self._micro})
        self._micro, self._grad_norm, self._lr = [], None, None

    def observation(self, trainer: Any) -> dict[str, Any]:
        """The recorded steps, the effective settings and the trained weights."""
        return {"steps": self.steps, "settings": effective_settings(trainer), "initial_adapter": self.initial,
                "own_initial_adapter": self.own_initial,
                "weights": {name: tensor_record(p) for name, p in trainable(trainer.model).items()}}


def _plain(value: Any) -> Any:
    value = getattr(value, "value", value)  # enums (scheduler type, optimizer name)
    if isinstance(value, (set, frozenset, list, tuple)):
        return sorted(_plain(v) for v in value)
    return value


def lora_settings(model: Any) -> dict[str, Any]:
    """The adapter's LoRA configuration as PEFT holds it, and the dropout its layers apply."""
    from torch import nn

    config = model.peft_config["default"]
    dropout = set()
    for module in model.modules():
        layer = getattr(module, "lora_dropout", None)
        if isinstance(layer, nn.ModuleDict) and "default" in layer:
            dropout.add(float(layer["default"].p) if isinstance(layer["default"], nn.Dropout) else 0.0)
    return {"lora_r": config.r, "lora_alpha": config.lora_alpha, "lora_dropout": float(config.lora_dropout),
            "lora_dropout_in_layers": sorted(dropout), "lora_target_modules": _plain(config.target_modules),
            "modules_to_save": _plain(config.modules_to_save or []), "lora_bias": config.bias,
            "use_rslora": bool(config.use_rslora), "use_dora": bool(config.use_dora),
            "trainable_parameters": sum(p.numel() for p in trainable(model).values())}


def effective_settings(trainer: Any) -> dict[str, Any]:
    """What the trainer trained with (its arguments after their own post-processing, the steps it
    planned, the warmup those gave), named alike on both library generations."""
    args, state = trainer.args, trainer.state
    settings = {"learning_rate": args.learning_rate, "lr_scheduler_type": _plain(args.lr_scheduler_type),
                "warmup_steps": args.get_warmup_steps(state.max_steps), "max_steps": state.max_steps,
                "optimizer_steps": state.global_step, "num_train_epochs": float(args.num_train_epochs),
                "per_device_train_batch_size": args.per_device_train_batch_size,
                "gradient_accumulation_steps": args.gradient_accumulation_steps, "world_size": args.world_size,
                "optim": _plain(args.optim), "weight_decay": args.weight_decay, "adam_beta1": args.adam_beta1,
                "adam_beta2": args.adam_beta2, "adam_epsilon": args.adam_epsilon, "max_grad_norm": args.max_grad_norm,
                "seed": args.seed, "examples": len(trainer.train_dataset), **lora_settings(trainer.model)}
    if hasattr(trainer, "beta"):  # DPO
        loss_type = getattr(trainer, "loss_types", None) or trainer.loss_type  # TRL 1.x: a list; TRL 0.11: a name
        settings.update({"beta": float(trainer.beta), "loss_type": _plain([loss_type] if isinstance(loss_type, str)
                                                                            else loss_type),
                         "label_smoothing": float(trainer.label_smoothing)})
    return settings
