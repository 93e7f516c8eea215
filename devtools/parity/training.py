"""The training items of the `puma` check: SFT training, the merge and DPO training, each run by
the release's own script on the libraries of its time and by this project's `--recipe release`
step on its own, from the same stand-in model, the same initial adapter and the same data.

* SFT training: `PUMA/finetune_llama.py` (its `finetune_function_param.sh`'s flags, read from the
  release, with the release recipe's reading `--train_on function_param`) and `puma sft --recipe
  release` as its command line makes its settings, each on its own step-1 files (which step 1
  shows identical);
* merge: `PUMA/merge_save.py` and `PUMA.merge` on the release's last SFT checkpoint;
* DPO training: `PUMA/dpo_llama.py` (`dpo_llama.sh`'s flags) and `puma dpo --recipe release`
  on the release's step-5 pairs, both starting from the release's merged model.

Only the gradient accumulation is set on both sides (the scripts' 16 and the project's global
batch 64 exceed the tiny data; the settings items compare the real ones): the smallest count from
4 up that the number of examples does not divide, so every epoch ends inside an accumulation. Both
train on the CPU in fp32, single threaded, each from the same adapter weights
(`make_initial_adapter`: random LoRA matrices, B included, so the adapter changes the outputs from
the first step), put into the PEFT model after the trainer is built (devtools/parity/release/training_probe.py);
how each trainer's own adapter started is compared first (`compare_initialisation`). Compared: the settings each trainer
used, every optimizer step's loss, gradient norm and learning rate (and the micro-batches in
it; for DPO each one's rewards), the trained weights; for the merge every merged tensor and
what the saved tokenizers make of every step-1 prompt. Tolerances: docs/fidelity.md.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.settings import parse, setting
from devtools.parity.compare import Tally
from devtools.parity.puma_context import HARDWARE_FLAGS, LLAMA_ID, PumaSetup, release_call, run_project
from devtools.parity.mirror import ParityError, ReleaseRunner

ITEMS = {"sft": "SFT training", "dpo": "DPO training"}
# The release's LoRA (finetune_llama.py, dpo_llama.py): the layout of the initial adapter.
RELEASE_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "bias": "none",
                "target_modules": ["q_proj", "v_proj", "k_proj", "o_proj", "gate_proj", "down_proj", "up_proj"],
                "modules_to_save": ["embed_tokens", "lm_head", "input_layernorm", "post_attention_layernorm", "norm"]}
INITIAL_SCALE = 0.05  # std of the initial LoRA matrices
# What the training items change in the release's scripts' flags (PUMA/scripts/finetune_function_param.sh,
# dpo_llama.sh, read from the release): the GPU flags (the CPU trains in fp32), the gradient
# accumulation (`accumulation_for`, on both sides), and for SFT the data it trains on: the script says
# `--train_on param` and cannot run as shipped; the release recipe's reading, function_param
# (PUMA/configs/release.yaml `readings`), which the settings item reports.
TRAIN_ON_READING = "function_param"
LOSS_RTOL = 1e-4
GRAD_NORM_RTOL = 1e-4
LR_RTOL = 1e-9
# a reward is beta x a difference of two log-probabilities summed over up to 1,024 tokens, which TRL 0.11's
# and TRL 1.x's code round differently by up to about 1e-4 in fp32 (measured 1.2e-5 at beta 0.1)
REWARD_RTOL, REWARD_ATOL = 1e-4, 5e-5
WEIGHT_ATOL = 1e-5
MERGE_ATOL = 1e-6


def accumulation_for(examples: int) -> int:
    """The smallest gradient accumulation from 4 up that leaves a partial accumulation at every
    epoch's end (`examples` not a multiple of it) and still makes a full step in an epoch."""
    for steps in range(4, examples):
        if examples % steps:
            return steps
    for steps in (3, 2):
        if steps < examples and examples % steps:
            return steps
    raise ParityError(f"{examples} training example(s): too few for an epoch that ends inside a gradient accumulation "
                      "(run the puma check with a larger --limit)")


# --- project side ------------------------------------------------------------------------------------------------
def make_initial_adapter(base_model: Path, out: Path, seed: int = 0) -> Path:
    """The trainable tensors of the release's LoRA layout on `base_model`: random LoRA matrices
    (normal, std INITIAL_SCALE), the base's own weights for the modules saved whole."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from devtools.parity.release.training_probe import save_trainable, trainable

    model = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **RELEASE_LORA))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in trainable(peft_model).items():
            if ".lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * INITIAL_SCALE)
    out.parent.mkdir(parents=True, exist_ok=True)
    return save_trainable(peft_model, out)


def _train_probed(module: Any, builder: str, train: Callable[[Any], Path], config: Any, initial_adapter: Path,
                  probe: Any) -> dict[str, Any]:
    """Run the step's own entry point (`train`) with the probe on the trainer its `builder` builds."""
    original, built = getattr(module, builder), []

    def probed_build(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        trainer, tokenizer = original(*args, **kwargs)
        built.append(probe.attach(trainer, initial_adapter))
        return trainer, tokenizer

    setattr(module, builder, probed_build)
    try:
        out = train(config)
    finally:
        setattr(module, builder, original)
    return {**probe.observation(built[0]),
            "record": json.loads((Path(out) / "puma_run.json").read_text(encoding="utf-8"))}


def project_sft(model: Path | str, function_data: Path | str, param_data: Path | str, output_dir: Path | str,
                initial_adapter: Path | str, gradient_accumulation_steps: int) -> dict[str, Any]:
    """`puma sft --recipe release` as its command line makes its settings (the files, and the one
    shared accumulation), trained from `initial_adapter`: every optimizer step, the settings, the
    weights."""
    from PUMA import sft

    from devtools.parity.puma_context import project_settings
    from devtools.parity.release.training_probe import TrainingProbe

    config = project_settings(sft.SFTConfig, "sft", "--model_path", str(model), "--function_data", str(function_data),
                              "--param_data", str(param_data), "--out", str(output_dir),
                              "--gradient_accumulation_steps", str(gradient_accumulation_steps))
    return _train_probed(sft, "build_sft_trainer", sft.train_sft, config, Path(initial_adapter),
                         TrainingProbe(input_key="input_ids"))


def project_dpo(model: Path | str, pairs: Path | str, output_dir: Path | str, initial_adapter: Path | str,
                gradient_accumulation_steps: int) -> dict[str, Any]:
    """`puma dpo --recipe release` as its command line makes its settings on `pairs`, trained from
    `initial_adapter`."""
    from PUMA import dpo

    from devtools.parity.puma_context import project_settings
    from devtools.parity.release.training_probe import TrainingProbe

    config = project_settings(dpo.DPOStepConfig, "dpo", "--model_path", str(model), "--data_file", str(pairs),
                              "--out", str(output_dir), "--gradient_accumulation_steps",
                              str(gradient_accumulation_steps))
    return _train_probed(dpo, "build_dpo_trainer", dpo.train_dpo, config, Path(initial_adapter),
                         TrainingProbe(rewards=True))


def tiny_training_data(data_dir: Path, out: Path, count: int = 3) -> tuple[Path, Path]:
    """SFT examples (a function file; an empty parameter file) and DPO pairs from the first
    `count` train tasks of a data directory: instruction prompts, the target's title as the
    label and the chosen response (count 3 with accumulation 2: each epoch ends inside one)."""
    from PersonalWAB.data.loader import load_benchmark_data

    tasks = load_benchmark_data(data_dir).split("train")[:count]
    out.mkdir(parents=True, exist_ok=True)
    examples = [{"instruction": t["task"], "type": t["type"], "prompt": f"Instruction: {t['task']}\nAnswer: ",
                 "label": t["target"]["product_info"]["title"]} for t in tasks]
    (out / "function_train.json").write_text(json.dumps(examples), encoding="utf-8")
    (out / "param_train.json").write_text("[]", encoding="utf-8")
    pairs = [{"instruction": e["instruction"], "prompt": e["prompt"], "chosen": e["label"], "rejected": "stop"}
             for e in examples]
    (out / "pairs.json").write_text(json.dumps(pairs), encoding="utf-8")
    return out / "function_train.json", out / "pairs.json"


def selftest_sft_observation(inputs: Path) -> dict[str, Any]:
    """`project_sft` on the self-test's inputs (devtools/parity/selftest.py: `data/`, `model/`):
    three examples, accumulation 2, from a fixed initial adapter."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="selftest_sft_") as scratch:
        function_data, _ = tiny_training_data(inputs / "data", Path(scratch))
        initial = make_initial_adapter(inputs / "model", Path(scratch) / "initial.safetensors")
        return project_sft(inputs / "model", function_data, Path(scratch) / "param_train.json", Path(scratch) / "out",
                           initial, 2)


def selftest_dpo_observation(inputs: Path) -> dict[str, Any]:
    """`project_dpo` on the self-test's inputs: three pairs, accumulation 2, from a fixed
    initial adapter on the stand-in model."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="selftest_dpo_") as scratch:
        _, pairs = tiny_training_data(inputs / "data", Path(scratch))
        initial = make_initial_adapter(inputs / "model", Path(scratch) / "initial.safetensors", seed=1)
        return project_dpo(inputs / "model", pairs, Path(scratch) / "out", initial, 2)


def merged_model(folder: Path | str, texts: list[str]) -> dict[str, Any]:
    """A merged model folder as the next step reads it: every weight tensor (dtype, shape,
    values) and its tokenizer's ids for `texts`, with its special tokens and vocabulary size."""
    from safetensors.torch import load_file

    from devtools.parity.release.training_probe import tensor_record
    from PUMA.modeling import load_tokenizer

    folder = Path(folder)
    tensors: dict[str, Any] = {}
    for part in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(part)))
    if not tensors:
        raise ParityError(f"{folder}: no merged weights (*.safetensors)")
    tokenizer = load_tokenizer(folder)
    special = ("bos_token_id", "eos_token_id", "unk_token_id", "pad_token_id")
    return {"tensors": {name: tensor_record(tensor) for name, tensor in sorted(tensors.items())},
            "tokenizer": {"vocab_size": len(tokenizer), "special": {name: getattr(tokenizer, name) for name in special},
                          "ids": [tokenizer(text)["input_ids"] for text in texts]}}


# --- comparators -------------------------------------------------------------------------------------------------
def _close(a: Any, b: Any, rtol: float, atol: float = 0.0) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


def compare_effective_settings(tally: Tally, release: dict[str, Any], project: dict[str, Any]) -> None:
    """Every setting either trainer reported, by name."""
    for key in sorted(set(release) | set(project)):
        same = release.get(key, "<absent>") == project.get(key, "<absent>")
        tally.add("settings", same, None if same else {"setting": key, "release": release.get(key, "<absent>"),
                                                       "project": project.get(key, "<absent>")})


def _relative(a: float | None, b: float | None) -> float:
    if a is None or b is None or a == b:
        return 0.0 if a == b else math.inf
    return abs(a - b) / max(abs(a), abs(b))


def compare_steps(tally: Tally, release: list[dict[str, Any]], project: list[dict[str, Any]]) -> dict[str, float]:
    """Per optimizer step: its micro-batches (count, data, each loss; DPO: rewards), the step's
    loss, gradient norm before clipping and learning rate. Returns the largest relative
    difference of each kind of value."""
    largest: dict[str, float] = {}
    if len(release) != len(project):
        tally.add("steps", False, {"optimizer_steps": {"release": len(release), "project": len(project)}})
    for index, (a, b) in enumerate(zip(release, project)):
        where = {"step": index + 1}
        micro_a, micro_b = a["micro_batches"], b["micro_batches"]
        same = len(micro_a) == len(micro_b) and [m["input"] for m in micro_a] == [m["input"] for m in micro_b]
        tally.add("micro-batches", same, None if same else {**where, "field": "micro-batches (count, data)",
                                                            "release": [m["input"] for m in micro_a],
                                                            "project": [m["input"] for m in micro_b]})
        checks = [("loss", a["loss"], b["loss"], LOSS_RTOL, 0.0), ("grad_norm", a["grad_norm"], b["grad_norm"],
                                                                  GRAD_NORM_RTOL, 0.0),
                  ("lr", a["lr"], b["lr"], LR_RTOL, 0.0)]
        for number, (x, y) in enumerate(zip(micro_a, micro_b)):
            checks.append((f"micro-batch {number + 1} loss", x["loss"], y["loss"], LOSS_RTOL, 0.0))
            checks += [(f"micro-batch {number + 1} rewards/{key}", x[key], y[key], REWARD_RTOL, REWARD_ATOL)
                       for key in ("chosen", "rejected") if key in x or key in y]
        for field, x, y, rtol, atol in checks:
            kind = field.rsplit(" ", 1)[-1] if field.startswith("micro") else field
            same = _close(x, y, rtol, atol)
            tally.add(kind, same, None if same else {**where, "field": field, "release": x, "project": y})
            largest[kind] = max(largest.get(kind, 0.0), _relative(x, y))
    return largest


def compare_weights(tally: Tally, release: dict[str, Any], project: dict[str, Any], atol: float,
                    kind: str = "weights") -> float:
    """Each tensor (`tensor_record`) of the release's against the project's of the same name:
    dtype and shape equal, values within `atol`; returns the largest difference met."""
    largest = 0.0
    for name in sorted(set(release) | set(project)):
        a, b = release.get(name), project.get(name)
        if a is None or b is None:
            tally.add(kind, False, {"tensor": name, "only_in": "release" if b is None else "project"})
            continue
        if (a["dtype"], a["shape"]) != (b["dtype"], b["shape"]):
            tally.add(kind, False, {"tensor": name, "release": [a["dtype"], a["shape"]],
                                    "project": [b["dtype"], b["shape"]]})
            continue
        difference = max((abs(x - y) for x, y in zip(a["values"], b["values"])), default=0.0)
        largest = max(largest, difference)
        tally.add(kind, difference <= atol, None if difference <= atol else {"tensor": name,
                                                                             "max_abs_difference": difference})
    return largest


SEEDED_LORA = ("LoRA A matrices drawn differently: the project draws them from --seed (a listed deviation), the "
               "release from torch's default generator after its model loads")


def compare_initialisation(tally: Tally, release: dict[str, Any], project: dict[str, Any]) -> None:
    """Each side's own adapter as its trainer built it (before the shared one replaced it): the
    same tensors, shapes, dtypes, zero B matrices, saved modules equal to the base's, A matrices
    within PEFT's bound; the A values themselves differ by the listed seeding deviation."""
    for name in sorted(set(release) | set(project)):
        a, b = release.get(name), project.get(name)
        if a is None or b is None:
            tally.add("own initialisation", False, {"tensor": name, "only_in": "release" if b is None else "project"})
            continue
        scheme = ("shape", "dtype", "zero", "equals_original", "within_kaiming_bound")
        differs = {key: [a.get(key), b.get(key)] for key in scheme if a.get(key) != b.get(key)}
        if ".lora_A." in name and a.get("within_kaiming_bound") is False:
            differs["within_kaiming_bound (release)"] = False
        tally.add("own initialisation", not differs, None if not differs else {"tensor": name, "fields": differs})
        if not differs and a["digest"] != b["digest"]:
            tally.note(SEEDED_LORA)


def compare_training(kind: str, release: dict[str, Any], project: dict[str, Any]) -> dict[str, Tally]:
    """The SFT (`kind` sft) or DPO (dpo) training item: each side's own initial adapter, the
    initial adapter each side loaded, the effective settings, every optimizer step, the trained
    weights."""
    tally = Tally()
    compare_initialisation(tally, release.get("own_initial_adapter", {}), project.get("own_initial_adapter", {}))
    same = release["initial_adapter"] == project["initial_adapter"] and not release["initial_adapter"]["not_in_file"]
    tally.add("initial adapter", same, None if same else {"release": release["initial_adapter"],
                                                          "project": project["initial_adapter"]})
    compare_effective_settings(tally, release["settings"], project["settings"])
    tally.facts["optimizer steps (release, project)"] = [len(release["steps"]), len(project["steps"])]
    tally.facts["largest relative difference"] = {
        key: float(f"{value:.3g}") for key, value in compare_steps(tally, release["steps"], project["steps"]).items()}
    largest = compare_weights(tally, release["weights"], project["weights"], WEIGHT_ATOL)
    tally.facts["largest trained-weight difference (abs)"] = float(f"{largest:.3g}")
    return {ITEMS[kind]: tally}


def compare_merge(release: dict[str, Any], project: dict[str, Any]) -> Tally:
    """Every merged tensor, and the saved tokenizers' ids for the same texts."""
    tally = Tally()
    largest = compare_weights(tally, release["tensors"], project["tensors"], MERGE_ATOL, kind="tensors")
    tally.facts["largest merged-weight difference (abs)"] = float(f"{largest:.3g}")
    theirs, ours = release["tokenizer"], project["tokenizer"]
    for key in ("vocab_size", "special"):
        tally.add("tokenizer", theirs[key] == ours[key], None if theirs[key] == ours[key] else {
            "field": key, "release": theirs[key], "project": ours[key]})
    if len(theirs["ids"]) != len(ours["ids"]):
        tally.add("tokenizer", False, {"texts": {"release": len(theirs["ids"]), "project": len(ours["ids"])}})
    for index, (a, b) in enumerate(zip(theirs["ids"], ours["ids"])):
        tally.add("token ids", a == b, None if a == b else {"text": index, "release": a[:20], "project": b[:20]})
    return tally


# --- orchestration -----------------------------------------------------------------------------------------------
def _project_observation(setup: PumaSetup, label: str, command: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One project observation (`main` below) in a process of its own, as the project's steps run."""
    spec_file, out = setup.work / f"project_{label}_spec.json", setup.work / f"project_{label}.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    run_project(setup, label, [sys.executable, "-m", "devtools.parity.training", command, "--spec", str(spec_file),
                               "--out", str(out)])
    return json.loads(out.read_text(encoding="utf-8"))


def _release_training(setup: PumaSetup, runner: ReleaseRunner, command: str, model: Path, initial: Path,
                      cwd: Path, argv: list[str]) -> tuple[Any, Path, Path]:
    out, log_path = setup.work / f"release_{command}.json", setup.work / f"release_{command}.log"
    process = runner.start(command, log_path, hub={LLAMA_ID: str(model)}, initial_adapter=initial, out=out, cwd=cwd,
                           release_argv=argv)
    return process, out, log_path


def sft_training(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, model: Path,
                 log: Callable[[str], None]) -> Path:
    """SFT training on both sides, each on its own step-1 files; returns the release's last
    checkpoint (the adapter merged next)."""
    param, function = release_dir / "param_data.json", release_dir / "function_data.json"
    examples = sum(len(json.loads(path.read_text(encoding="utf-8"))["train"]) for path in (param, function))
    accumulation = accumulation_for(examples)
    log(f"puma SFT training: finetune_llama.py and PUMA.sft on {examples} examples, accumulation {accumulation} ...")
    initial = make_initial_adapter(model, setup.work / "initial_sft_adapter.safetensors")
    out_dir = setup.work / "release_sft_out"
    shutil.rmtree(out_dir, ignore_errors=True)  # the script adds a folder per run: keep only this run's
    process, out, log_path = _release_training(setup, runner, "sft_train", model, initial, release_dir, release_call(
        setup, "finetune_function_param.sh", {
            "--data_path": str(param), "--function_data_path": str(function), "--output_dir": str(out_dir),
            "--model_name": str(model), "--gradient_accumulation_steps": str(accumulation),
            "--train_on": TRAIN_ON_READING}, drop=HARDWARE_FLAGS))
    ours = _project_observation(setup, "sft_train", "sft", {
        "model": str(model), "function_data": str(project_dir / "function_train.json"),
        "param_data": str(project_dir / "param_train.json"), "output_dir": str(setup.work / "project_sft_out"),
        "initial_adapter": str(initial), "gradient_accumulation_steps": accumulation})
    runner.finish(process, "release finetune_llama.py (trained)", log_path)
    setup.results.update(compare_training("sft", json.loads(out.read_text(encoding="utf-8")), ours))
    checkpoints = sorted(out_dir.rglob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    if not checkpoints:
        raise ParityError(f"the release's SFT saved no checkpoint under {out_dir}; see {log_path}")
    return checkpoints[-1]


def merge(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, model: Path, adapter: Path,
          log: Callable[[str], None]) -> Path:
    """merge_save.py and PUMA.merge on the same adapter; returns the release's merged model."""
    log(f"puma merge: merge_save.py and PUMA.merge on {adapter.name} ...")
    theirs, ours = setup.work / "release_merged", setup.work / "project_merged"
    log_path = setup.work / "release_merge.log"
    process = runner.start("script", log_path, script="PUMA/merge_save.py", hub={LLAMA_ID: str(model)},
                           cwd=release_dir,
                           release_argv=["--model_path", str(adapter), "--base_model", str(model), "--save_path",
                                         str(theirs), "--device", "cpu"])
    run_project(setup, "merge", [sys.executable, "-m", "PUMA.merge", "--adapter_path", str(adapter), "--out",
                                 str(ours), "--base_model_path", str(model)])
    runner.finish(process, "release merge_save.py", log_path)
    texts = [e["prompt"] for name in ("function_data.json", "param_data.json")
             for e in json.loads((release_dir / name).read_text(encoding="utf-8"))["train"]]
    setup.results["merge"] = compare_merge(merged_model(theirs, texts), merged_model(ours, texts))
    return theirs


def dpo_training(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, merged: Path,
                 log: Callable[[str], None]) -> None:
    """DPO training on both sides from the release's merged model, on the same pairs: the
    release's step-5 pairs (the project's own differ where the declared ASIN-order deviation
    changes a recommend score; step 5 compares them)."""
    pairs = json.loads((release_dir / "dpo_training_data.json").read_text(encoding="utf-8"))["train"]
    accumulation = accumulation_for(len(pairs))
    log(f"puma DPO training: dpo_llama.py and PUMA.dpo on {len(pairs)} pairs, accumulation {accumulation} ...")
    initial = make_initial_adapter(merged, setup.work / "initial_dpo_adapter.safetensors", seed=1)
    theirs_data, ours_data = release_dir / "dpo_train_input.json", setup.work / "dpo_train_pairs.json"
    # its eval split must exist
    theirs_data.write_text(json.dumps({"train": pairs, "test": pairs[:2]}), encoding="utf-8")
    ours_data.write_text(json.dumps(pairs), encoding="utf-8")
    process, out, log_path = _release_training(setup, runner, "dpo_train", merged, initial, release_dir, release_call(
        setup, "dpo_llama.sh", {
            "--data_path": str(theirs_data), "--output_dir": str(setup.work / "release_dpo_out"),
            "--model_name": str(merged), "--gradient_accumulation_steps": str(accumulation)}, drop=HARDWARE_FLAGS))
    ours = _project_observation(setup, "dpo_train", "dpo", {
        "model": str(merged), "pairs": str(ours_data), "output_dir": str(setup.work / "project_dpo_out"),
        "initial_adapter": str(initial), "gradient_accumulation_steps": accumulation})
    runner.finish(process, "release dpo_llama.py (trained)", log_path)
    setup.results.update(compare_training("dpo", json.loads(out.read_text(encoding="utf-8")), ours))


def training_items(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, model: Path,
                   log: Callable[[str], None]) -> None:
    """SFT training, then the merge of its adapter, then DPO from the merged model: each asked
    step runs the ones before it."""
    adapter = sft_training(setup, runner, release_dir, project_dir, model, log)
    if {"merge", "dpo_train"} & set(setup.steps):
        merged = merge(setup, runner, release_dir, model, adapter, log)
        if "dpo_train" in setup.steps:
            dpo_training(setup, runner, release_dir, merged, log)


@dataclass
class ObservationSettings:
    """One project-side training observation of the puma check, in a process of its own."""

    command: str = setting(str, "which training is observed: sft or dpo", positional=True, choices=["sft", "dpo"])
    spec: str = setting(str, "JSON file: the keyword arguments of the observation", required=True)
    out: str = setting(str, "the observation (JSON)", required=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(ObservationSettings, argv, prog="python -m devtools.parity.training",
                 description=ObservationSettings.__doc__)
    observe = project_sft if args.command == "sft" else project_dpo
    observation = observe(**json.loads(Path(args.spec).read_text(encoding="utf-8")))
    Path(args.out).write_text(json.dumps(observation), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
