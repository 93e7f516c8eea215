"""The `settings` items of the `puma` check: what a user's `puma run --recipe release` ran with,
step by step, against what the release's own scripts run with.

The release's side is read from the release, never typed here: each `PUMA/scripts/*.sh` gives its
launcher and flags (devtools/parity/release_scripts.py), and the script is run with them by the release
worker on the libraries of its time until what it would run with is known (its argparse namespace,
its `LoraConfig`, its trainer's arguments, its first generation's decoding;
devtools/parity/release/settings.py). The project's side is the records every step of the user's
command wrote (`training_arguments`, `lora`, `effective_decoding`, `settings`), and for the
training steps the launch `puma launch` plans on the release's GPUs (`PUMA.launch.plan_launch`
with the step's own settings parser: precision, DeepSpeed config, batch layout).

Items, per step: `settings [step]` (the run's values) and `documented defaults [step]` (each
setting's default as the step's settings class states it, which `--help` shows and a library
user gets). A value that differs is a difference unless it is a reading the project lists
(`readings` in PUMA/configs/release.yaml: where the release's scripts cannot run as shipped or
disagree with the paper, and the value the release recipe takes instead), reported as such.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from devtools.parity.compare import Tally
from devtools.parity.release_scripts import ScriptCall, release_scripts

# The decoding fields compared, as the library generated with them (after its defaults): every
# field either transformers release (4.45, 5.x) reads when decoding text.
SETTING_KEYS = ("max_new_tokens", "min_new_tokens", "min_length", "num_beams", "num_beam_groups",
                "num_return_sequences", "do_sample", "temperature", "top_k", "top_p", "min_p", "typical_p",
                "epsilon_cutoff", "eta_cutoff", "repetition_penalty", "encoder_repetition_penalty", "length_penalty",
                "no_repeat_ngram_size", "diversity_penalty", "bad_words_ids", "suppress_tokens",
                "begin_suppress_tokens", "renormalize_logits", "early_stopping", "use_cache", "eos_token_id")
SAMPLING_ONLY = ("temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff")
# The special tokens come from the tokenizer at run time (step 3's items compare them there).
TOKEN_KEYS = ("eos_token_id",)
TRAINING_KEYS = ("num_train_epochs", "learning_rate", "lr_scheduler_type", "warmup", "weight_decay", "adam_beta1",
                 "adam_beta2", "adam_epsilon", "max_grad_norm", "optim", "seed")
LORA_KEYS = ("r", "lora_alpha", "lora_dropout", "target_modules", "modules_to_save", "bias", "use_rslora", "use_dora",
             "init_lora_weights")
LAUNCH_KEYS = ("processes", "per_device_train_batch_size", "gradient_accumulation_steps", "global_batch_size",
               "precision", "deepspeed")


@dataclass(frozen=True)
class ReleaseRun:
    """One release script run by the worker for its settings: the .sh that starts it, where the
    worker stops it, and the project step its values are compared with."""

    sh: str
    stop: str
    step: str


RELEASE_RUNS = (ReleaseRun("pre_sft_param_data.sh", "args", "data"),
                ReleaseRun("finetune_function_param.sh", "trainer", "sft"),
                ReleaseRun("generate_function.sh", "generate", "generate_function"),
                ReleaseRun("generate_param_dpo.sh", "generate", "generate_param"),
                ReleaseRun("pre_dpo_data.sh", "args", "dpo_data"),
                ReleaseRun("dpo_llama.sh", "trainer", "dpo"))
STEP_ORDER = tuple(run.step for run in RELEASE_RUNS)
# The steps whose settings class states documented defaults (PUMA module, class, the recipe step
# whose section `puma STEP` reads).
SETTINGS_CLASSES = {"data": ("PUMA.data", "DataConfig", "data"), "sft": ("PUMA.sft", "SFTConfig", "sft"),
                    "generate_function": ("PUMA.generate", "GenerateConfig", "generate"),
                    "generate_param": ("PUMA.generate", "GenerateConfig", "generate"),
                    "dpo_data": ("PUMA.data", "DataConfig", "data"), "dpo": ("PUMA.dpo", "DPOStepConfig", "dpo")}


# --- normalising what either library generation holds ------------------------------------------------------------
def decoding_of(fields: dict[str, Any]) -> dict[str, Any]:
    """The decoding fields of a generation; greedy ones drop the fields only sampling reads."""
    settings = {key: fields.get(key) for key in SETTING_KEYS if key not in TOKEN_KEYS}
    if not settings["do_sample"]:
        settings.update({key: None for key in SAMPLING_ONLY})
    return settings


def plain_settings(config: Any) -> dict[str, Any]:
    """The decoding fields of a `GenerationConfig` as JSON values (the library may hold tensors)."""
    return {key: value.tolist() if hasattr(value, "tolist") else value
            for key in SETTING_KEYS for value in [getattr(config, key, None)]}


def warmup(arguments: dict[str, Any]) -> Any:
    """The warmup as a share of the optimizer steps (transformers 5 takes a share < 1 in
    `warmup_steps`; 4.45 had `warmup_ratio`), or `N steps`."""
    steps = arguments.get("warmup_steps") or 0
    if 0 < steps < 1:
        return float(steps)
    if steps >= 1:
        return f"{int(steps)} steps"
    return float(arguments.get("warmup_ratio") or 0.0)


def training_math(arguments: dict[str, Any]) -> dict[str, Any]:
    """The trainer arguments that decide what the optimizer computes (not where it writes or
    how often it logs)."""
    values = {key: arguments.get(key) for key in TRAINING_KEYS if key != "warmup"}
    values["num_train_epochs"] = float(values["num_train_epochs"])
    values["warmup"] = warmup(arguments)
    return values


def lora_math(lora: dict[str, Any] | None) -> dict[str, Any]:
    lora = lora or {}
    values = {key: lora.get(key) for key in LORA_KEYS}
    for key in ("target_modules", "modules_to_save"):
        value = values[key]
        values[key] = sorted(value) if isinstance(value, list) else sorted(value.split(",")) if value else []
    return values


def loss_types(value: Any) -> list[str]:
    """TRL 0.11 names one loss type, TRL 1.x lists them."""
    return list(value) if isinstance(value, list) else [value]


# --- the release's side ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReleaseInputs:
    """The files the release's scripts are run on for their settings (the check's own)."""

    work: Path
    model: Path  # the stand-in base model
    adapter: Path  # a LoRA adapter on it (test_llama.py loads one)
    param_data: Path  # the release's step-1 files
    function_data: Path
    function_file: Path  # instruction -> [function], the tool file test_llama.py reads in param mode


def _replacements(run: ReleaseRun, inputs: ReleaseInputs) -> dict[str, str]:
    """Each script's flags that name files or folders on the release's machine, pointed at this
    check's, and the device (its GPU, here the CPU); every other flag takes the .sh's value."""
    out = inputs.work / f"release_settings_{run.step}"
    if run.step in ("data", "dpo_data"):  # stopped once the flags are read: these files are never opened
        return {"--task_file": str(out / "tasks.json"), "--user_history_file": str(out / "history.json"),
                "--output_file": str(out / "out.json"), **({"--dpo_data_file": str(out / "scores.json")}
                                                           if run.step == "dpo_data" else {})}
    if run.step == "sft":
        return {"--data_path": str(inputs.param_data), "--function_data_path": str(inputs.function_data),
                "--output_dir": str(out), "--model_name": str(inputs.model)}
    if run.step == "dpo":
        return {"--data_path": str(dpo_pairs(inputs, out)), "--output_dir": str(out), "--model_name": str(inputs.model)}
    data = inputs.function_data if run.step == "generate_function" else inputs.param_data
    return {"--model_path": str(inputs.adapter), "--base_model": str(inputs.model), "--data_path": str(data),
            "--res_file": str(out / "res.json"), "--device": "cpu",  # the hardware, as fp16 is for training
            **({"--tool_file": str(inputs.function_file)} if run.step == "generate_param" else {})}


def dpo_pairs(inputs: ReleaseInputs, folder: Path) -> Path:
    """Two pairs from the release's step-1 parameter examples (dpo_llama.py loads its data before
    it builds the trainer; the pairs' text does not change a setting)."""
    folder.mkdir(parents=True, exist_ok=True)
    examples = json.loads(inputs.param_data.read_text(encoding="utf-8"))["train"][:2]
    pairs = [{"prompt": e["prompt"], "chosen": str(e["target"]), "rejected": "stop"} for e in examples]
    path = folder / "pairs.json"
    path.write_text(json.dumps({"train": pairs, "test": pairs}), encoding="utf-8")
    return path


def run_release_scripts(runner: Any, release_dir: Path, inputs: ReleaseInputs, hub: dict[str, str],
                        log: Callable[[str], None]) -> tuple[dict[str, ScriptCall], dict[str, dict[str, Any]]]:
    """Every RELEASE_RUNS script run with its .sh's flags until its settings are known; the
    scripts as read and, per step, what the worker recorded."""
    calls = release_scripts(release_dir)
    started = []
    for run in RELEASE_RUNS:
        call = calls[run.sh]
        out = inputs.work / f"release_settings_{run.step}.json"
        log_path = out.with_suffix(".log")
        argv = call.argv(_replacements(run, inputs))
        log(f"puma settings: the release's {call.script} with {run.sh}'s flags ...")
        started.append((run, out, log_path, runner.start("settings", log_path, hub=hub, script=f"PUMA/{call.script}",
                                                          release_argv=argv, stop=run.stop, out=out,
                                                          cwd=inputs.work)))
        runner.finish(started[-1][3], f"release {call.script} (settings)", log_path)
    recorded = {run.step: json.loads(out.read_text(encoding="utf-8")) for run, out, _, _ in started}
    return calls, recorded


def precision_of(hardware: dict[str, Any]) -> str:
    return "fp16" if hardware.get("fp16") else "bf16" if hardware.get("bf16") else "fp32"


def json_file(path: Path | None) -> Any:
    """A DeepSpeed config's content (None without one): compared by content, not by path."""
    return None if path is None else json.loads(path.read_text(encoding="utf-8"))


def release_values(calls: dict[str, ScriptCall], recorded: dict[str, dict[str, Any]], release_dir: Path
                   ) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Per step, the values the release's scripts run with; and, per step, what was read about them."""
    notes: dict[str, list[str]] = {}
    for run in RELEASE_RUNS:
        call = calls[run.sh]
        if call.stray:
            notes.setdefault(run.step, []).append(
                f"{call.name} passes stray argument(s) {list(call.stray)} (a backslash followed by a space): as "
                "shipped its argparse refuses them; compared without them")
    node = calls["finetune_function_param.sh"].processes
    values: dict[str, dict[str, Any]] = {}
    for run in RELEASE_RUNS:
        seen, call = recorded[run.step], calls[run.sh]
        args = seen["args"]
        if run.step in ("data", "dpo_data"):
            values[run.step] = {"mem_token_length": args["mem_token_length"], "memory_length": args["mem_length"]}
        elif run.step in ("sft", "dpo"):
            processes = call.processes
            if processes is None:
                processes = node
                notes.setdefault(run.step, []).append(
                    f"{call.name}: `{call.launcher}` with no --include runs on every GPU of the node; taken as the "
                    f"{node} that finetune_function_param.sh names (--include), the same node")
            hardware = seen["requested_hardware"]
            layout = {"processes": processes, "per_device_train_batch_size": args["train_batch_size"],
                      "gradient_accumulation_steps": args["gradient_accumulation_steps"],
                      "global_batch_size": processes * args["train_batch_size"] * args["gradient_accumulation_steps"],
                      "precision": precision_of(hardware),
                      "deepspeed": json_file(release_dir / "PUMA" / hardware["deepspeed"]) if hardware["deepspeed"]
                      else None}
            arguments = seen["training_arguments"]
            step_values = {**layout, **training_math(arguments), **lora_math(seen.get("lora"))}
            if run.step == "sft":
                step_values.update(max_length=args["source_length"], train_on=args["train_on"],
                                   loss_temperature=float(seen["trainer"]["temperature"]))
            else:
                step_values.update(beta=arguments["beta"], max_length=arguments["max_length"],
                                   max_prompt_length=arguments["max_prompt_length"],
                                   loss_type=loss_types(arguments["loss_type"]),
                                   label_smoothing=arguments["label_smoothing"])
            values[run.step] = step_values
        else:
            step_values = {**decoding_of(seen["generation"]), "dtype": seen["model_dtype"]}
            if run.step == "generate_param":
                step_values["mem_token_length"] = args["memory_token_length"]
            values[run.step] = step_values
    return values, notes


# --- the project's side ------------------------------------------------------------------------------------------
RECORDS = {"data": "data/param_train.puma_run.json", "sft": "sft/puma_run.json",
           "generate_function": "function_train.puma_run.json",
           "generate_param": "param_candidates_train.puma_run.json", "dpo_data": "data/param_train.puma_run.json",
           "dpo": "dpo/puma_run.json"}


def read_records(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The records the user's command wrote, per compared step."""
    records = {}
    for step, name in RECORDS.items():
        path = run_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the puma run wrote no record for {step}")
        records[step] = json.loads(path.read_text(encoding="utf-8"))
    return records


def project_launch(step: str, processes: int) -> dict[str, Any]:
    """What `puma launch STEP` runs with on `processes` GPUs under the release recipe: the precision
    and DeepSpeed config it passes, and the batch the step's own settings make of them."""
    from PUMA.cli import parse_step
    from PUMA.launch import plan_launch
    from PUMA.steps import get_step

    plan = plan_launch(step, {"RECIPE": "release"}, gpus=processes, has_deepspeed=lambda _: True)
    row = get_step(step)
    config = parse_step(row.settings_class(), ["--recipe", "release", *plan.train_args], f"python -m {row.module}",
                        None, step)
    layout = config.batch_layout(processes)
    deepspeed = Path(config.deepspeed) if config.deepspeed else None
    if deepspeed is not None and not deepspeed.is_absolute():
        deepspeed = Path(__file__).resolve().parents[2] / deepspeed  # the launcher's paths are the repository's
    return {"processes": processes, "per_device_train_batch_size": layout.per_device_train_batch_size,
            "gradient_accumulation_steps": layout.gradient_accumulation_steps,
            "global_batch_size": layout.global_batch_size,
            "precision": "fp16" if config.fp16 else "bf16" if config.bf16 else "fp32",
            "deepspeed": json_file(deepspeed)}


def project_values(records: dict[str, dict[str, Any]], processes: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per step, the values the user's command ran with (its records), the training steps' launch
    on the release's number of GPUs (`processes`)."""
    from PUMA.generate import GenerateConfig, dtype_name

    values: dict[str, dict[str, Any]] = {}
    data = records["data"]["settings"]
    for step in ("data", "dpo_data"):  # step 5's prompts are step 1's, memory and all
        values[step] = {"mem_token_length": data["mem_token_length"], "memory_length": data["memory_length"]}
    for step in ("sft", "dpo"):
        record = records[step]
        step_values = {**project_launch(step, processes[step]), **training_math(record["training_arguments"]),
                       **lora_math(record["lora"])}
        settings, arguments = record["settings"], record["training_arguments"]
        if step == "sft":
            step_values.update(max_length=settings["max_length"], train_on=settings["train_on"],
                               loss_temperature=1.0)  # the project's SFT loss never scales the logits
        else:
            step_values.update(beta=arguments["beta"], max_length=settings["max_length"],
                               max_prompt_length=settings["max_prompt_length"],
                               loss_type=loss_types(arguments["loss_type"]),
                               label_smoothing=arguments["label_smoothing"])
        values[step] = step_values
    fields = {f.name for f in dataclasses.fields(GenerateConfig)}
    for step in ("generate_function", "generate_param"):
        record = records[step]
        config = GenerateConfig(**{k: v for k, v in record["settings"].items() if k in fields})
        step_values = {**decoding_of(record["effective_decoding"]), "dtype": dtype_name(config, "cuda")}
        if step == "generate_param":
            step_values["mem_token_length"] = record["settings"]["mem_token_length"]
        values[step] = step_values
    return values


def documented_defaults(processes: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per step, each compared value as the step's settings class states it by default (a value
    a default cannot state, such as an optimizer the trainer picks, is left out)."""
    import importlib

    from PUMA.generate import GenerateConfig, decoding_settings, dtype_name
    from PUMA.modeling import decoding_config, effective_decoding

    values: dict[str, dict[str, Any]] = {}
    for step, (module, name, _) in SETTINGS_CLASSES.items():
        cls = getattr(importlib.import_module(module), name)
        defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        if step in ("data", "dpo_data"):
            values[step] = {"mem_token_length": defaults["mem_token_length"],
                            "memory_length": defaults["memory_length"]}
        elif step in ("sft", "dpo"):
            step_values = {"num_train_epochs": float(defaults["num_train_epochs"]),
                           "learning_rate": defaults["learning_rate"], "warmup": float(defaults["warmup_ratio"]),
                           "seed": defaults["seed"], "r": defaults["lora_r"], "lora_alpha": defaults["lora_alpha"],
                           "lora_dropout": defaults["lora_dropout"],
                           **{key: sorted(defaults[field].split(",")) for key, field in
                              (("target_modules", "lora_target_modules"), ("modules_to_save", "modules_to_save"))},
                           "max_length": defaults["max_length"]}
            step_values.update({"train_on": defaults["train_on"]} if step == "sft" else
                               {"beta": defaults["beta"], "max_prompt_length": defaults["max_prompt_length"]})
            values[step] = step_values
        else:
            config = GenerateConfig(mode="function" if step == "generate_function" else "param")
            try:
                settings = decoding_settings(config)
                decoding = decoding_of(effective_decoding(decoding_config(
                    None, decoding="release" if config.prompts == "release" else "project", **settings)))
            except ValueError as exc:  # the defaults contradict each other: reported, not raised
                decoding = {"refused": str(exc)}
            values[step] = {**decoding, "dtype": dtype_name(config, "cuda")}
            if step == "generate_param":
                values[step]["mem_token_length"] = defaults["mem_token_length"]
    return values


# --- the comparison -------------------------------------------------------------------------------------------------
def listed_readings(release_yaml: Path) -> list[dict[str, Any]]:
    """The readings the project lists (PUMA/configs/release.yaml `readings`): a setting where the
    release's scripts cannot run as shipped or disagree with the paper, and the value the
    release recipe takes."""
    import yaml

    return list(yaml.safe_load(release_yaml.read_text(encoding="utf-8")).get("readings") or [])


# release.yaml's `readings` name PUMA's steps; the compared items name the release's runs
READING_STEPS = {"generate": "generate_param"}


def reading_for(readings: list[dict[str, Any]], step: str, key: str, project: Any) -> str | None:
    """The listed reading that accounts for `project`'s value of `key` at `step`, if any."""
    for reading in readings:
        steps = {READING_STEPS.get(s, s) for s in reading["steps"]}
        if step in steps and reading["setting"] == key and reading["release"] == project:
            return " ".join(str(reading["source"]).split())
    return None


def compare_values(release: dict[str, dict[str, Any]], project: dict[str, dict[str, Any]],
                   readings: list[dict[str, Any]], label: str, stated_only: bool = False) -> dict[str, Tally]:
    """One item per step: every value the release states, against the project's (`stated_only`:
    only those the project states, for defaults, which cannot state what the trainer picks)."""
    items = {}
    for step in STEP_ORDER:
        tally = Tally()
        theirs, ours = release.get(step, {}), project.get(step, {})
        for key in theirs:
            if stated_only and key not in ours:
                continue
            a, b = theirs[key], ours.get(key, "<not stated>")
            if a == b:
                tally.add(key, True)
                continue
            reading = reading_for(readings, step, key, b)
            if reading:
                tally.add(key, True)
                tally.facts.setdefault("listed readings", []).append(
                    {"setting": key, "release_script": a, "project": b, "reading": reading})
                continue
            tally.add(key, False, {"setting": key, "release": a, "project": b})
        if "refused" in ours:
            tally.add("defaults", False, {"refused": ours["refused"]})
        tally.facts["compared"] = tally.compared
        items[f"{label} [{step}]"] = tally
    return items


def settings_items(runner: Any, release_dir: Path, inputs: ReleaseInputs, run_dir: Path, repo_root: Path,
                   hub: dict[str, str], log: Callable[[str], None]) -> tuple[dict[str, Tally], dict[str, Any]]:
    """The settings and documented-defaults items; and what the report keeps beside them (both
    sides' values, the notes on reading the release's scripts)."""
    calls, recorded = run_release_scripts(runner, release_dir, inputs, hub, log)
    release, notes = release_values(calls, recorded, release_dir)
    processes = {step: release[step]["processes"] for step in ("sft", "dpo")}
    project = project_values(read_records(run_dir), processes)
    defaults = documented_defaults(processes)
    readings = listed_readings(repo_root / "PUMA" / "configs" / "release.yaml")
    items = {**compare_values(release, project, readings, "settings"),
             **compare_values(release, defaults, readings, "documented defaults", stated_only=True)}
    for label, tally in items.items():
        for note in notes.get(label.split("[", 1)[1].rstrip("]"), []):
            tally.note(note)
    return items, {"release": release, "project": project, "documented_defaults": defaults, "notes": notes,
                   "release_scripts": {name: dataclasses.asdict(call) for name, call in calls.items()}}
