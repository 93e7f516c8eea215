"""What the `puma` check's modules share (devtools/parity/puma.py, training.py, agent.py, the
self-test's probes): the check's setup, how the project's side is run (each step's own command
line under `--recipe release`, files only), how a release script's flags are read, and the inputs
several items build (the stand-in model, a random adapter, the release's ASIN order)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.parity import tokenizer as parity_tokenizer
from devtools.parity.compare import Tally
from devtools.parity.mirror import ParityError, ReleaseRunner, finish, launch, log_tail
from devtools.parity.selection import DEFAULT_SEED

LLAMA_ID = "meta-llama/Llama-2-7b-chat-hf"
LABEL_MODEL = "gpt-4o-mini"
SPLITS = ("train", "test")
STEPS = ("1", "settings", "2", "3", "4", "5", "6", "eval", "sft_train", "merge", "dpo_train", "agent")
# sft_train, merge, dpo_train: parity_training; agent: parity_agent

@dataclass
class PumaSetup:
    data_dir: Path
    work: Path
    repo_root: Path
    release_dir: Path | None = None  # the release checkout (its scripts' settings are read from it)
    protocol_file: str | None = None
    model_dir: Path | None = None  # a tiny Llama folder; default: made with PUMA.tiny_model
    limit: int | None = None  # tasks of each type per split (devtools/parity/selection.py); None: all
    seed: int = DEFAULT_SEED  # the draw of those tasks
    sft_batches: int = 4
    param_new_tokens: int = 48  # the greedy parameter outputs compared (both sides)
    timeout_s: float = 3600
    steps: tuple[str, ...] = STEPS  # step 1 always runs (or is reused from a kept work folder)
    results: dict[str, Tally] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # the report's record of what was run and covered


def project_command(setup: PumaSetup, module: str, *args: str) -> list[str]:
    command = [sys.executable, "-m", module, *args]
    if setup.protocol_file and module != "PUMA.tiny_model":
        command += ["--protocol_file", setup.protocol_file]
    return command


def run_project(setup: PumaSetup, label: str, command: list[str], env: dict[str, str] | None = None) -> None:
    log_path = setup.work / f"project_{label}.log"
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                   "PYTHONPATH": str(setup.repo_root), **(env or {})}
    process = launch(command, log_path, environment, cwd=setup.repo_root)
    status = finish(process, f"project {label}", log_path, setup.timeout_s)
    if status != 0:
        raise ParityError(f"project {label} failed (exit {status}); last lines of {log_path}:\n{log_tail(log_path)}")


def stand_in_model(setup: PumaSetup) -> Path:
    if setup.model_dir:
        return setup.model_dir
    model = setup.work / "tiny_model"
    if not (model / "config.json").exists() or not (model / "tokenizer.model").exists():
        shutil.rmtree(model, ignore_errors=True)  # a kept work folder's stand-in from before the SentencePiece one
        run_project(setup, "tiny_model", project_command(setup, "PUMA.tiny_model", "--data_dir", str(setup.data_dir),
                                                         "--out", str(model), "--tokenizer", "sentencepiece"))
    return model


def random_adapter(model_dir: Path, out: Path) -> Path:
    """The release's LoRA (PUMA.lora's defaults) with random B matrices, so the adapter changes
    the outputs and composing it (merged or not) is exercised; saved with the stand-in's
    tokenizer files (the release loads its `LlamaTokenizer` from the adapter folder)."""
    import torch
    from peft import get_peft_model

    from PUMA.lora import LoRATrainingConfig, lora_config
    from PUMA.modeling import load_causal_lm

    if (out / "adapter_config.json").exists() and (out / "tokenizer.model").exists():
        return out
    torch.manual_seed(0)
    model, _ = load_causal_lm(str(model_dir), dtype=torch.float32)
    config = lora_config(LoRATrainingConfig())
    config.init_lora_weights = False
    peft_model = get_peft_model(model, config)
    peft_model.save_pretrained(out)
    parity_tokenizer.copy_tokenizer_files(model_dir, out)
    return out


# --- comparisons -------------------------------------------------------------------------------------------------
def release_call(setup: PumaSetup, sh: str, replace: dict[str, str], drop: tuple[str, ...] = ()) -> list[str]:
    """The flags `sh` (one of the release's PUMA/scripts) passes its script, paths replaced with
    this check's (devtools/parity/release_scripts.py reads them from the release)."""
    from devtools.parity.release_scripts import release_scripts

    return release_scripts(setup.release_dir)[sh].argv(replace, drop)


def project_settings(cls: type, step: str, *argv: str) -> Any:
    """A step's settings as its own command line makes them under `--recipe release` from `argv`
    (files and folders only: every other value is the recipe's or the step's default)."""
    from PUMA.cli import parse_step

    return parse_step(cls, ["--recipe", "release", *argv], f"python -m PUMA.{step}", None, step)


def release_set_orders(setup: PumaSetup, runner: ReleaseRunner, texts: list[str]) -> dict[str, list[str]]:
    """What the release's test.py makes of each recommend candidate (its `list(set(...))`), worked
    out by the release worker under the release's hash seed."""
    texts_file, out, log_path = (setup.work / "set_order_texts.json", setup.work / "set_orders.json",
                                 setup.work / "release_set_orders.log")
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    runner.finish(runner.start("set_orders", log_path, texts=texts_file, out=out),
                  "release worker set_orders", log_path)
    return json.loads(out.read_text(encoding="utf-8"))


HARDWARE_FLAGS = ("--float16", "--bf16", "--deepseed_config")  # the training scripts' GPU flags: a CPU runs fp32
