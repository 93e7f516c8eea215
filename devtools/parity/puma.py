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
4. every candidate's score on candidates that hit (the same file on both sides; the declared
   ASIN-order difference proved and measured: devtools/parity/scoring.py);
5. the DPO pairs (the release's from its scores, the project's from its own with the declared
   order's effect taken out);
6. the DPO rows: the release's `dpo_llama.py` run up to training and `PUMA.dpo.encode_pairs`
   on the same pairs;
`sft_train`, `merge`, `dpo_train`: SFT and DPO trained for whole epochs by the release's scripts
and the project's steps from the same initial adapter, and the merge between them
(devtools/parity/training.py);
the tokenizer: every step-1 text by the release's Llama tokenizer and the project's
(devtools/parity/tokenizer.py);
the evaluation: the PUMA agent's live prompt and result for every task;
`agent`: both agents on scripted outputs covering every parsing path, single- and multi-turn
(devtools/parity/agent.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from devtools.parity import tokenizer as parity_tokenizer
from devtools.parity.check import Outcome, Session
from devtools.parity.compare import Tally, first_difference, score_verdict
from devtools.parity.puma_context import (HARDWARE_FLAGS, LABEL_MODEL, LLAMA_ID, SPLITS, PumaSetup,
                                          project_command, project_settings, random_adapter, release_call,
                                          release_set_orders, run_project, stand_in_model)
from devtools.parity.step_settings import SAMPLING_ONLY, SETTING_KEYS, plain_settings
from devtools.parity.scoring import (above_zero_counts, compare_scores, crafted_candidates, informative_pairs,
                                     order_effect, release_order_scores, release_orders, reordered_candidates,
                                     scores_above_zero, targets_of)
from devtools.parity.mirror import ParityError, ReleaseRunner, build_mirror
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply

LOSS_TOLERANCE = 1e-5


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
def project_data_folder(setup: PumaSetup, tasks_file: Path) -> Path:
    """The data as the project's side reads it: the chosen tasks in place of the data's (the
    other files linked; the caches copied, as entries keyed by these tasks are added to them)."""
    project_data = setup.work / "project_data"
    if not (project_data / "user_instructions.json").exists():
        project_data.mkdir(exist_ok=True)
        for source in setup.data_dir.iterdir():
            target = project_data / source.name
            if source.name == "user_instructions.json":
                target.write_bytes(tasks_file.read_bytes())
            elif source.name == "cache":
                shutil.copytree(source, target, dirs_exist_ok=True)
            elif not target.exists():
                target.symlink_to(source, target_is_directory=source.is_dir())
    return project_data


def pipeline_config(setup: PumaSetup, project_data: Path, model: Path, run_dir: Path, label_url: str) -> Path:
    """The settings file of the project's side, a user's `puma run --recipe release`: only what
    wires it to this check (data, base model, work folder, the label model's server, the texts);
    every other setting is the recipe's own."""
    import yaml

    pack = {"protocol_file": setup.protocol_file} if setup.protocol_file else {}
    config = {"recipe": "release", "data_dir": str(project_data), "model_path": str(model), "work_dir": str(run_dir),
              "data": {"query_model": f"openai/{LABEL_MODEL}", "api_base": label_url, **pack},
              **{section: dict(pack) for section in ("generate_function", "generate_param", "score",
                                                      "generate_test", "evaluate") if pack}}
    path = setup.work / "puma_run.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def pipeline_done(run_dir: Path) -> bool:
    return (run_dir / "result_puma_singleturn.json").exists() and (run_dir / "label_requests.json").exists()


def step1(setup: PumaSetup, runner: ReleaseRunner, tasks_file: Path, history_file: Path, model: Path,
          log: Callable[[str], None]) -> tuple[Path, Path, Path]:
    """The release's step-1 scripts with their .sh flags, and beside them the project's side: the
    user's own `puma run --recipe release`, all seven steps, on the same tasks. Returns the
    release's step-1 folder, the project's (`<run>/data`) and the run's folder."""
    release_dir, run_dir = setup.work / "release", setup.work / "puma_run"
    release_dir.mkdir(exist_ok=True)
    release_done = all((release_dir / name).exists()
                       for name in ("function_data.json", "param_data.json", "label_requests.json"))
    project_done = pipeline_done(run_dir)
    # a kept --work_dir: each side's run (the release's step 1 is the slow one) is not run again
    for side, done in (("release's step 1", release_done), ("project's puma run", project_done)):
        if done:
            log(f"puma step 1: reusing the {side} in the work folder")
    if not (release_done and project_done):
        _step1_run(setup, runner, tasks_file, history_file, model, release_dir, run_dir, log,
                   run_release=not release_done, run_project_side=not project_done)
    project_dir = run_dir / "data"
    release_requests = json.loads((release_dir / "label_requests.json").read_text(encoding="utf-8"))
    project_requests = json.loads((run_dir / "label_requests.json").read_text(encoding="utf-8"))
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
    return release_dir, project_dir, run_dir


def _step1_run(setup: PumaSetup, runner: ReleaseRunner, tasks_file: Path, history_file: Path, model: Path,
               release_dir: Path, run_dir: Path, log: Callable[[str], None], run_release: bool = True,
               run_project_side: bool = True) -> None:
    hub = {LLAMA_ID: str(model)}
    with ScriptedLLMServer(label_reply, max_lifetime_s=setup.timeout_s) as theirs, \
            ScriptedLLMServer(label_reply, max_lifetime_s=setup.timeout_s) as ours:
        started = {}
        function_log, param_log = setup.work / "release_step1_function.log", setup.work / "release_step1_param.log"
        if run_release:
            log("puma step 1: the release's prepare_function_data.py / prepare_param_data.py with their .sh flags ...")
            started = {
                "function": runner.start("script", function_log, script="PUMA/prepare_function_data.py", hub=hub,
                                         release_argv=release_call(setup, "pre_sft_func_data.sh", {
                                             "--task_file": str(tasks_file),
                                             "--output_file": str(release_dir / "function_data.json")}),
                                         cwd=release_dir),
                "param": runner.start("script", param_log, script="PUMA/prepare_param_data.py", hub=hub,
                                      base_url=theirs.url,
                                      release_argv=release_call(setup, "pre_sft_param_data.sh", {
                                          "--task_file": str(tasks_file), "--user_history_file": str(history_file),
                                          "--output_file": str(release_dir / "param_data.json")}),
                                      cwd=release_dir)}
        if run_project_side:
            project_data = project_data_folder(setup, tasks_file)
            shutil.rmtree(run_dir, ignore_errors=True)  # an unfinished run of an earlier check
            config = pipeline_config(setup, project_data, model, run_dir, ours.url)
            log(f"puma: the project's side, `puma run --config {config.name}` (recipe release, steps 1-7) ...")
            run_project(setup, "puma_run", [sys.executable, "-m", "PUMA", "run", "--config", str(config)])
            (run_dir / "label_requests.json").write_text(json.dumps(ours.requests), encoding="utf-8")
        if run_release:
            runner.finish(started["function"], "release prepare_function_data.py", function_log)
            runner.finish(started["param"], "release prepare_param_data.py", param_log)
            (release_dir / "label_requests.json").write_text(json.dumps(theirs.requests), encoding="utf-8")


def project_sft_batches(setup: PumaSetup, project_dir: Path, model: Path) -> dict[str, Any]:
    """The project's first SFT batches in its Trainer's order, and the loss of each from the
    model's weights (the LoRA starts as the identity, so these are the base model's)."""
    import torch

    from PUMA.sft import SFTConfig, build_sft_trainer

    config = project_settings(SFTConfig, "sft", "--model_path", str(model),
                              "--function_data", str(project_dir / "function_train.json"),
                              "--param_data", str(project_dir / "param_train.json"),
                              "--out", str(setup.work / "project_sft"))
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
    from devtools.parity.release_scripts import release_scripts

    max_length = int(release_scripts(setup.release_dir)["finetune_function_param.sh"].flags["--source_length"])
    process = runner.start("sft_batches", log_path, hub={LLAMA_ID: str(model)},
                           param_data=release_dir / "param_data.json", function_data=release_dir / "function_data.json",
                           model=model, max_length=max_length, batches=setup.sft_batches, out=out)
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
    """Records every `generate` call in this process: the settings passed, the settings the
    library generated with after merging its defaults (`effective`), and the inputs."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __enter__(self) -> GenerateRecorder:
        import transformers

        mixin = transformers.GenerationMixin
        self._original, self._prepare = original, prepare = mixin.generate, mixin._prepare_generation_config
        calls, prepared = self.calls, []

        def recorded_prepare(model: Any, *args: Any, **kwargs: Any) -> Any:
            result = prepare(model, *args, **kwargs)
            prepared.append(result[0])
            return result

        def generate(model: Any, *args: Any, **kwargs: Any) -> Any:
            config = kwargs.get("generation_config")
            inputs = kwargs.get("input_ids", args[0] if args else None)
            prepared.clear()
            out = original(model, *args, **kwargs)
            calls.append({"settings": config.to_diff_dict() if config is not None else {},
                          "effective": plain_settings(prepared[0]) if prepared else {},
                          "input_ids": inputs.tolist() if inputs is not None else None,
                          "attention_mask": kwargs["attention_mask"].tolist() if "attention_mask" in kwargs else None,
                          "output_ids": out.tolist() if hasattr(out, "tolist") else None})
            return out

        mixin.generate, mixin._prepare_generation_config = generate, recorded_prepare
        return self

    def __exit__(self, *exc: object) -> None:
        import transformers

        transformers.GenerationMixin.generate = self._original
        transformers.GenerationMixin._prepare_generation_config = self._prepare

    def prompts(self) -> list[list[int]]:
        """Each prompt's ids without the left padding."""
        rows = []
        for call in self.calls:
            for ids, mask in zip(call["input_ids"], call["attention_mask"] or [None] * len(call["input_ids"])):
                rows.append([i for i, m in zip(ids, mask)] if mask is None else [i for i, m in zip(ids, mask) if m])
        return rows


# Llama-2-7b-chat-hf's generation_config.json: the stand-in carries it, so that any default the
# library would take from the model folder shows up as a difference.
CHAT_GENERATION_DEFAULTS = {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "max_length": 4096}


def settings_of(call: dict[str, Any]) -> dict[str, Any]:
    """The effective decoding of a recorded call; greedy calls drop the fields only sampling reads."""
    effective = call.get("effective") or {}
    settings = {key: effective.get(key) for key in SETTING_KEYS}
    if not settings["do_sample"]:
        settings.update({key: None for key in SAMPLING_ONLY})
    return settings


def with_chat_generation_defaults(model: Path) -> Path:
    """Give the stand-in's folder Llama-2-chat's generation defaults (idempotent)."""
    path = model / "generation_config.json"
    config = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if any(config.get(key) != value for key, value in CHAT_GENERATION_DEFAULTS.items()):
        path.write_text(json.dumps({**config, **CHAT_GENERATION_DEFAULTS}, indent=1), encoding="utf-8")
    return model


def compare_settings(release_calls: list[dict[str, Any]], project_calls: list[dict[str, Any]]) -> Tally:
    """Every call's effective decoding on each side, the first release call against every project call."""
    tally = Tally()
    if not release_calls or not project_calls:
        tally.add("settings", False, {"release_calls": len(release_calls), "project_calls": len(project_calls)})
        return tally
    a = settings_of(release_calls[0])
    for index, call in enumerate(project_calls):
        b = settings_of(call)
        diff = {key: {"release": a[key], "project": b[key]} for key in SETTING_KEYS if a[key] != b[key]}
        tally.add("settings", not diff, None if not diff else {"call": index, "fields": diff})
    return tally


def release_generate(setup: PumaSetup, runner: ReleaseRunner, label: str, sh: str, adapter: Path, model: Path,
                     replace: dict[str, str], drop: tuple[str, ...] = (), seed: int | None = None) -> dict[str, Any]:
    """The release's test_llama.py with the flags of `sh` (its generate script), files replaced,
    on the CPU in fp32 (its `--bf16` is the GPU's precision: both sides compare in fp32 here,
    and the settings items compare the precision each plans for a GPU)."""
    record = setup.work / f"release_{label}_calls.json"
    log_path = setup.work / f"release_{label}.log"
    argv = release_call(setup, sh, {"--model_path": str(adapter), "--base_model": str(model), "--device": "cpu",
                                    **replace}, drop=("--bf16", *drop))
    process = runner.start("script", log_path, script="PUMA/test_llama.py", hub={LLAMA_ID: str(model)},
                           record=record, seed=seed, release_argv=argv, cwd=setup.work / "release")
    runner.finish(process, f"release test_llama.py ({label})", log_path)
    return json.loads(record.read_text(encoding="utf-8"))


def project_generate(setup: PumaSetup, *argv: str) -> tuple[dict[str, list[str]], GenerateRecorder]:
    """`puma generate --recipe release` in this process on `argv` (files, and only the values
    the release's side is given too), in fp32 on the CPU as the release's side runs."""
    from PUMA.generate import GenerateConfig, generate_file

    pack = ("--protocol_file", setup.protocol_file) if setup.protocol_file else ()
    config = project_settings(GenerateConfig, "generate", "--dtype", "float32", *pack, *argv)
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
    setup.results[f"step3 {label} generate settings"] = compare_settings(release_calls["generate"], recorder.calls)


def step3(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, model: Path,
          log: Callable[[str], None]) -> Path:
    """Function predictions of both splits (generate_function.sh's flags) and greedy parameter
    outputs on the test split from the same adapter, and the DPO candidates as
    generate_param_dpo.sh samples them, against the project's `puma generate` with the recipe's
    own values; returns the release's function file."""
    from PUMA.generate import GenerateConfig

    adapter = random_adapter(model, setup.work / "adapter")
    scratch = setup.work / "project"
    scratch.mkdir(exist_ok=True)
    types = {e["instruction"]: e["type"] for split in SPLITS
             for e in json.loads((project_dir / f"param_{split}.json").read_text(encoding="utf-8"))}
    log("puma step 3: function predictions (both splits) ...")
    function_res = release_dir / "function_res.json"
    calls = release_generate(setup, runner, "function", "generate_function.sh", adapter, model, {
        "--data_path": str(release_dir / "function_data.json"), "--res_file": str(function_res),
        "--split": "train,test"})
    ours, recorder = project_generate(setup, "--mode", "function", "--model_path", str(adapter),
                                      "--data_file", str(_both_splits(project_dir, scratch, "function")),
                                      "--out", str(scratch / "function_res.json"))
    compare_generation("function", setup, calls, json.loads(function_res.read_text(encoding="utf-8")), ours, recorder,
                       types)
    log("puma step 3: greedy parameter outputs (test split, the release's function file on both sides) ...")
    param_res = release_dir / "param_res_test.json"
    greedy = str(setup.param_new_tokens)  # the one departure from the scripts, on both sides: greedy and short
    calls = release_generate(setup, runner, "param_greedy", "generate_param_dpo.sh", adapter, model, {
        "--data_path": str(release_dir / "param_data.json"), "--max_new_tokens": greedy,
        "--tool_file": str(function_res), "--res_file": str(param_res), "--split": "test"},
        drop=("--num_beams", "--temperature", "--do_sample"))
    ours, recorder = project_generate(setup, "--mode", "param", "--model_path", str(adapter),
                                      "--data_file", str(project_dir / "param_test.json"),
                                      "--out", str(scratch / "param_res_test.json"), "--function_file",
                                      str(function_res), "--max_new_tokens", greedy, "--num_beams", "1",
                                      "--num_return_sequences", "1", "--do_sample", "0")
    compare_generation("param (greedy)", setup, calls, json.loads(param_res.read_text(encoding="utf-8")), ours,
                       recorder, types)
    log("puma step 3: the DPO candidates, sampled with the project's seed on both sides (two train examples) ...")
    two = {"train": json.loads((release_dir / "param_data.json").read_text(encoding="utf-8"))["train"][:2], "test": []}
    (release_dir / "param_two.json").write_text(json.dumps(two), encoding="utf-8")
    (scratch / "param_two.json").write_text(json.dumps(
        json.loads((project_dir / "param_train.json").read_text(encoding="utf-8"))[:2]), encoding="utf-8")
    seed = project_settings(GenerateConfig, "generate").seed  # the release's torch is seeded where the project seeds
    calls = release_generate(setup, runner, "param_sampling", "generate_param_dpo.sh", adapter, model, {
        "--data_path": str(release_dir / "param_two.json"), "--tool_file": str(function_res),
        "--res_file": str(release_dir / "param_two_res.json")}, seed=seed)
    # one prompt per call, as the release, so both sides draw the same random numbers in the same order
    ours, recorder = project_generate(setup, "--mode", "param", "--model_path", str(adapter),
                                      "--data_file", str(scratch / "param_two.json"),
                                      "--out", str(scratch / "param_two_res.json"),
                                      "--function_file", str(function_res), "--batch_size", "1")
    settings = compare_settings(calls["generate"], recorder.calls)
    # Sampled beam search draws differently on transformers 4.45 and 5 from one seed (the rewrite
    # picks other continuations at some steps; plain sampling draws the same): the outputs are
    # reported beside the settings, not compared as a verdict (docs/fidelity.md).
    theirs = json.loads((release_dir / "param_two_res.json").read_text(encoding="utf-8"))
    equal = sum(texts == ours.get(instruction) for instruction, texts in theirs.items())
    settings.note(f"seeded candidate lists equal across the libraries: {equal}/{len(theirs)} (informational)")
    setup.results["step3 DPO candidates generate settings"] = settings
    return function_res


def _both_splits(project_dir: Path, scratch: Path, kind: str) -> Path:
    """The release generates functions for `--split train,test` into one file: both splits' examples."""
    out = scratch / f"{kind}_train_test.json"
    examples = [e for split in SPLITS for e in json.loads((project_dir / f"{kind}_{split}.json").read_text("utf-8"))]
    out.write_text(json.dumps(examples), encoding="utf-8")
    return out


def candidates_file(setup: PumaSetup, runner: ReleaseRunner, examples: list[dict[str, Any]],
                    tasks: list[dict[str, Any]], out: Path) -> Path:
    """Candidates that hit for every train instruction (`parity_scoring.crafted_candidates`), made
    with the data's recommender and the release's set order."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.recommender.engine import SASRecRecommender

    data = load_benchmark_data(setup.data_dir)
    recommender = SASRecRecommender(data.artifacts.checkpoint, data.artifacts.item_map)

    def history(task: dict[str, Any]) -> list[str]:
        return [b["product_info"]["parent_asin"] for b in data.behaviours_before(task["user_id"], task["timestamp"])]

    candidates = crafted_candidates(targets_of(examples, tasks, history), recommender,
                                    lambda texts: release_set_orders(setup, runner, texts))
    out.write_text(json.dumps(candidates), encoding="utf-8")
    return out


def score_command(setup: PumaSetup, candidates: Path, out: Path) -> list[str]:
    """`puma score --recipe release` on the train candidates (the recipe gives its split)."""
    return project_command(setup, "PUMA.score", "--recipe", "release", "--data_dir", str(setup.work / "project_data"),
                           "--candidates_file", str(candidates), "--out", str(out))


@dataclass
class StepScores:
    """Step 4's score files: the release's, the project's, and the project's with every recommend
    candidate whose difference is the declared ASIN order scored in the release's order."""

    release: Path
    project: Path
    release_order: Path


def step4(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, train_tasks: Path,
          products: Path, model: Path, log: Callable[[str], None]) -> StepScores:
    """Both sides score the same candidates that hit; recommend candidates the project reads in
    another order are scored again in the order the release's recommender was given (recorded
    in its process), which proves or disproves that the order is all that differs."""
    log("puma step 4: scoring candidates that hit (test.py --evaluate_dpo True and PUMA.score) ...")
    tasks = json.loads(train_tasks.read_text(encoding="utf-8"))["train"]
    examples = json.loads((project_dir / "param_train.json").read_text(encoding="utf-8"))
    types = {e["instruction"]: e["type"] for e in examples}
    candidates = candidates_file(setup, runner, examples, tasks, setup.work / "candidates_train.json")
    scratch = setup.work / "project"  # the project's side of the items, beside the user's run
    scratch.mkdir(exist_ok=True)
    theirs_path, ours_path = release_dir / "dpo_data.json", scratch / "candidates_train_scores.json"
    log_path, record = setup.work / "release_step4.log", setup.work / "release_step4_env.json"
    process = runner.start("script", log_path, script="test.py", hub={LLAMA_ID: str(model)}, record_env=record,
                           cwd=runner.mirror.root,
                           release_argv=["--evaluate_dpo", "True", "--task_file", str(train_tasks), "--param_file",
                                         str(candidates), "--function_file", str(candidates), "--all_products",
                                         str(products), "--dpo_output", str(theirs_path)])
    run_project(setup, "step4", score_command(setup, candidates, ours_path))
    runner.finish(process, "release test.py --evaluate_dpo True", log_path)
    theirs = json.loads(theirs_path.read_text(encoding="utf-8"))
    ours = json.loads(ours_path.read_text(encoding="utf-8"))
    try:
        orders = release_orders(tasks, json.loads(candidates.read_text(encoding="utf-8")),
                                json.loads(record.read_text(encoding="utf-8"))["recommend_inputs"])
    except ValueError as exc:
        raise ParityError(f"{exc}; see {record}") from None
    rewritten = reordered_candidates(orders)
    reordered: dict[str, dict[str, float]] = {}
    if rewritten:
        log(f"puma step 4: {sum(map(len, rewritten.values()))} recommend candidate(s) scored again in the "
            "release's ASIN order ...")
        again, again_scores = setup.work / "candidates_train_release_order.json", \
            scratch / "candidates_train_release_order_scores.json"
        again.write_text(json.dumps({i: list(dict.fromkeys(c.values())) for i, c in rewritten.items()}),
                         encoding="utf-8")
        run_project(setup, "step4_release_order", score_command(setup, again, again_scores))
        rescored = json.loads(again_scores.read_text(encoding="utf-8"))
        reordered = {i: {c: rescored[i][text] for c, text in by.items()} for i, by in rewritten.items()}
    tally = compare_scores(theirs, ours, types, reordered)
    tally.facts["above 0 (candidates, release, project, both)"] = above_zero_counts(theirs, ours, types)
    tally.facts["declared ASIN order"] = order_effect(theirs, ours, types, reordered, rewritten)
    setup.results["step4 candidate scores"] = tally
    setup.results["step4 scores above 0 on both sides"] = scores_above_zero(theirs, ours, types, reordered)
    release_order = scratch / "candidates_train_scores_release_order.json"
    release_order.write_text(json.dumps(release_order_scores(ours, theirs, types, reordered)), encoding="utf-8")
    return StepScores(theirs_path, ours_path, release_order)


def step5(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, project_dir: Path, train_tasks: Path,
          history_file: Path, model: Path, scores: StepScores, log: Callable[[str], None]) -> None:
    """The release's pairs against the project's from its step-4 scores with the declared order's
    effect taken out (`StepScores.release_order`); the pairs the order changes are counted."""
    log("puma step 5: DPO pairs (prepare_dpo_data.py and PUMA.dpo_data) ...")
    theirs_path = release_dir / "dpo_training_data.json"
    scratch = setup.work / "project"
    ours_path, own_order_path = scratch / "dpo_train_release_order.json", scratch / "dpo_train.json"
    log_path = setup.work / "release_step5.log"
    process = runner.start("script", log_path, script="PUMA/prepare_dpo_data.py", hub={LLAMA_ID: str(model)},
                           cwd=release_dir,
                           release_argv=release_call(setup, "pre_dpo_data.sh", {
                               "--task_file": str(train_tasks), "--user_history_file": str(history_file),
                               "--dpo_data_file": str(scores.release), "--output_file": str(theirs_path)}))
    for label, scores_file, out in (("step5", scores.project, own_order_path),
                                    ("step5_release_order", scores.release_order, ours_path)):
        run_project(setup, label, project_command(
            setup, "PUMA.dpo_data", "--recipe", "release", "--scores_file", str(scores_file), "--param_data",
            str(project_dir / "param_train.json"), "--out", str(out), "--model_path", str(model)))
    runner.finish(process, "release prepare_dpo_data.py", log_path)
    theirs = json.loads(theirs_path.read_text(encoding="utf-8"))["train"]
    ours = json.loads(ours_path.read_text(encoding="utf-8"))
    own_order = json.loads(own_order_path.read_text(encoding="utf-8"))
    types = [e["type"] for e in json.loads((project_dir / "param_train.json").read_text("utf-8"))]
    tally = compare_examples(theirs, ours, types, {
        "instruction": "instruction", "prompt": "prompt", "chosen": "chosen", "rejected": "rejected"})
    informative = informative_pairs(theirs, json.loads(scores.release.read_text(encoding="utf-8")))
    if not informative:
        tally.add("pairs", False, {"degenerate": "no pair whose chosen candidate scores above the rejected one"})
    tally.facts["pairs whose chosen scores above the rejected (release)"] = f"{informative}/{len(theirs)}"
    tally.facts["pairs the declared ASIN order changes"] = sum(
        (a["chosen"], a["rejected"]) != (b["chosen"], b["rejected"]) for a, b in zip(ours, own_order))
    setup.results["step5 DPO pairs"] = tally


def project_dpo_rows(setup: PumaSetup, model: Path, pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The project's DPO step (`puma dpo --recipe release`, its own values) on `pairs`: each pair's
    ids as its trainer receives them, and which positions of the chosen and rejected rows its
    trainer's own collator leaves out of the loss (TRL's `completion_mask` 0)."""
    from PUMA.dpo import DPOStepConfig, build_dpo_trainer

    scratch = setup.work / "project"
    scratch.mkdir(exist_ok=True)
    data = scratch / "dpo_rows_pairs.json"
    data.write_text(json.dumps(pairs), encoding="utf-8")
    config = project_settings(DPOStepConfig, "dpo", "--model_path", str(model), "--data_file", str(data),
                              "--out", str(scratch / "dpo_rows"))
    trainer, _ = build_dpo_trainer(config)
    rows = []
    for index in range(len(trainer.train_dataset)):
        row = trainer.train_dataset[index]
        batch = trainer.data_collator([row])
        masks = batch["completion_mask"].tolist()
        lengths = [len(row["prompt_ids"]) + len(row[key]) for key in ("chosen_ids", "rejected_ids")]
        rows.append({"prompt": row["prompt_ids"], "chosen": row["chosen_ids"], "rejected": row["rejected_ids"],
                     "masked": [[m == 0 for m in mask[:length]] for mask, length in zip(masks, lengths)]})
    return rows


def step6(setup: PumaSetup, runner: ReleaseRunner, release_dir: Path, model: Path,
          log: Callable[[str], None]) -> None:
    """The DPO rows: the release's dpo_llama.py (dpo_llama.sh's flags) and the project's DPO step
    tokenize the same pairs (the release's step-5 pairs); the positions each leaves out of the
    loss, from the release's labels and the project's trainer's collator."""
    log("puma step 6: the DPO rows (the release's dpo_llama.py with TRL 0.11 and the project's DPO trainer) ...")
    pairs = json.loads((release_dir / "dpo_training_data.json").read_text(encoding="utf-8"))["train"]
    data = release_dir / "dpo_rows_input.json"
    data.write_text(json.dumps({"train": pairs, "test": pairs[:2]}), encoding="utf-8")  # its eval split must exist
    out, log_path = setup.work / "release_dpo_rows.json", setup.work / "release_step6.log"
    process = runner.start("dpo_rows", log_path, hub={LLAMA_ID: str(model)}, rows=len(pairs), out=out,
                           cwd=release_dir,
                           release_argv=release_call(setup, "dpo_llama.sh", {
                               "--data_path": str(data), "--output_dir": str(release_dir / "dpo_out"),
                               "--model_name": str(model)}, drop=HARDWARE_FLAGS))
    ours = project_dpo_rows(setup, model, pairs)
    runner.finish(process, "release dpo_llama.py (rows)", log_path)
    theirs = json.loads(out.read_text(encoding="utf-8"))
    tally = Tally()
    for index, (a, b) in enumerate(zip(theirs["rows"], ours)):
        prompt = len(a["prompt_input_ids"])
        expected = {"prompt": a["prompt_input_ids"], "chosen": a["chosen_input_ids"][prompt:],
                    "rejected": a["rejected_input_ids"][prompt:],
                    "masked": [[label == -100 for label in a[key]] for key in ("chosen_labels", "rejected_labels")]}
        same_prefix = a["chosen_input_ids"][:prompt] == a["prompt_input_ids"] == a["rejected_input_ids"][:prompt]
        same = expected == b and same_prefix
        tally.add("row", same, None if same else {"index": index, "diff": first_difference(
            json.dumps(expected), json.dumps(b))})
    if len(theirs["rows"]) != len(ours):
        tally.add("count", False, {"release": len(theirs["rows"]), "project": len(ours)})
    tally.note(f"release TRL {theirs['trl']}")
    setup.results["step6 DPO rows"] = tally


def result_scores(path: Path) -> dict[int, list[float]]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {int(r["task_id"]): [float(sum(r["action_acc"])), float(sum(r["res_acc"]))] for r in rows
            if isinstance(r, dict) and "task_id" in r}  # both files may open with a header record


def memorised_adapter(setup: PumaSetup, project_dir: Path, model: Path, log: Callable[[str], None]) -> Path:
    """A LoRA adapter on the stand-in that has learnt the test split's parameter labels by heart
    (the project's SFT, label-only loss, many epochs): the live agent then generates parameters
    that hit, so the evaluation's scores can tell the two sides apart (a random adapter's never
    score above 0)."""
    out = setup.work / "memorised_adapter"
    if (out / "adapter_config.json").exists():
        return out
    log("puma evaluation: an adapter that learns the test split's parameter labels by heart ...")
    examples = setup.work / "memorised_examples.json"  # a copy: the harness's input, not a release-recipe output
    examples.write_bytes((project_dir / "param_test.json").read_bytes())
    run_project(setup, "memorised_adapter", [
        sys.executable, "-m", "PUMA.sft", "--recipe", "improved", "--model_path", str(model), "--train_on", "param",
        "--param_data", str(examples), "--out", str(out), "--num_train_epochs", "60",
        "--learning_rate", "5e-3", "--warmup_ratio", "0", "--per_device_train_batch_size", "4",
        "--gradient_accumulation_steps", "1", "--save_strategy", "no", "--logging_steps", "50"])
    parity_tokenizer.copy_tokenizer_files(model, out)  # the release loads its LlamaTokenizer from the adapter folder
    (out / "puma_run.json").unlink()  # an input both agents are given, not a step of the recipe they run
    return out


def attempts(path: Path) -> dict[int, int]:
    """task id -> its scored attempts (the agent's calls of a web function)."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {int(r["task_id"]): len(r["action_acc"]) for r in rows if isinstance(r, dict) and "task_id" in r}


def evaluation(setup: PumaSetup, runner: ReleaseRunner, model: Path, project_dir: Path, test_count: int,
               log: Callable[[str], None]) -> None:
    """Both run.py's with the PUMA agent generating live from the same adapter (one that has
    learnt the test labels, so parameters hit) and function file (the heuristic's function for
    every instruction: an exact name, right or wrong), single-turn and multi-turn (`--max_steps
    3`, the LLM user a scripted server): per task the scores and the scored attempts, and every
    live prompt and output."""
    from PersonalWAB import trace
    from PersonalWAB.agents.heuristic import choose_function

    from devtools.parity.agent import MULTITURN_STEPS, USER_MODEL, user_server

    tasks = json.loads((setup.work / "tasks.json").read_text(encoding="utf-8"))["test"]
    function_res = setup.work / "eval_functions.json"
    function_res.write_text(json.dumps({t["task"]: [choose_function(t["task"])] for t in tasks}), encoding="utf-8")
    adapter = memorised_adapter(setup, project_dir, model, log)
    # the release's run.py reads its tasks from its data folder: a mirror of the chosen tasks' folder
    reported = runner.library_files
    runner = dataclasses.replace(runner, mirror=build_mirror(setup.release_dir, setup.work / "project_data",
                                                             parent=setup.work, protocol_file=setup.protocol_file))
    runner.library_files = reported  # its commands' libraries are the check's too
    kinds = {index: task["type"] for index, task in enumerate(tasks)}
    for mode in ("single-turn", "multi-turn"):
        log(f"puma evaluation ({mode}): the PUMA agent generating live on {test_count} test task(s) ...")
        turns = ["--max_steps", "-1", "--user_mode", "no"] if mode == "single-turn" else [
            "--max_steps", str(MULTITURN_STEPS), "--user_mode", "naive", "--user_model", USER_MODEL]
        label = mode.replace("-", "")
        release_logs, log_path = setup.work / f"release_eval_{label}", setup.work / f"release_eval_{label}.log"
        record = setup.work / f"release_eval_{label}_calls.json"
        shutil.rmtree(release_logs, ignore_errors=True)  # the release's run.py resumes from a file of the same name
        ours_path, ours_trace = setup.work / f"project_eval_{label}.json", setup.work / f"project_eval_{label}.jsonl"
        ours_trace.unlink(missing_ok=True)  # a trace is appended to: this run's alone
        with user_server(setup.timeout_s) as theirs_user, user_server(setup.timeout_s) as ours_user:
            process = runner.start("run", log_path, hub={LLAMA_ID: str(model)}, record=record,
                                   base_url=theirs_user.url if mode == "multi-turn" else None,
                                   release_argv=["--env", "pwab", "--model", "finetune/llama", *turns,
                                                 "--agent_strategy", "puma", "--puma_generate", "1",
                                                 "--puma_model_path", str(adapter),
                                                 "--puma_function_file", str(function_res), "--agent_memory",
                                                 "taskspe", "--task_split", "test", "--end_index", str(test_count),
                                                 "--max_concurrency", "1", "--log_dir", str(release_logs)],
                                   cwd=setup.work / "release")
            run_project(setup, f"evaluation_{label}", [
                sys.executable, str(setup.repo_root / "run.py"), "--trace_file", str(ours_trace),
                "--data_dir", str(setup.work / "project_data"), *turns,
                *(["--user_api_base", ours_user.url] if mode == "multi-turn" else []),
                "--agent_strategy", "puma", "--recipe", "release", "--puma_generate", "1",
                "--puma_model_path", str(adapter), "--puma_function_file", str(function_res),
                # the release's run.py never hands --memory_length to the agent: it uses 10
                "--memory_length", "10", "--task_split", "test", "--end_index", str(test_count),
                "--max_concurrency", "1", "--puma_dtype", "float16",  # the release loads its model in fp16
                "--out", str(ours_path), "--overwrite",
                *(["--protocol_file", setup.protocol_file] if setup.protocol_file else [])])
            runner.finish(process, f"release run.py (puma agent, {mode})", log_path)
        theirs_file = next(release_logs.rglob("*.json"), None)
        if theirs_file is None:
            raise ParityError(f"the release's run.py wrote no result file under {release_logs}; see {log_path}")
        theirs, ours = result_scores(theirs_file), result_scores(ours_path)
        theirs_steps, ours_steps = attempts(theirs_file), attempts(ours_path)
        tally = Tally()
        above = {}
        for task_id in sorted(set(theirs) | set(ours)):
            kind = kinds.get(task_id, "?")
            verdict = score_verdict(theirs.get(task_id, []), ours.get(task_id, []), kind == "review")
            if verdict == "floored":  # the environment keeps Result Acc in [0, 1]: a listed deviation
                tally.note("negative review cosine floored at 0")
            same_steps = theirs_steps.get(task_id) == ours_steps.get(task_id)
            tally.add(kind, verdict != "differs" and same_steps, None if verdict != "differs" and same_steps else {
                "task": task_id, "release": theirs.get(task_id), "project": ours.get(task_id),
                "attempts": [theirs_steps.get(task_id), ours_steps.get(task_id)]})
            if theirs.get(task_id, [0, 0])[1] > 0 and ours.get(task_id, [0, 0])[1] > 0:
                above[kind] = above.get(kind, 0) + 1
        tally.facts["tasks scoring above 0 on both sides, per type"] = above
        tally.facts["scored attempts (release, project)"] = [sum(theirs_steps.values()), sum(ours_steps.values())]
        if not above:
            tally.cannot_compare("no task's Result Acc is above 0 on both sides")
        setup.results[f"evaluation scores ({mode})"] = tally
        theirs_prompts = json.loads(record.read_text(encoding="utf-8"))["agent_prompts"]
        ours_prompts = [event for event in trace.read(ours_trace, "generation") if event["purpose"] == "parameter"]
        calls = [len(theirs_prompts), len(ours_prompts)]
        # The release's agent generates again at every step of a task from the same prompt (built from
        # the task, its function and memory, never from the conversation) and so, greedy, gets the
        # same output; the project's generates once and repeats the action. Each run of identical
        # calls counts once; a release prompt that changed within a task would stay a difference.
        theirs_prompts = [call for number, call in enumerate(theirs_prompts)
                          if number == 0 or call != theirs_prompts[number - 1]]
        for part in ("prompt", "output"):
            tally = Tally()
            tally.facts["generation calls (release, project)"] = calls
            if len(theirs_prompts) != len(ours_prompts):
                tally.add("count", False, {"release": len(theirs_prompts), "project": len(ours_prompts)})
            for index, (a, b) in enumerate(zip(theirs_prompts, ours_prompts)):
                tally.add(part, a[part] == b[part], None if a[part] == b[part] else {
                    "index": index, "diff": first_difference(a[part], b[part])})
            setup.results[f"evaluation agent {part}s ({mode})"] = tally


def chosen_tasks(setup: PumaSetup, log: Callable[[str], None]) -> tuple[Path, Path]:
    """The task files both sides read (`--limit`: N of each type per split, drawn with `--seed`),
    all splits and the train split alone; the draw goes into the report."""
    from devtools.parity.selection import choose_from_data, write_tasks

    tasks, choice = choose_from_data(setup.data_dir, setup.limit, setup.seed)
    setup.facts["tasks"] = choice.facts()
    counts = {split: len(positions) for split, positions in choice.positions.items()}
    log(f"puma: tasks compared: {counts['train']} train, {counts['test']} test"
        + (f" ({setup.limit} of each type per split, drawn with seed {setup.seed})" if setup.limit else ""))
    return (write_tasks(tasks, choice, setup.work / "tasks.json"),
            write_tasks(tasks, choice, setup.work / "tasks_train.json", splits=("train",)))


def coverage(setup: PumaSetup) -> dict[str, Any]:
    """What the report can say was covered: the task types compared in step 1's examples, the
    candidate types that scored above 0 on both sides in step 4, the evaluation's tasks above 0."""
    facts: dict[str, Any] = {}
    step1 = [tally for label, tally in setup.results.items() if label.startswith("step1 param data")]
    if step1:
        facts["task types in step 1"] = sorted({kind for tally in step1 for kind in tally.by_type})
    scores = setup.results.get("step4 scores above 0 on both sides")
    if scores is not None:
        facts["candidate types above 0 on both sides (step 4)"] = sorted(scores.by_type)
    for label, tally in setup.results.items():
        if label.startswith("evaluation scores"):
            facts[f"{label}: types above 0 on both sides"] = sorted(
                tally.facts.get("tasks scoring above 0 on both sides, per type", {}))
    return facts


def run_check(setup: PumaSetup, runner: ReleaseRunner, log: Callable[[str], None] = print) -> dict[str, Tally]:
    setup.work.mkdir(parents=True, exist_ok=True)
    model = with_chat_generation_defaults(stand_in_model(setup))
    tasks_file, train_tasks = chosen_tasks(setup, log)
    history = merged_parts(setup.data_dir, "user_history_part_*.json", setup.work / "user_history.json")
    products = merged_parts(setup.data_dir, "all_products_part_*.json", setup.work / "all_products.json")
    release_dir, project_dir, run_dir = step1(setup, runner, tasks_file, history, model, log)
    if "settings" in setup.steps:
        from devtools.parity.step_settings import ReleaseInputs, settings_items

        adapter = random_adapter(model, setup.work / "adapter")
        function_file = setup.work / "settings_functions.json"
        function_file.write_text(json.dumps({e["instruction"]: [e["label"]] for split in SPLITS for e in json.loads(
            (project_dir / f"function_{split}.json").read_text(encoding="utf-8"))}), encoding="utf-8")
        inputs = ReleaseInputs(setup.work, model, adapter, release_dir / "param_data.json",
                               release_dir / "function_data.json", function_file)
        items, values = settings_items(runner, setup.release_dir, inputs, run_dir, setup.repo_root,
                                       {LLAMA_ID: str(model)}, log)
        setup.results.update(items)
        setup.facts["settings"] = values
    setup.results.update(parity_tokenizer.run_item(runner, release_dir, model, LLAMA_ID, setup.work, log))
    if "2" in setup.steps:
        step2(setup, runner, release_dir, project_dir, model, log)
    if "3" in setup.steps:
        step3(setup, runner, release_dir, project_dir, model, log)
    if {"4", "5", "6", "dpo_train"} & set(setup.steps):  # the pairs come from the scores, the rows from the pairs
        scores = step4(setup, runner, release_dir, project_dir, train_tasks, products, model, log)
        step5(setup, runner, release_dir, project_dir, train_tasks, history, model, scores, log)
        if "6" in setup.steps:
            step6(setup, runner, release_dir, model, log)
    if {"sft_train", "merge", "dpo_train"} & set(setup.steps):
        from devtools.parity.training import training_items

        training_items(setup, runner, release_dir, project_dir, model, log)
    if "eval" in setup.steps:
        evaluation(setup, runner, model, project_dir,
                   len(json.loads(tasks_file.read_text(encoding="utf-8"))["test"]), log)
    if "agent" in setup.steps:
        from devtools.parity.agent import agent_paths

        agent_paths(setup, runner, log)
    setup.facts["coverage"] = coverage(setup)
    return setup.results


class PumaCheck:
    """The `puma` check (module docstring). Its items pair the two sides step by step, each step's
    release command running beside the project's, so `run` holds them all."""

    def prepare(self, session: Session) -> tuple[PumaSetup, ReleaseRunner]:
        settings = session.settings
        setup = PumaSetup(data_dir=Path(settings.data_dir), work=session.work / "puma", repo_root=session.repo_root,
                          release_dir=Path(settings.release_dir), protocol_file=settings.protocol_file,
                          model_dir=Path(settings.puma_model) if settings.puma_model else None, limit=settings.limit,
                          seed=settings.seed, param_new_tokens=settings.puma_new_tokens,
                          timeout_s=settings.timeout_s, steps=settings.step_names)
        return setup, dataclasses.replace(session.runner, release_libs=settings.release_libs)

    def run(self, session: Session, prepared: tuple[PumaSetup, ReleaseRunner]) -> dict[str, Tally]:
        setup, runner = prepared
        return run_check(setup, runner, session.log)

    def compare(self, session: Session, prepared: tuple[PumaSetup, ReleaseRunner],
                results: dict[str, Tally]) -> Outcome:
        from devtools.parity.libraries import report as library_report, summary_line

        setup, runner = prepared
        libraries = library_report(runner, setup.work / "puma_run")
        return Outcome({"puma": report(setup)}, [*summary_lines(setup), summary_line(libraries)],
                       all_identical(results), {"libraries": libraries})


def summary_lines(setup: PumaSetup) -> list[str]:
    covered = setup.facts.get("coverage", {})
    lines = [f"puma coverage: {'; '.join(f'{what}: {json.dumps(value)}' for what, value in covered.items())}"]
    return lines + [tally.line(f"puma {label}") for label, tally in setup.results.items()]


def report(setup: PumaSetup) -> dict[str, Any]:
    return {"items": {label: tally.to_dict() for label, tally in setup.results.items()}, **setup.facts}


def all_identical(results: dict[str, Tally]) -> bool:
    return all(tally.all_identical for tally in results.values())
