"""The settings the release's own PUMA scripts run with, recorded inside the release's process on
the libraries of its time: the script is run with the flags of its `PUMA/scripts/*.sh` and stopped
once what it would run with is known.

    stop = "args":     its argparse namespace (the data scripts: memory settings)
    stop = "trainer":  the namespace, the `LoraConfig` it built, and its trainer's arguments as the
                       built trainer holds them when the script calls `train()` (`finetune_llama.py`,
                       `dpo_llama.py`)
    stop = "generate": the namespace, the model's dtype, and the decoding its first `generate` call
                       ran with after the library merged its defaults (`test_llama.py`)

A CPU cannot build the fp16 or DeepSpeed trainer the scripts ask for: the arguments the hardware
decides (`fp16`, `bf16`, `deepspeed`) are recorded as requested and then cleared, as are where
metrics go (`report_to`) and the data loader's worker processes; nothing else is changed.

Loaded by path by the release worker (worker.py, after the release-era libraries are first on sys.path);
imports nothing from this project.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

HARDWARE = {"fp16": False, "bf16": False, "deepspeed": None}
CLEARED = {"report_to": "none", "dataloader_num_workers": 0}
STOPS = ("args", "trainer", "generate")


class Recorded(Exception):
    """Raised once the settings are known: the script stops there."""


def plain(value: Any) -> Any:
    """A JSON value of a setting (enums by value, sets sorted, other objects as text)."""
    value = getattr(value, "value", value)
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def install(stop: str, seen: dict[str, Any]) -> Callable[[], None]:
    """Hooks that fill `seen` and raise `Recorded` at `stop`; returns a function undoing them."""
    import argparse

    import peft
    import transformers

    undo: list[Callable[[], None]] = []

    def patch(owner: Any, name: str, replacement: Any) -> None:
        original = getattr(owner, name)
        setattr(owner, name, replacement(original))
        undo.append(lambda: setattr(owner, name, original))

    def parse_args(original: Any) -> Any:
        def parse(self: Any, *args: Any, **kwargs: Any) -> Any:
            namespace = original(self, *args, **kwargs)
            seen["args"] = plain(vars(namespace))
            if stop == "args":
                raise Recorded
            return namespace
        return parse

    def lora_init(original: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            seen.setdefault("lora", plain(self.to_dict()))
        return init

    def post_init(original: Any) -> Any:
        def run(self: Any) -> None:
            seen.setdefault("requested_hardware", {name: plain(getattr(self, name)) for name in HARDWARE})
            for name, value in {**HARDWARE, **CLEARED}.items():
                setattr(self, name, value)
            original(self)
        return run

    def trainer_train(original: Any) -> Any:
        def train(self: Any, *args: Any, **kwargs: Any) -> Any:
            seen["training_arguments"] = plain(self.args.to_dict())
            seen["trainer"] = plain({name: getattr(self, name) for name in
                                     ("beta", "loss_type", "label_smoothing", "temperature", "ref_model")
                                     if hasattr(self, name)})
            seen["trainer_class"] = type(self).__name__
            if stop == "trainer":
                raise Recorded
            return original(self, *args, **kwargs)
        return train

    def prepare_generation(original: Any) -> Any:
        def prepare(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            if "generation" not in seen:
                config = result[0]
                seen["generation"] = plain({key: value for key, value in vars(config).items()
                                            if not key.startswith("_")})
                seen["model_dtype"] = str(self.dtype).removeprefix("torch.")
            return result
        return prepare

    def generate(original: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            if stop == "generate":
                raise Recorded
            return out
        return run

    patch(argparse.ArgumentParser, "parse_args", parse_args)
    patch(peft.LoraConfig, "__init__", lora_init)
    patch(transformers.TrainingArguments, "__post_init__", post_init)
    patch(transformers.Trainer, "train", trainer_train)
    patch(transformers.GenerationMixin, "_prepare_generation_config", prepare_generation)
    patch(transformers.GenerationMixin, "generate", generate)
    return lambda: [step() for step in reversed(undo)]


def record(stop: str, run: Callable[[], None], out: Path) -> None:
    """Run the release's script (`run`) until `stop`; what it would run with goes to `out`."""
    if stop not in STOPS:
        raise SystemExit(f"release worker: settings stop {stop!r}: expected one of {', '.join(STOPS)}")
    seen: dict[str, Any] = {"stop": stop}
    undo = install(stop, seen)
    try:
        run()
    except Recorded:
        pass
    finally:
        undo()
    wanted = {"args": ("args",), "trainer": ("args", "training_arguments"), "generate": ("args", "generation")}[stop]
    missing = [key for key in wanted if key not in seen]
    if missing:
        raise SystemExit(f"release worker: the script ended before its settings were known (no {', '.join(missing)})")
    out.write_text(json.dumps(seen, indent=1), encoding="utf-8")
