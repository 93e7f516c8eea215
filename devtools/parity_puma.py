"""The `puma` check of the parity harness: the release's own PUMA code and this project's
`--recipe release`, step by step, on the same data, the same stand-in model and tokenizer
(a tiny random Llama trained by `PUMA.tiny_model`, which the release loads wherever it asks
for `meta-llama/Llama-2-7b-chat-hf`) and the same scripted label server.

Steps compared (docs/fidelity.md has the table):
1. SFT data: every function and parameter example of both splits (instruction, prompt,
   label, uncut memory), and the label-writing requests;
2. the first SFT batches (input ids, attention mask, labels) in the Trainer's order, and the
   loss of each from the same weights;
3. generation with the same adapter (random LoRA, not merged in the release): function
   predictions (prompt ids, greedy outputs), parameter outputs on the test split from the
   release's rebuilt prompts, and the sampling settings of the DPO candidates;
4. every candidate's score (the same candidates file on both sides);
5. the DPO pairs (the release's pairs from its scores, the project's from its own);
6. the DPO rows: the release's `dpo_llama.py` run up to training with the TRL of its time
   (0.11, with transformers 4.45, from a folder of its own: `--puma_trl_path`) and
   `PUMA.dpo.encode_pairs` on the same pairs;
the evaluation: the PUMA agent's live prompt and result for every task.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from devtools.parity_compare import Tally, first_difference, score_verdict
from devtools.release_mirror import ParityError, ReleaseRunner, finish, launch, log_tail
from devtools.scripted_server import ScriptedLLMServer, ScriptedReply

LLAMA_ID = "meta-llama/Llama-2-7b-chat-hf"
LABEL_MODEL = "gpt-4o-mini"
SPLITS = ("train", "test")
STEPS = ("1", "2", "3", "4", "5", "6", "eval")
LOSS_TOLERANCE = 1e-5
SCORE_TOLERANCE = {"search": 1e-9, "recommend": 1e-9, "review": 1e-6}


@dataclass
class PumaSetup:
    data_dir: Path
    work: Path
    repo_root: Path
    protocol_file: str | None = None
    model_dir: Path | None = None  # a tiny Llama folder; default: made with PUMA.tiny_model
    limit: int | None = None  # tasks per split (the release's scripts get a task file of these)
    mem_token_length: int = 768
    memory_length: int = 100
    sft_max_length: int = 1280
    sft_batches: int = 4
    param_new_tokens: int = 48
    timeout_s: float = 3600
    trl_path: Path | None = None  # TRL 0.11 and the transformers of its time, for the release's DPO rows
    steps: tuple[str, ...] = STEPS  # step 1 always runs (or is reused from a kept work folder)
    results: dict[str, Tally] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def label_reply(body: dict[str, Any]) -> ScriptedReply:
    """A search label written from the instruction, in the three shapes LLMs answer in: quoted,
    with stray whitespace, plain (so any cleaning of the reply shows up as a difference)."""
    prompt = body["messages"][0]["content"]
    instruction = next((line.split(":", 1)[1].strip() for line in prompt.splitlines()
                        if line.startswith("Instruction:")), prompt[:60])
    words = " ".join(instruction.split()[:8])
    shape = len(instruction) % 3
    return ScriptedReply(content=f'"{words}"' if shape == 0 else f"  {words}\n" if shape == 1 else words)


# --- inputs both sides read ------------------------------------------------------------------------------------
def merged_parts(data_dir: Path, pattern: str, out: Path) -> Path:
    """The release's PUMA scripts read one history file and one products file: the parts merged."""
    merged: dict[str, Any] = {}
    for part in sorted(data_dir.glob(pattern)):
        merged.update(json.loads(part.read_text(encoding="utf-8")))
    out.write_text(json.dumps(merged), encoding="utf-8")
    return out


def limited_tasks(data_dir: Path, limit: int | None, out: Path, splits: tuple[str, ...] = SPLITS) -> Path:
    tasks = json.loads((data_dir / "user_instructions.json").read_text(encoding="utf-8"))
    chosen = {split: (tasks.get(split, [])[:limit] if limit else tasks.get(split, [])) if split in splits else []
              for split in SPLITS}
    out.write_text(json.dumps(chosen), encoding="utf-8")
    return out


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
    if not (model / "config.json").exists():
        run_project(setup, "tiny_model", project_command(setup, "PUMA.tiny_model", "--data_dir", str(setup.data_dir),
                                                         "--out", str(model)))
    return model


def random_adapter(model_dir: Path, out: Path) -> Path:
    """The release's LoRA (PUMA.lora's defaults) with random B matrices, so the adapter changes
    the outputs and composing it (merged or not) is exercised; saved with the tokenizer."""
    import torch
    from peft import get_peft_model

    from PUMA.lora import LoRATrainingConfig, lora_config
    from PUMA.modeling import load_causal_lm

    if (out / "adapter_config.json").exists():
        return out
    torch.manual_seed(0)
    model, tokenizer = load_causal_lm(str(model_dir), dtype=torch.float32)
    config = lora_config(LoRATrainingConfig())
    config.init_lora_weights = False
    peft_model = get_peft_model(model, config)
    peft_model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


# --- comparisons -------------------------------------------------------------------------------------------------
def compare_fields(tally: Tally, task_type: str, index: int, release: dict[str, Any], project: dict[str, Any],
                   pairs: dict[str, str]) -> None:
    """Each (release field -> project field) compared as text; one tally entry per example."""
    for theirs, ours in pairs.items():
        a, b = release.get(theirs), project.get(ours)
        if a != b:
            tally.add(task_type, False, {"index": index, "field": ours,
                                         "diff": first_difference(json.dumps(a), json.dumps(b))})
            return
    tally.add(task_type, True)


def compare_examples(release: list[dict[str, Any]], project: list[dict[str, Any]],
                     types: list[str], pairs: dict[str, str]) -> Tally:
    tally = Tally()
    if len(release) != len(project):
        tally.add("count", False, {"release": len(release), "project": len(project)})
    for index, (theirs, ours) in enumerate(zip(release, project)):
        compare_fields(tally, types[index] if index < len(types) else "?", index, theirs, ours, pairs)
    return tally


def compare_requests(release: list[dict[str, Any]], project: list[dict[str, Any]]) -> Tally:
    """The label-writing requests, in order: messages, model and temperature."""
    tally = Tally()
    if len(release) != len(project):
        tally.add("count", False, {"release": len(release), "project": len(project)})
    for index, (theirs, ours) in enumerate(zip(release, project)):
        a = {"messages": theirs.get("messages"), "model": theirs.get("model"), "temperature": theirs.get("temperature")}
        b = {"messages": ours.get("messages"), "model": str(ours.get("model")).removeprefix("openai/"),
             "temperature": ours.get("temperature")}
        same = a == b
        tally.add("search", same, None if same else {"index": index, "diff": first_difference(
            json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True))})
    return tally


# --- the steps ---------------------------------------------------------------------------------------------------
def step1(setup: PumaSetup, runner: ReleaseRunner, tasks_file: Path, history_file: Path, model: Path,
          log: Callable[[str], None]) -> tuple[Path, Path]:
    """Both sides write their SFT data; the release's files and the project's folder."""
    release_dir, project_dir = setup.work / "release", setup.work / "project"
    release_dir.mkdir(exist_ok=True)
    project_dir.mkdir(exist_ok=True)
    hub = ["--hub", f"{LLAMA_ID}={model}"]
    done = [release_dir / "function_data.json", release_dir / "param_data.json", release_dir / "label_requests.json",
            project_dir / "label_requests.json", *(project_dir / f"{kind}_{split}.json" for kind in ("function", "param")
                                                    for split in SPLITS)]
    if all(path.exists() for path in done):  # a kept --work_dir: step 1 (the slow one) is not run again
        log("puma step 1: reusing the SFT data in the work folder")
    else:
        _step1_run(setup, runner, tasks_file, history_file, model, hub, release_dir, project_dir, log)
    release_requests = json.loads((release_dir / "label_requests.json").read_text(encoding="utf-8"))
    project_requests = json.loads((project_dir / "label_requests.json").read_text(encoding="utf-8"))
    release_function = json.loads((release_dir / "function_data.json").read_text(encoding="utf-8"))
    release_param = json.loads((release_dir / "param_data.json").read_text(encoding="utf-8"))
    for split in SPLITS:
        ours_function = json.loads((project_dir / f"function_{split}.json").read_text(encoding="utf-8"))
        ours_param = json.loads((project_dir / f"param_{split}.json").read_text(encoding="utf-8"))
        types = [e["type"] for e in ours_param]
        setup.results[f"step1 function data [{split}]"] = compare_examples(
            release_function[split], ours_function, [e["type"] for e in ours_function],
            {"instruction": "instruction", "prompt": "prompt", "target": "label"})
        setup.results[f"step1 param data [{split}]"] = compare_examples(
            release_param[split], ours_param, types,
            {"instruction": "instruction", "prompt": "prompt", "target": "label", "mem": "memory"})
    setup.results["step1 label requests"] = compare_requests(release_requests, project_requests)
    return release_dir, project_dir


def _step1_run(setup: PumaSetup, runner: ReleaseRunner, tasks_file: Path, history_file: Path, model: Path,
               hub: list[str], release_dir: Path, project_dir: Path, log: Callable[[str], None]) -> None:
    with ScriptedLLMServer(label_reply, max_lifetime_s=setup.timeout_s) as theirs, \
            ScriptedLLMServer(label_reply, max_lifetime_s=setup.timeout_s) as ours:
        log("puma step 1: the release's prepare_function_data.py / prepare_param_data.py and PUMA.data all ...")
        function_log, param_log = setup.work / "release_step1_function.log", setup.work / "release_step1_param.log"
        started = {
            "function": runner.start(["script", "--script", "PUMA/prepare_function_data.py", *hub], function_log,
                                     release_argv=["--task_file", str(tasks_file), "--output_file",
                                                   str(release_dir / "function_data.json")], cwd=release_dir),
            "param": runner.start(["script", "--script", "PUMA/prepare_param_data.py", *hub], param_log,
                                  base_url=theirs.url,
                                  release_argv=["--task_file", str(tasks_file), "--user_history_file", str(history_file),
                                                "--output_file", str(release_dir / "param_data.json"),
                                                "--mem_token_length", str(setup.mem_token_length),
                                                "--mem_length", str(setup.memory_length)], cwd=release_dir)}
        project_data = setup.work / "project_data"
        if not (project_data / "user_instructions.json").exists():
            project_data.mkdir(exist_ok=True)
            for source in setup.data_dir.iterdir():
                target = project_data / source.name
                if source.name == "user_instructions.json":
                    target.write_bytes(tasks_file.read_bytes())
                elif source.name == "cache":  # a copy: caches keyed by these tasks must not replace the data's
                    shutil.copytree(source, target, dirs_exist_ok=True)
                elif not target.exists():
                    target.symlink_to(source, target_is_directory=source.is_dir())
        run_project(setup, "step1", project_command(
            setup, "PUMA.data", "all", "--recipe", "release", "--data_dir", str(project_data), "--out_dir",
            str(project_dir), "--model_path", str(model), "--mem_token_length", str(setup.mem_token_length),
            "--memory_length", str(setup.memory_length), "--query_model", f"openai/{LABEL_MODEL}",
            "--api_base", ours.url))
        runner.finish(started["function"], "release prepare_function_data.py", function_log)
        runner.finish(started["param"], "release prepare_param_data.py", param_log)
        (release_dir / "label_requests.json").write_text(json.dumps(theirs.requests), encoding="utf-8")
        (project_dir / "label_requests.json").write_text(json.dumps(ours.requests), encoding="utf-8")


def project_sft_batches(setup: PumaSetup, project_dir: Path, model: Path) -> dict[str, Any]:
    """The project's first SFT batches in its Trainer's order, and the loss of each from the
    model's weights (the LoRA starts as the identity, so these are the base model's)."""
    import torch

    from PUMA.sft import SFTConfig, build_sft_trainer

    config = SFTConfig(recipe="release", model_path=str(model), train_on="function_param",
                       function_data=str(project_dir / "function_train.json"),
                       param_data=str(project_dir / "param_train.json"), output_dir=str(setup.work / "project_sft"),
                       max_length=setup.sft_max_length, per_device_train_batch_size=1, gradient_accumulation_steps=1,
                       save_strategy="no")
    trainer, _ = build_sft_trainer(config)
    trainer.model.eval()
    rows = []
    for number, batch in enumerate(trainer.get_train_dataloader()):
        if number >= setup.sft_batches:
            break
        with torch.no_grad():
            loss = trainer.compute_loss(trainer.model, dict(batch))
        rows.append({name: batch[name].tolist() for name in ("input_ids", "attention_mask", "labels")}
                    | {"loss": float(loss)})
    return {"dataset_size": len(trainer.train_dataset), "batches": rows}


def step2(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, model: Path,
          log: Callable[[str], None]) -> None:
    log(f"puma step 2: the first {setup.sft_batches} SFT batches and their loss ...")
    out = setup.work / "release_sft_batches.json"
    log_path = setup.work / "release_step2.log"
    process = runner.start(["sft_batches", "--hub", f"{LLAMA_ID}={model}", "--param_data",
                            str(release_dir / "param_data.json"), "--function_data",
                            str(release_dir / "function_data.json"), "--model", str(model), "--max_length",
                            str(setup.sft_max_length), "--batches", str(setup.sft_batches), "--out", str(out)],
                           log_path)
    ours = project_sft_batches(setup, project_dir, model)
    runner.finish(process, "release SFT batches", log_path)
    theirs = json.loads(out.read_text(encoding="utf-8"))
    tally = Tally()
    if theirs["dataset_size"] != ours["dataset_size"]:
        tally.add("dataset size", False, {"release": theirs["dataset_size"], "project": ours["dataset_size"]})
    for index, (a, b) in enumerate(zip(theirs["batches"], ours["batches"])):
        for name in ("input_ids", "attention_mask", "labels"):
            tally.add(name, a[name] == b[name], None if a[name] == b[name] else {
                "batch": index, "field": name, "diff": first_difference(json.dumps(a[name]), json.dumps(b[name]))})
        same = math.isclose(a["loss"], b["loss"], rel_tol=LOSS_TOLERANCE)
        tally.add("loss", same, None if same else {"batch": index, "release": a["loss"], "project": b["loss"]})
    setup.results["step2 SFT batches"] = tally


class GenerateRecorder:
    """Records the settings and inputs of every `generate` call in this process."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __enter__(self) -> "GenerateRecorder":
        import transformers

        self._original = original = transformers.GenerationMixin.generate
        calls = self.calls

        def generate(model: Any, *args: Any, **kwargs: Any) -> Any:
            config = kwargs.get("generation_config")
            inputs = kwargs.get("input_ids", args[0] if args else None)
            calls.append({"settings": config.to_diff_dict() if config is not None else {},
                          "input_ids": inputs.tolist() if inputs is not None else None,
                          "attention_mask": kwargs["attention_mask"].tolist() if "attention_mask" in kwargs else None})
            return original(model, *args, **kwargs)

        transformers.GenerationMixin.generate = generate
        return self

    def __exit__(self, *exc: object) -> None:
        import transformers

        transformers.GenerationMixin.generate = self._original

    def prompts(self) -> list[list[int]]:
        """Each prompt's ids without the left padding."""
        rows = []
        for call in self.calls:
            for ids, mask in zip(call["input_ids"], call["attention_mask"] or [None] * len(call["input_ids"])):
                rows.append([i for i, m in zip(ids, mask)] if mask is None else [i for i, m in zip(ids, mask) if m])
        return rows


SETTING_KEYS = ("max_new_tokens", "num_beams", "num_return_sequences", "do_sample", "temperature", "top_k", "top_p",
                "early_stopping", "use_cache")


# GenerationConfig defaults the release's transformers (4.x) applied where its scripts set nothing;
# transformers 5 leaves these unset, so the release's settings are read with them
RELEASE_ERA_DEFAULTS = {"top_k": 50}


def settings_of(settings: dict[str, Any], release_era: bool = False) -> dict[str, Any]:
    from transformers import GenerationConfig

    merged = {**GenerationConfig().to_dict(), **settings}
    if release_era:
        merged.update({key: value for key, value in RELEASE_ERA_DEFAULTS.items() if merged.get(key) is None})
    if not merged.get("do_sample"):  # greedy: the sampling settings play no part
        merged.update(top_k=None, top_p=None)
    return {key: merged.get(key) for key in SETTING_KEYS}


def release_generate(setup: PumaSetup, runner: ReleaseRunner, label: str, adapter: Path, model: Path,
                     argv: list[str]) -> dict[str, Any]:
    record = setup.work / f"release_{label}_calls.json"
    log_path = setup.work / f"release_{label}.log"
    process = runner.start(["script", "--script", "PUMA/test_llama.py", "--hub", f"{LLAMA_ID}={model}",
                            "--record", str(record)], log_path,
                           release_argv=["--model_path", str(adapter), "--base_model", str(model), "--device", "cpu",
                                         *argv], cwd=setup.work / "release")
    runner.finish(process, f"release test_llama.py ({label})", log_path)
    return json.loads(record.read_text(encoding="utf-8"))


def project_generate(setup: PumaSetup, **settings: Any) -> tuple[dict[str, list[str]], GenerateRecorder]:
    from PUMA.generate import GenerateConfig, generate_file

    config = GenerateConfig(recipe="release", backend="hf", dtype="float32", batch_size=8,
                            protocol_file=setup.protocol_file, mem_token_length=setup.mem_token_length, **settings)
    with GenerateRecorder() as recorder:
        path = generate_file(config, log=lambda _: None)
    return json.loads(Path(path).read_text(encoding="utf-8")), recorder


def compare_generation(label: str, setup: PumaSetup, release_calls: dict[str, Any], release_out: dict[str, Any],
                       project_out: dict[str, Any], recorder: GenerateRecorder, types: dict[str, str]) -> None:
    prompts = Tally()
    theirs_ids = [row for call in release_calls["generate"] for row in call["input_ids"]]
    ours_ids = recorder.prompts()
    if len(theirs_ids) != len(ours_ids):
        prompts.add("count", False, {"release": len(theirs_ids), "project": len(ours_ids)})
    for index, (a, b) in enumerate(zip(theirs_ids, ours_ids)):
        prompts.add("prompt", a == b, None if a == b else {"index": index, "diff": first_difference(str(a), str(b))})
    setup.results[f"step3 {label} prompt ids"] = prompts
    outputs = Tally()
    for instruction, theirs in release_out.items():
        ours = project_out.get(instruction)
        outputs.add(types.get(instruction, "?"), theirs == ours, None if theirs == ours else {
            "instruction": instruction[:80], "diff": first_difference(json.dumps(theirs), json.dumps(ours))})
    setup.results[f"step3 {label} outputs"] = outputs
    settings = Tally()
    a = settings_of(release_calls["generate"][0]["settings"], release_era=True) if release_calls["generate"] else {}
    b = settings_of(recorder.calls[0]["settings"]) if recorder.calls else {}
    settings.add("settings", a == b, None if a == b else {"release": a, "project": b})
    setup.results[f"step3 {label} generate settings"] = settings


def step3(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, model: Path,
          log: Callable[[str], None]) -> Path:
    """Function predictions and greedy parameter outputs on the test split, and the settings of
    the DPO candidates' sampling on two train examples; returns the release's function file."""
    adapter = random_adapter(model, setup.work / "adapter")
    types = {e["instruction"]: e["type"] for split in SPLITS
             for e in json.loads((project_dir / f"param_{split}.json").read_text(encoding="utf-8"))}
    log("puma step 3: function predictions (test split) ...")
    function_res = release_dir / "function_res.json"
    calls = release_generate(setup, runner, "function", adapter, model, [
        "--data_path", str(release_dir / "function_data.json"), "--test_on", "function", "--batch_size", "8",
        "--max_new_tokens", "32", "--res_file", str(function_res), "--split", "train,test"])
    ours, recorder = project_generate(setup, mode="function", model_path=str(adapter),
                                      data_file=str(_both_splits(project_dir, "function")),
                                      output_file=str(project_dir / "function_res.json"))
    compare_generation("function", setup, calls, json.loads(function_res.read_text(encoding="utf-8")), ours, recorder,
                       types)
    log("puma step 3: greedy parameter outputs (test split, the release's function file on both sides) ...")
    param_res = release_dir / "param_res_test.json"
    calls = release_generate(setup, runner, "param_greedy", adapter, model, [
        "--data_path", str(release_dir / "param_data.json"), "--test_on", "param", "--batch_size", "4",
        "--max_new_tokens", str(setup.param_new_tokens), "--memory_token_length", str(setup.mem_token_length),
        "--tool_file", str(function_res), "--res_file", str(param_res), "--split", "test"])
    ours, recorder = project_generate(setup, mode="param", model_path=str(adapter),
                                      data_file=str(project_dir / "param_test.json"),
                                      output_file=str(project_dir / "param_res_test.json"),
                                      function_file=str(function_res), max_new_tokens=setup.param_new_tokens,
                                      num_beams=1, num_return_sequences=1, do_sample=False)
    compare_generation("param (greedy)", setup, calls, json.loads(param_res.read_text(encoding="utf-8")), ours,
                       recorder, types)
    log("puma step 3: the DPO candidates' sampling settings (two train examples) ...")
    two = {"train": json.loads((release_dir / "param_data.json").read_text(encoding="utf-8"))["train"][:2], "test": []}
    (release_dir / "param_two.json").write_text(json.dumps(two), encoding="utf-8")
    (project_dir / "param_two.json").write_text(json.dumps(
        json.loads((project_dir / "param_train.json").read_text(encoding="utf-8"))[:2]), encoding="utf-8")
    calls = release_generate(setup, runner, "param_sampling", adapter, model, [
        "--data_path", str(release_dir / "param_two.json"), "--test_on", "param", "--batch_size", "4",
        "--max_new_tokens", "8", "--memory_token_length", str(setup.mem_token_length), "--tool_file",
        str(function_res), "--res_file", str(release_dir / "param_two_res.json"), "--num_beams", "10",
        "--temperature", "1.5", "--do_sample", "--split", "train"])
    _, recorder = project_generate(setup, mode="param", model_path=str(adapter),
                                   data_file=str(project_dir / "param_two.json"),
                                   output_file=str(project_dir / "param_two_res.json"), function_file=str(function_res),
                                   max_new_tokens=8, num_beams=10, num_return_sequences=10, do_sample=True,
                                   temperature=1.5)
    tally = Tally()
    a = settings_of(calls["generate"][0]["settings"], release_era=True) if calls["generate"] else {}
    b = settings_of(recorder.calls[0]["settings"]) if recorder.calls else {}
    tally.add("settings", a == b, None if a == b else {"release": a, "project": b})
    setup.results["step3 DPO candidates generate settings"] = tally
    return function_res


def _both_splits(project_dir: Path, kind: str) -> Path:
    """The release generates functions for `--split train,test` into one file: both splits' examples."""
    out = project_dir / f"{kind}_train_test.json"
    examples = [e for split in SPLITS for e in json.loads((project_dir / f"{kind}_{split}.json").read_text("utf-8"))]
    out.write_text(json.dumps(examples), encoding="utf-8")
    return out


def candidates_file(project_dir: Path, out: Path) -> Path:
    """Candidates for every train instruction: the label and variants of it, and the edge cases
    that decide how a candidate is read (a message, a stop, an empty review, repeated ASINs)."""
    candidates: dict[str, list[str]] = {}
    for example in json.loads((project_dir / "param_train.json").read_text(encoding="utf-8")):
        label, kind = example["label"], example["type"]
        options = [label, "stop", "Say: could you tell me more?", " ".join(example["instruction"].split()[:4])]
        if kind == "recommend":
            asins = [a.strip() for a in label.split(",")]
            options += [", ".join(asins[:1] * 2 + asins[1:]), ",".join(reversed(asins))]
        elif kind == "review":
            options += ["", label[: len(label) // 2], "Terrible. Broke on day one, do not buy."]
        else:
            options += [label + " cheap", "zzzz qqqq"]
        candidates[example["instruction"]] = list(dict.fromkeys(options))
    out.write_text(json.dumps(candidates), encoding="utf-8")
    return out


def step4(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, train_tasks: Path,
          products: Path, model: Path, log: Callable[[str], None]) -> tuple[Path, Path]:
    log("puma step 4: scoring the same candidates (test.py --evaluate_dpo True and PUMA.score) ...")
    candidates = candidates_file(project_dir, setup.work / "candidates_train.json")
    theirs_path, ours_path = release_dir / "dpo_data.json", project_dir / "candidates_train_scores.json"
    log_path = setup.work / "release_step4.log"
    process = runner.start(["script", "--script", "test.py", "--hub", f"{LLAMA_ID}={model}"], log_path,
                           cwd=runner.mirror.root,
                           release_argv=["--evaluate_dpo", "True", "--task_file", str(train_tasks), "--param_file",
                                         str(candidates), "--function_file", str(candidates), "--all_products",
                                         str(products), "--dpo_output", str(theirs_path)])
    run_project(setup, "step4", project_command(
        setup, "PUMA.score", "--recipe", "release", "--data_dir", str(setup.work / "project_data"), "--task_split",
        "train", "--candidates_file", str(candidates), "--output_file", str(ours_path)))
    runner.finish(process, "release test.py --evaluate_dpo True", log_path)
    theirs = json.loads(theirs_path.read_text(encoding="utf-8"))
    ours = json.loads(ours_path.read_text(encoding="utf-8"))
    types = {e["instruction"]: e["type"] for e in json.loads((project_dir / "param_train.json").read_text("utf-8"))}
    tally = Tally()
    if set(theirs) != set(ours):
        tally.add("instructions", False, {"release_only": sorted(set(theirs) - set(ours))[:3],
                                          "project_only": sorted(set(ours) - set(theirs))[:3]})
    for instruction, scored in theirs.items():
        kind = types.get(instruction, "?")
        for candidate, score in scored.items():
            mine = ours.get(instruction, {}).get(candidate)
            same = mine is not None and abs(score - mine) <= SCORE_TOLERANCE.get(kind, 1e-9)
            tally.add(kind, same, None if same else {"instruction": instruction[:60], "candidate": candidate[:60],
                                                     "release": score, "project": mine})
    setup.results["step4 candidate scores"] = tally
    return theirs_path, ours_path


def step5(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, train_tasks: Path,
          history_file: Path, model: Path, scores: tuple[Path, Path], log: Callable[[str], None]) -> None:
    log("puma step 5: DPO pairs (prepare_dpo_data.py and PUMA.dpo_data) ...")
    theirs_path, ours_path = release_dir / "dpo_training_data.json", project_dir / "dpo_train.json"
    log_path = setup.work / "release_step5.log"
    process = runner.start(["script", "--script", "PUMA/prepare_dpo_data.py", "--hub", f"{LLAMA_ID}={model}"],
                           log_path, cwd=release_dir,
                           release_argv=["--task_file", str(train_tasks), "--user_history_file", str(history_file),
                                         "--dpo_data_file", str(scores[0]), "--output_file", str(theirs_path),
                                         "--mem_token_length", str(setup.mem_token_length),
                                         "--mem_length", str(setup.memory_length)])
    run_project(setup, "step5", project_command(
        setup, "PUMA.dpo_data", "--recipe", "release", "--scores_file", str(scores[1]), "--param_data",
        str(project_dir / "param_train.json"), "--output_file", str(ours_path), "--model_path", str(model)))
    runner.finish(process, "release prepare_dpo_data.py", log_path)
    theirs = json.loads(theirs_path.read_text(encoding="utf-8"))["train"]
    ours = json.loads(ours_path.read_text(encoding="utf-8"))
    types = [e["type"] for e in json.loads((project_dir / "param_train.json").read_text("utf-8"))]
    setup.results["step5 DPO pairs"] = compare_examples(theirs, ours, types, {
        "instruction": "instruction", "prompt": "prompt", "chosen": "chosen", "rejected": "rejected"})


def step6(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, model: Path,
          log: Callable[[str], None]) -> None:
    """The DPO rows: the release's dpo_llama.py (with the TRL of its time, `trl_path`) and
    PUMA.dpo's `encode_pairs` tokenize the same pairs (the release's step-5 pairs)."""
    if not setup.trl_path:
        setup.skipped["step6 DPO rows"] = ("needs the TRL of the release's time beside the project: --puma_trl_path "
                                           "DIR (see docs/fidelity.md)")
        return
    log("puma step 6: the DPO rows (the release's dpo_llama.py with TRL 0.11 and PUMA.dpo) ...")
    pairs = json.loads((release_dir / "dpo_training_data.json").read_text(encoding="utf-8"))["train"]
    data = release_dir / "dpo_rows_input.json"
    data.write_text(json.dumps({"train": pairs, "test": pairs[:2]}), encoding="utf-8")  # its eval split must exist
    out, log_path = setup.work / "release_dpo_rows.json", setup.work / "release_step6.log"
    process = runner.start(["dpo_rows", "--first_path", str(setup.trl_path), "--hub", f"{LLAMA_ID}={model}",
                            "--rows", str(len(pairs)), "--out", str(out)], log_path, cwd=release_dir,
                           release_argv=["--data_path", str(data), "--output_dir", str(release_dir / "dpo_out"),
                                         "--model_name", str(model), "--train_epoch", "5", "--learning_rate", "5e-5",
                                         "--train_batch_size", "1", "--source_length", "1024", "--warmup_ratio", "0.1",
                                         "--eval_strategy", "epoch", "--save_strategy", "epoch", "--logging_steps", "10",
                                         "--gradient_accumulation_steps", "16", "--train_on", "param",
                                         "--prompt_length", "768", "--beta", "0.1"])
    from PUMA.dpo import DPOStepConfig, encode_pairs
    from PUMA.modeling import load_tokenizer

    ours = encode_pairs(DPOStepConfig(recipe="release"), load_tokenizer(str(model)), pairs)
    runner.finish(process, "release dpo_llama.py (rows)", log_path)
    theirs = json.loads(out.read_text(encoding="utf-8"))
    tally = Tally()
    for index, (a, b) in enumerate(zip(theirs["rows"], ours)):
        prompt = len(a["prompt_input_ids"])
        expected = {"prompt": a["prompt_input_ids"], "chosen": a["chosen_input_ids"][prompt:],
                    "rejected": a["rejected_input_ids"][prompt:],
                    "labels": [a["chosen_labels"][:prompt] == [-100] * prompt,
                               a["rejected_labels"][:prompt] == [-100] * prompt]}
        mine = {"prompt": b["prompt_ids"], "chosen": b["chosen_ids"], "rejected": b["rejected_ids"],
                "labels": [True, True]}  # TRL 1.16 masks the prompt itself
        same_prefix = a["chosen_input_ids"][:prompt] == a["prompt_input_ids"] == a["rejected_input_ids"][:prompt]
        same = expected == mine and same_prefix
        tally.add("row", same, None if same else {"index": index, "diff": first_difference(
            json.dumps(expected), json.dumps(mine))})
    if len(theirs["rows"]) != len(ours):
        tally.add("count", False, {"release": len(theirs["rows"]), "project": len(ours)})
    tally.note(f"release TRL {theirs['trl']}")
    setup.results["step6 DPO rows"] = tally


def result_scores(path: Path) -> dict[int, list[float]]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {int(r["task_id"]): [float(sum(r["action_acc"])), float(sum(r["res_acc"]))] for r in rows
            if isinstance(r, dict) and "task_id" in r}  # both files may open with a header record


# The project's run.py with the PUMA agent's live generations recorded (prompt and output, in
# task order, the file rewritten after each: run.py ends with os._exit).
RECORDING_RUN = """
import json, sys
from pathlib import Path
from PUMA import agent as puma
record, seen, generate = Path(sys.argv[1]), [], puma.LiveGenerator.generate
def recorded(self, prompt, max_new_tokens=None, **options):
    output = generate(self, prompt, max_new_tokens, **options)
    if max_new_tokens is None:
        seen.append({"prompt": prompt, "output": output})
        record.write_text(json.dumps(seen), encoding="utf-8")
    return output
puma.LiveGenerator.generate = recorded
sys.argv = ["run.py", *sys.argv[2:]]
from PersonalWAB.runner.cli import cli
cli()
"""


def evaluation(setup: PumaSetup, runner: ReleaseRunner, model: Path, test_count: int,
               log: Callable[[str], None]) -> None:
    """Both run.py's with the PUMA agent generating live from the same adapter and function
    file: the heuristic's function for every instruction (an exact name, right or wrong; the
    random adapter's own predictions name none, on which the release's agent crashes)."""
    from PersonalWAB.agents.heuristic import choose_function

    log(f"puma evaluation: the PUMA agent generating live on {test_count} test task(s) ...")
    tasks = json.loads((setup.work / "tasks.json").read_text(encoding="utf-8"))["test"]
    function_res = setup.work / "eval_functions.json"
    function_res.write_text(json.dumps({t["task"]: [choose_function(t["task"])] for t in tasks}), encoding="utf-8")
    adapter = setup.work / "adapter"
    release_logs, log_path = setup.work / "release_eval", setup.work / "release_eval.log"
    record = setup.work / "release_eval_calls.json"
    process = runner.start(["run", "--hub", f"{LLAMA_ID}={model}", "--record", str(record)], log_path,
                           release_argv=["--env", "pwab", "--model", "finetune/llama", "--user_mode", "no", "--agent_strategy",
                                         "puma", "--puma_generate", "1", "--puma_model_path", str(adapter),
                                         "--puma_function_file", str(function_res), "--agent_memory", "taskspe",
                                         "--memory_length", "100", "--mem_token_length", str(setup.mem_token_length),
                                         "--task_split", "test", "--max_steps", "-1", "--end_index", str(test_count),
                                         "--max_concurrency", "1", "--log_dir", str(release_logs)],
                           cwd=setup.work / "release")
    ours_path = setup.work / "project_eval.json"
    run_project(setup, "evaluation", [sys.executable, "-c", RECORDING_RUN, str(setup.work / "project_eval_prompts.json"),
                                      "--data_dir", str(setup.work / "project_data"),
                                      "--agent_strategy", "puma", "--puma_recipe", "release", "--puma_generate", "1",
                                      "--puma_model_path", str(adapter), "--puma_function_file", str(function_res),
                                      # the release's run.py never hands --memory_length to the agent: it uses 10
                                      "--memory_length", "10", "--mem_token_length", str(setup.mem_token_length),
                                      "--task_split", "test", "--end_index", str(test_count), "--max_concurrency", "1",
                                      "--puma_dtype", "float16",  # the release loads its model in fp16
                                      "--output", str(ours_path), "--overwrite",
                                      *(["--protocol_file", setup.protocol_file] if setup.protocol_file else [])])
    runner.finish(process, "release run.py (puma agent)", log_path)
    theirs_file = next(release_logs.rglob("*.json"), None)
    if theirs_file is None:
        raise ParityError(f"the release's run.py wrote no result file under {release_logs}; see {log_path}")
    theirs, ours = result_scores(theirs_file), result_scores(ours_path)
    kinds = {index: task["type"] for index, task in enumerate(tasks)}
    tally = Tally()
    for task_id in sorted(theirs):
        verdict = score_verdict(theirs[task_id], ours.get(task_id, []), kinds.get(task_id) == "review")
        if verdict == "floored":  # the environment keeps Result Acc in [0, 1]: a listed deviation
            tally.note("negative review cosine floored at 0")
        tally.add(kinds.get(task_id, "?"), verdict != "differs", None if verdict != "differs" else {
            "task": task_id, "release": theirs[task_id], "project": ours.get(task_id)})
    setup.results["evaluation scores"] = tally
    theirs_prompts = json.loads(record.read_text(encoding="utf-8"))["agent_prompts"]
    ours_prompts_file = setup.work / "project_eval_prompts.json"
    ours_prompts = json.loads(ours_prompts_file.read_text("utf-8")) if ours_prompts_file.exists() else []
    for part in ("prompt", "output"):
        tally = Tally()
        if len(theirs_prompts) != len(ours_prompts):
            tally.add("count", False, {"release": len(theirs_prompts), "project": len(ours_prompts)})
        for index, (a, b) in enumerate(zip(theirs_prompts, ours_prompts)):
            tally.add(part, a[part] == b[part], None if a[part] == b[part] else {
                "index": index, "diff": first_difference(a[part], b[part])})
        setup.results[f"evaluation agent {part}s"] = tally


def run_check(setup: PumaSetup, runner: ReleaseRunner, log: Callable[[str], None] = print) -> dict[str, Tally]:
    setup.work.mkdir(parents=True, exist_ok=True)
    model = stand_in_model(setup)
    tasks_file = limited_tasks(setup.data_dir, setup.limit, setup.work / "tasks.json")
    train_tasks = limited_tasks(setup.data_dir, setup.limit, setup.work / "tasks_train.json", splits=("train",))
    history = merged_parts(setup.data_dir, "user_history_part_*.json", setup.work / "user_history.json")
    products = merged_parts(setup.data_dir, "all_products_part_*.json", setup.work / "all_products.json")
    release_dir, project_dir = step1(setup, runner, tasks_file, history, model, log)
    if "2" in setup.steps:
        step2(setup, runner, release_dir, project_dir, model, log)
    if "3" in setup.steps:
        step3(setup, runner, release_dir, project_dir, model, log)
    if {"4", "5", "6"} & set(setup.steps):  # the pairs come from the scores, the rows from the pairs
        scores = step4(setup, runner, release_dir, project_dir, train_tasks, products, model, log)
        step5(setup, runner, release_dir, project_dir, train_tasks, history, model, scores, log)
        if "6" in setup.steps:
            step6(setup, runner, release_dir, model, log)
    if "eval" in setup.steps:
        evaluation(setup, runner, model, len(json.loads(tasks_file.read_text(encoding="utf-8"))["test"]), log)
    return setup.results


def summary_lines(setup: PumaSetup) -> list[str]:
    return [tally.line(f"puma {label}") for label, tally in setup.results.items()] + \
        [f"puma {label}: not run ({why})" for label, why in setup.skipped.items()]


def report(setup: PumaSetup) -> dict[str, Any]:
    return {**{label: tally.to_dict() for label, tally in setup.results.items()},
            **{label: {"not_run": why} for label, why in setup.skipped.items()}}


def all_identical(results: dict[str, Tally]) -> bool:
    return all(tally.all_identical for tally in results.values())
