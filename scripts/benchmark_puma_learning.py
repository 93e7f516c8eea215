"""Does PUMA train a better agent? Each recipe's model at each stage, scored on a whole test split.

For each recipe (`--recipes`, default both) on `--data_dir` (default synthetic `small`) with a
real pretrained model (`--model`, prepared offline by `puma model prepare` when `--model_path`
is not given), the test split is scored by step 7 (the puma agent's run on generated function
and parameter files, a validated result file each) for:

    base     the base model with the PUMA prompts (its own function predictions)
    sft      after step 2 (the LoRA SFT merged), functions and parameters from it
    dpo      after steps 3-6 (candidates, scores, pairs and DPO as the recipe makes them: `puma
             run`'s own commands), the functions of the SFT model as step 7 takes them
    grpo     after GRPO (`PUMA.grpo`) from the merged SFT model, the SFT model's functions
    control  (`--control_recipe` only) SFT on labels shuffled across examples (function labels
             among the function examples, parameter labels among the parameter examples)

Per stage: Function Acc and Result Acc per task type and overall with 95 % bootstrap intervals
(`PersonalWAB.metrics.bootstrap_interval` over tasks); paired comparisons as `pwab leaderboard
compare` makes them (sft vs base, dpo vs sft, grpo vs sft, control vs sft, improved vs release at
each stage; improved vs release is compared with `--force`, as the improved agent's files are
labelled custom); why a stage moved or not (the SFT loss curve, the candidates' score spread and
ties, the pairs, DPO's reward margins, GRPO's reward per step, each stage's function predictions
by task type); and every stage's wall time with the load average of the machine while it ran.

Two configurations. The default (CPU) is sized to finish, both recipes and every stage and the
control, within 90 minutes on 2 quiet cores: a sample of `--train_tasks` train tasks, a
`--mem_token_length` memory cut, `--candidates` beams of `--candidate_tokens` tokens, short
epochs and a common global batch (`--sft_global_batch`, `--dpo_global_batch`), so a few hundred
examples make enough optimizer steps under both recipes. `--full` takes the paper's settings
(the whole train split, the 768-token memory, 10 beams of 256 tokens, each recipe's own epochs,
batches and lengths) for a GPU; a setting given on the command line or in `--config` still wins.

    python scripts/benchmark_puma_learning.py                     # CPU configuration
    python scripts/benchmark_puma_learning.py --full --work_dir data/puma_learning_full \\
        --out data/puma_learning_full/puma_learning.json --doc ""   # the paper's settings, on a GPU

Outputs: every stage's files under `--work_dir` (a stage whose outputs are there is not run again
unless `--fresh`: an interrupted run continues), the settings as YAML beside `--out` (same name,
`.yaml`), the figures as JSON (`--out`), the tables as markdown (`--out` with `.md`), and, with
`--doc`, the tables written into that file between its `puma-learning` markers. A partial run
(`--recipes` or `--stages` narrowed, or a stage failed) is labelled partial in all of them.
"""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.settings import given, parse, resolved, setting  # noqa: E402
from scripts.doc_block import write_block  # noqa: E402

STAGES = ("base", "sft", "dpo", "grpo", "control")
TYPES = ("search", "recommend", "review")
DOC_BLOCK = ("puma-learning", "scripts/benchmark_puma_learning.py")  # its markers in --doc (doc_block.py)


@dataclass
class LearningSettings:
    """What the benchmark runs (CPU configuration by default; `--full`: the paper's settings)."""

    full: bool = setting(False, "the paper's settings for a GPU (whole train split, 768 memory tokens, 10 beams of "
                         "256 tokens, each recipe's own epochs and batches); flags given still win")
    data_dir: str = setting("data/synthetic/small", "benchmark data (made and built when it is the synthetic `small` "
                            "and absent)")
    model: str = setting("smollm2-135m", "the packaged model `puma model prepare` makes (when --model_path is not "
                         "given), into --work_dir/model")
    model_path: str | None = setting(None, "a model folder to start from instead of --model")
    work_dir: str = setting("data/puma_learning", "folder for every stage's outputs")
    out: str = setting("docs/results/puma_learning.json", "JSON file of the figures (its settings beside it as "
                       ".yaml, its tables as .md)")
    doc: str = setting("docs/puma.md", "markdown file whose puma-learning block gets the tables; empty: none")
    recipes: str = setting("release,improved", "comma-separated recipes to run")
    stages: str = setting(",".join(STAGES), "comma-separated stages to run (base, sft, dpo, grpo, control)")
    control_recipe: str = setting("improved", "the recipe whose SFT is repeated on shuffled labels")
    fresh: bool = setting(False, "run every stage again (default: a stage whose outputs exist is kept)")
    train_tasks: int = setting(72, "train tasks sampled for steps 1-6 and GRPO (seed 0); -1: the whole split")
    mem_token_length: int = setting(128, "tokens the memory of a parameter prompt is cut to (the paper: 256, 512, "
                                    "768)")
    sft_epochs: float = setting(3.0, "SFT epochs")
    sft_learning_rate: float = setting(3e-4, "SFT peak learning rate (both recipes' value)")
    sft_global_batch: int = setting(4, "SFT examples per optimizer step, both recipes; 0: each recipe's own "
                                    "(release 64, improved 16 per GPU)")
    sft_max_length: int = setting(352, "SFT example length (release: also the length every example is padded to)")
    candidates: int = setting(4, "step 3: beams (= candidates) per train instruction, sampled at temperature 1.5")
    candidate_tokens: int = setting(64, "step 3: most new tokens of a candidate")
    dpo_epochs: float = setting(1.0, "DPO epochs")
    dpo_learning_rate: float = setting(5e-5, "DPO peak learning rate (both recipes' value)")
    dpo_global_batch: int = setting(8, "DPO pairs per optimizer step, both recipes; 0: each recipe's own")
    dpo_max_length: int = setting(320, "DPO: tokens of prompt + the longer response (step 5 fits the improved "
                                  "recipe's prompts to it)")
    dpo_max_prompt_length: int = setting(256, "DPO, release recipe: the prompt tokens an over-long pair keeps")
    grpo_steps: int = setting(6, "GRPO optimizer steps")
    grpo_prompts: int = setting(2, "GRPO prompts per optimizer step")
    grpo_generations: int = setting(4, "GRPO samples per prompt")
    grpo_learning_rate: float = setting(2e-5, "GRPO peak learning rate")
    grpo_tokens: int = setting(64, "GRPO: most new tokens of a sample")
    test_tokens: int = setting(96, "step 7: most new tokens of a test parameter (greedy)")
    batch_size: int = setting(48, "prompts per generate call (on 2 CPU cores 48 is 23% faster than 16, with the same "
                                  "greedy outputs); 0: as many as fit the GPU")
    seed: int = setting(0, "seed of the label shuffle of the control")


FULL: dict[str, Any] = {
    "train_tasks": -1, "mem_token_length": 768, "sft_epochs": 10.0, "sft_global_batch": 0, "sft_max_length": 1280,
    "candidates": 10, "candidate_tokens": 256, "dpo_epochs": 5.0, "dpo_global_batch": 0, "dpo_max_length": 1024,
    "dpo_max_prompt_length": 768, "grpo_steps": 200, "grpo_prompts": 4, "grpo_generations": 8, "grpo_tokens": 256,
    "test_tokens": 256, "batch_size": 0,
}


def with_full_preset(settings: LearningSettings, argv: list[str]) -> LearningSettings:
    """`--full`: the paper's values for every setting the command line and --config leave unset."""
    if not settings.full:
        return settings
    chosen = {item.name for item in fields(LearningSettings)
              if any(arg == f"--{item.name}" or arg.startswith(f"--{item.name}=") for arg in argv)}
    config = given(argv, "--config")
    if config:
        import yaml

        chosen |= set((yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}).keys())
    return replace(settings, **{key: value for key, value in FULL.items() if key not in chosen})


# ------------------------------------------------------------------------------------------------ running


class LoadSampler:
    """The machine's 1-minute load average, sampled every few seconds while a stage runs."""

    def __init__(self, every_s: float = 5.0):
        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def now() -> float:
        return float(Path("/proc/loadavg").read_text().split()[0])

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.now())
            self._stop.wait(self.every_s)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self.now())

    def summary(self) -> dict[str, float]:
        return {"load_mean": round(sum(self.samples) / len(self.samples), 2), "load_max": max(self.samples)}


class Runner:
    """Runs each stage's commands once (a stage whose record exists is kept unless `fresh`), and
    keeps every stage's time and load in `work_dir/stages.json`."""

    def __init__(self, work: Path, fresh: bool, settings: dict[str, Any]):
        self.work = work
        self.path = work / "stages.json"
        self.settings = {k: v for k, v in settings.items() if k not in ("out", "doc", "fresh", "recipes", "stages")}
        earlier = json.loads(self.path.read_text()) if self.path.is_file() and not fresh else {}
        if earlier and earlier.get("settings") != self.settings:
            changed = sorted(k for k in self.settings if (earlier.get("settings") or {}).get(k) != self.settings[k])
            raise ValueError(f"--work_dir {work}: its stages were made with other settings ({', '.join(changed)}); "
                             "pass --fresh to run them again, or give another --work_dir")
        self.stages: dict[str, Any] = earlier.get("stages", {})
        self.failed: list[str] = []

    def save(self) -> None:
        self.path.write_text(json.dumps({"settings": self.settings, "stages": self.stages}, indent=1))

    def run(self, name: str, commands: list[list[str]] | Any, done: Path) -> bool:
        """Run `commands` (argv lists, or a callable making them when the stage starts) unless
        `done` exists from an earlier run; False when a command failed."""
        if name in self.stages and done.exists():
            print(f"== {name}: kept from the earlier run ({self.stages[name]['seconds']:.0f} s)", flush=True)
            return True
        start, cpu = time.monotonic(), children_cpu_seconds()
        print(f"== {name}: starting (load {LoadSampler.now():.2f})", flush=True)
        with LoadSampler() as load:
            for argv in commands() if callable(commands) else commands:
                print(f"   $ {' '.join(map(str, argv))}", flush=True)
                status = subprocess.run([str(a) for a in argv], cwd=REPO, env=step_environment()).returncode
                if status:
                    print(f"== {name}: failed with exit status {status}", flush=True)
                    self.failed.append(name)
                    return False
        seconds = time.monotonic() - start
        self.stages[name] = {"seconds": round(seconds, 1), "cpu_seconds": round(children_cpu_seconds() - cpu, 1),
                             **load.summary(),
                             "finished": datetime.now(UTC).isoformat(timespec="seconds")}
        self.save()
        print(f"== {name}: {seconds:.0f} s (mean load {self.stages[name]['load_mean']})", flush=True)
        return True


def children_cpu_seconds() -> float:
    """CPU time (user + system) of the finished child processes: with the wall time and the load,
    what a stage would take on a quiet machine can be told from what it took on a busy one."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def step_environment() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "TRANSFORMERS_VERBOSITY": "error", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "PYTHONWARNINGS": "ignore"}


def pipeline_settings(s: LearningSettings, recipe: str, model_path: str) -> Any:
    """`puma run`'s settings for one recipe: the sections every stage's commands come from."""
    from PUMA.pipeline import pipeline_settings

    sft: dict[str, Any] = {"num_train_epochs": s.sft_epochs, "learning_rate": s.sft_learning_rate,
                           "max_length": s.sft_max_length, "save_strategy": "no", "logging_steps": 1}
    dpo: dict[str, Any] = {"num_train_epochs": s.dpo_epochs, "learning_rate": s.dpo_learning_rate,
                           "max_length": s.dpo_max_length, "max_prompt_length": s.dpo_max_prompt_length,
                           "save_strategy": "no", "logging_steps": 1}
    if s.sft_global_batch:
        sft["global_batch_size"] = s.sft_global_batch
    if s.dpo_global_batch:
        dpo["global_batch_size"] = s.dpo_global_batch
    return pipeline_settings(
        {"data": {"mem_token_length": s.mem_token_length, "train_tasks": s.train_tasks}, "sft": sft,
         "generate_function": {"batch_size": s.batch_size},
         "generate_param": {"num_beams": s.candidates, "num_return_sequences": s.candidates, "do_sample": True,
                            "temperature": 1.5, "max_new_tokens": s.candidate_tokens, "batch_size": s.batch_size},
         "dpo_data": {"max_length": s.dpo_max_length}, "dpo": dpo,
         "generate_test": {"max_new_tokens": s.test_tokens, "batch_size": s.batch_size}},
        recipe=recipe, data_dir=s.data_dir, model_path=model_path, work_dir=str(Path(s.work_dir) / recipe))


def argv_of(command: Any) -> list[str]:
    return [sys.executable, *map(str, command.args)]


def step_commands(settings: Any, step: int, titles: tuple[str, ...] | None = None) -> list[list[str]]:
    from PUMA.pipeline import commands

    return [argv_of(c) for c in commands(settings, step) if titles is None or c.title.split(" ")[0] in titles]


def evaluation(settings: Any, model: Path, functions: Path, folder: Path) -> list[list[str]]:
    """Step 7 of `model` with `functions` into `folder` (param_test.json, result.json)."""
    from PUMA.pipeline import generate_test_commands

    return [argv_of(c) for c in generate_test_commands(settings, model, functions, folder)]


def function_commands(settings: Any, model: Path | str, out: Path, data: Path) -> list[str]:
    """generate_function on the test split for `model` (the base model, or the control's)."""
    from PUMA.generate import GenerateConfig
    from PUMA.pipeline import command_line

    return [sys.executable, "-m", "PUMA.generate", *command_line(GenerateConfig, {
        "recipe": settings.recipe, "mode": "function", "model_path": model, "data_file": data / "function_test.json",
        "output_file": out, **settings.section("generate_function")})]


def grpo_commands(s: LearningSettings, settings: Any, work: Path) -> list[str]:
    from PUMA.pipeline import flags

    batch = s.grpo_prompts * s.grpo_generations
    return [sys.executable, "-m", "PUMA.grpo", *flags({
        "recipe": settings.recipe, "model_path": work / "sft_merged", "data_file": work / "data" / "param_train.json",
        "data_dir": s.data_dir, "out": work / "grpo", "max_steps": s.grpo_steps, "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": 1, "num_generations": s.grpo_generations, "max_completion_length": s.grpo_tokens,
        "max_prompt_length": s.mem_token_length + 256, "learning_rate": s.grpo_learning_rate, "temperature": 1.0,
        "save_strategy": "no", "generation_backend": "auto", "seed": 42})]


def shuffled_labels(source: Path, target: Path, seed: int) -> None:
    """The control's data: each file's labels permuted across its examples (records copied, the
    shuffle stated in them)."""
    target.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for name in ("function_train.json", "param_train.json"):
        examples = json.loads((source / name).read_text(encoding="utf-8"))
        labels = [e["label"] for e in examples]
        rng.shuffle(labels)
        (target / name).write_text(json.dumps([{**e, "label": label} for e, label in zip(examples, labels)],
                                              ensure_ascii=False, indent=1), encoding="utf-8")
        record_name = name.removesuffix(".json") + ".puma_run.json"
        record = json.loads((source / record_name).read_text(encoding="utf-8"))
        record["negative_control"] = f"labels shuffled across the examples of {source / name} (seed {seed})"
        (target / record_name).write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
    for name in ("function_test.json", "param_test.json"):
        for suffix in ("", ".puma_run"):
            file = name.removesuffix(".json") + suffix + ".json"
            (target / file).write_text((source / file).read_text(encoding="utf-8"), encoding="utf-8")


def control_commands(settings: Any, work: Path) -> list[list[str]]:
    """SFT + merge on the shuffled data (the recipe's SFT section), the test functions, step 7."""
    from PUMA.pipeline import commands

    control = replace(settings, work_dir=str(work / "control"))
    sft = [argv_of(c) for c in commands(control, 2)]
    return [*sft, function_commands(control, work / "control" / "sft_merged", work / "control" / "function_test.json",
                                    work / "control" / "data"),
            *evaluation(control, work / "control" / "sft_merged", work / "control" / "function_test.json",
                        work / "control" / "eval")]


def ensure_data(s: LearningSettings) -> None:
    """The synthetic `small` data and its artefacts (search index, recommender, PUMA's relevance
    embeddings), made once when the folder is the default and absent."""
    data = Path(s.data_dir)
    if not (data / "user_instructions.json").is_file():
        if data != Path("data/synthetic/small"):
            raise ValueError(f"--data_dir {data}: no user_instructions.json there")
        subprocess.run([sys.executable, "-m", "PersonalWAB.data", "synthetic", "--scale", "small", "--seed", "0",
                        "--out", str(data)], cwd=REPO, check=True)
    subprocess.run([sys.executable, "-m", "PersonalWAB.build", "--data_dir", str(data), "--puma_embeddings"],
                   cwd=REPO, check=True, env=step_environment())


def ensure_model(s: LearningSettings) -> str:
    if s.model_path:
        return s.model_path
    out = Path(s.work_dir) / "model"
    subprocess.run([sys.executable, "-m", "PUMA", "model", "prepare", s.model, "--out", str(out)], cwd=REPO,
                   check=True, env=step_environment())
    return str(out)


def run_recipe(s: LearningSettings, runner: Runner, recipe: str, model_path: str, stages: list[str]) -> None:
    settings = pipeline_settings(s, recipe, model_path)
    work = Path(settings.work_dir)
    (work).mkdir(parents=True, exist_ok=True)
    from PUMA.pipeline import RESULT_NAME, outputs

    written = outputs(work)  # each call's output, by its title
    step = f"{recipe}:"
    if not runner.run(f"{step}data", step_commands(settings, 1), written["data"] / "param_test.json"):
        return
    if "base" in stages:
        base = work / "eval" / "base"
        runner.run(f"{step}base", lambda: [function_commands(settings, model_path, base / "function_test.json",
                                                              written["data"]),
                                           *evaluation(settings, Path(model_path), base / "function_test.json", base)],
                   base / "result.json")
    if not ({"sft", "dpo", "grpo", "control"} & set(stages)):
        return
    if not runner.run(f"{step}sft", step_commands(settings, 2), written["merge"] / "config.json"):
        return
    if not runner.run(f"{step}functions", step_commands(settings, 3, ("generate_function",)),
                      written["generate_function (test)"]):
        return
    if "sft" in stages:
        runner.run(f"{step}sft_eval", lambda: evaluation(settings, written["merge"],
                                                         written["generate_function (test)"], work / "eval" / "sft"),
                   work / "eval" / "sft" / "result.json")
    if "dpo" in stages:
        ok = (runner.run(f"{step}candidates", lambda: step_commands(settings, 3, ("generate_param",)),
                         written["generate_param"])
              and runner.run(f"{step}score", lambda: step_commands(settings, 4), written["score"])
              and runner.run(f"{step}dpo_data", lambda: step_commands(settings, 5), written["dpo_data"])
              and runner.run(f"{step}dpo", lambda: step_commands(settings, 6), written["dpo"] / "puma_run.json"))
        if ok:
            runner.run(f"{step}dpo_eval", lambda: step_commands(settings, 7), work / RESULT_NAME)
    grpo = work / "grpo" / "adapter_config.json"
    if "grpo" in stages and runner.run(f"{step}grpo", [grpo_commands(s, settings, work)], grpo):
        runner.run(f"{step}grpo_eval", lambda: evaluation(settings, work / "grpo", written["generate_function (test)"],
                                                              work / "eval" / "grpo"),
                       work / "eval" / "grpo" / "result.json")
    if "control" in stages and recipe == s.control_recipe:
        shuffled_labels(written["data"], work / "control" / "data", s.seed)
        runner.run(f"{step}control", lambda: control_commands(settings, work),
                   work / "control" / "eval" / "result.json")


# ------------------------------------------------------------------------------------------------ figures


def result_file(work: Path, recipe: str, stage: str) -> Path:
    folder = work / recipe
    return {"base": folder / "eval" / "base" / "result.json", "sft": folder / "eval" / "sft" / "result.json",
            "dpo": folder / "result_puma_singleturn.json", "grpo": folder / "eval" / "grpo" / "result.json",
            "control": folder / "control" / "eval" / "result.json"}[stage]


def scores_of(path: Path) -> dict[str, Any]:
    """Per type and overall: tasks, Function Acc and Result Acc with 95 % bootstrap intervals."""
    from PersonalWAB.leaderboard.compare import load_run
    from PersonalWAB.metrics import bootstrap_interval, task_score

    per_type: dict[str, list[tuple[float, float]]] = {}
    for record in load_run(path).records.values():
        per_type.setdefault(str(record["info"]["task"]["type"]), []).append(
            task_score(record["action_acc"], record["res_acc"]))
    per_type["overall"] = [score for t in TYPES for score in per_type.get(t, [])]
    figures = {}
    for group, pairs in per_type.items():
        if not pairs:
            continue
        entry: dict[str, Any] = {"tasks": len(pairs)}
        for index, metric in enumerate(("function_acc", "result_acc")):
            values = [pair[index] for pair in pairs]
            low, high = bootstrap_interval(values)
            entry[metric] = {"mean": round(sum(values) / len(values), 4), "low": round(low, 4), "high": round(high, 4)}
        figures[group] = entry
    return figures


def comparison(baseline: Path, other: Path, force: bool = False) -> dict[str, Any]:
    """`pwab leaderboard compare BASELINE OTHER`'s figures (and its markdown) for the overall
    and per-type Function Acc and Result Acc."""
    from PersonalWAB.leaderboard.compare import compare_files, render_markdown

    (result,) = compare_files([baseline, other], force=force)
    groups = {}
    for group in result.groups:
        groups[group.name] = {row.label: {"baseline": round(row.baseline, 4), "other": round(row.other, 4),
                                          "difference": round(row.difference, 4), "low": round(row.low, 4),
                                          "high": round(row.high, 4),
                                          "p": None if row.p_value is None else round(row.p_value, 4),
                                          "verdict": row.verdict}
                              for row in group.metrics if row.label in ("Function Acc", "Result Acc")}
    return {"baseline": str(baseline), "other": str(other), "forced": result.forced, "matched": result.matched,
            "groups": groups, "markdown": render_markdown([result])}


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def loss_curve(history: list[dict[str, Any]] | None, key: str = "loss") -> dict[str, Any] | None:
    values = [entry[key] for entry in history or [] if key in entry]
    if not values:
        return None
    tenth = max(len(values) // 10, 1)
    return {"steps": len(values), "first": round(values[0], 4), "last": round(values[-1], 4),
            "mean_first_tenth": round(sum(values[:tenth]) / tenth, 4),
            "mean_last_tenth": round(sum(values[-tenth:]) / tenth, 4), "min": round(min(values), 4)}


def function_predictions(path: Path, data: Path) -> dict[str, dict[str, int]] | None:
    """For each task type, how often each function output (or `other`) was predicted."""
    from PersonalWAB.data.schema import TASK_FUNCTIONS

    outputs, examples = read_json(path), read_json(data / "function_test.json")
    if outputs is None or examples is None:
        return None
    table: dict[str, dict[str, int]] = {}
    for example in examples:
        output = outputs.get(example["instruction"], [""])
        text = (output[0] if isinstance(output, list) and output else str(output)).strip()
        name = text if text in TASK_FUNCTIONS else "other"
        row = table.setdefault(example["type"], {})
        row[name] = row.get(name, 0) + 1
    return table


def diagnostics(work: Path, recipe: str) -> dict[str, Any]:
    """Why the stages moved or not: loss curves, candidate score spread and ties, pairs, DPO
    reward margins, GRPO rewards, function predictions."""
    folder = work / recipe
    found: dict[str, Any] = {}
    sft = read_json(folder / "sft" / "puma_run.json")
    if sft:
        found["sft"] = {"optimizer_steps": sft.get("optimizer_steps"), "train_loss": sft.get("train_loss"),
                        "loss": loss_curve(sft.get("loss_history")), "global_batch_size": sft.get("global_batch_size"),
                        "trainable_parameters": sft.get("trainable_parameters")}
    scores = read_json(folder / "param_candidates_train_scores.json")
    if scores:
        spreads = [max(v.values()) - min(v.values()) for v in scores.values() if v]
        found["candidates"] = {
            "instructions": len(scores), "mean_candidates": round(sum(map(len, scores.values())) / len(scores), 2),
            "all_scores_equal": sum(1 for v in scores.values() if len(set(v.values())) <= 1),
            "all_scores_zero": sum(1 for v in scores.values() if not any(v.values())),
            "mean_best": round(sum(max(v.values()) for v in scores.values() if v) / len(scores), 4),
            "mean_spread": round(sum(spreads) / max(len(spreads), 1), 4)}
    pairs = read_json(folder / "dpo_train.json")
    if pairs is not None:
        found["pairs"] = {"pairs": len(pairs),
                          "ties": sum(1 for p in pairs if p["chosen_score"] == p["rejected_score"]),
                          "same_text": sum(1 for p in pairs if p["chosen"] == p["rejected"]),
                          "mean_score_gap": round(sum(p["chosen_score"] - p["rejected_score"] for p in pairs)
                                                  / max(len(pairs), 1), 4)}
    dpo = read_json(folder / "dpo" / "puma_run.json")
    if dpo:
        history = dpo.get("loss_history")
        found["dpo"] = {"optimizer_steps": dpo.get("optimizer_steps"), "loss": loss_curve(history),
                        "reward_margin": loss_curve(history, "margin"),
                        "reward_accuracy": loss_curve(history, "reward acc")}
    log = folder / "grpo" / "grpo_log.jsonl"
    if log.is_file():
        entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        found["grpo"] = {"reward": loss_curve(entries, "rewards/result_acc/mean"),
                         "steps_without_spread": sum(1 for e in entries if not e.get("rewards/result_acc/std"))}
    found["function_predictions"] = {
        stage: function_predictions(path, folder / "data") for stage, path in (
            ("base", folder / "eval" / "base" / "function_test.json"), ("sft", folder / "function_test.json"),
            ("control", folder / "control" / "function_test.json")) if path.is_file()}
    return found


def collect(s: LearningSettings, runner: Runner, recipes: list[str], stages: list[str]) -> dict[str, Any]:
    work = Path(s.work_dir)
    results: dict[str, Any] = {}
    for recipe in recipes:
        results[recipe] = {stage: scores_of(result_file(work, recipe, stage)) for stage in stages
                           if result_file(work, recipe, stage).is_file()}
    comparisons = []
    for recipe in recipes:
        for baseline, other in (("base", "sft"), ("sft", "dpo"), ("sft", "grpo"), ("sft", "control")):
            a, b = result_file(work, recipe, baseline), result_file(work, recipe, other)
            if a.is_file() and b.is_file():
                comparisons.append({"name": f"{recipe}: {other} vs {baseline}", **comparison(a, b)})
    if len(recipes) == 2:
        for stage in stages:
            a, b = result_file(work, recipes[0], stage), result_file(work, recipes[1], stage)
            if a.is_file() and b.is_file():
                comparisons.append({"name": f"{stage}: {recipes[1]} vs {recipes[0]}", **comparison(a, b, force=True)})
    expected = {(r, st) for r in recipes for st in stages if st != "control" or r == s.control_recipe}
    missing = sorted(f"{r}:{st}" for r, st in expected if not result_file(work, r, st).is_file())
    complete = not missing and not runner.failed and recipes == ["release", "improved"] and \
        set(stages) == set(STAGES)
    return {"complete": complete, "missing": missing, "failed_stages": runner.failed,
            "settings": resolved(s), "machine": machine(), "stages": runner.stages,
            "total_seconds": round(sum(v["seconds"] for v in runner.stages.values()), 1),
            "results": results, "comparisons": comparisons,
            "diagnostics": {recipe: diagnostics(work, recipe) for recipe in recipes}}


def machine() -> dict[str, Any]:
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "python": platform.python_version(), "torch": torch.__version__}


# ------------------------------------------------------------------------------------------------ tables


def _cell(figure: dict[str, Any] | None) -> str:
    if not figure:
        return ""
    return f"{figure['mean']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"


def _p(value: float | None) -> str:
    return "" if value is None else "<0.001" if value < 0.001 else f"{value:.3f}"


# comparison (other vs baseline) -> the claim it tests, in words
CLAIMS = {"sft vs base": "SFT beats the base model", "dpo vs sft": "DPO beats SFT", "grpo vs sft": "GRPO beats SFT",
          "control vs sft": "SFT on shuffled labels (the control) scores below SFT"}


def verdicts(comparisons: list[dict[str, Any]]) -> list[str]:
    """Each comparison's claim and whether the overall Result Acc supports it."""
    lines = []
    for item in comparisons:
        row = item["groups"].get("overall", {}).get("Result Acc")
        if row is None:
            continue
        recipe, _, pair = item["name"].partition(": ")
        if pair in CLAIMS:
            claim, better = f"{recipe}: {CLAIMS[pair]}", pair != "control vs sft"
        else:  # "<stage>: improved vs release"
            claim, better = f"{recipe}: {pair.split(' vs ')[0]} beats {pair.split(' vs ')[1]}", True
        differs = row["verdict"] == "differs"
        holds = differs and (row["difference"] > 0) == better
        answer = "yes" if holds else ("no: the other way" if differs else
                                      "no test: neither run varies" if row["p"] is None else "not shown")
        test = "" if row["p"] is None else f", p {_p(row['p'])}"
        lines.append(f"{claim}? **{answer}** (Result Acc {row['baseline']:.3f} -> {row['other']:.3f}, "
                     f"{row['difference']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]{test})")
    return lines


def diagnostic_lines(found: dict[str, Any]) -> list[str]:
    """One row a recipe: SFT's loss, the candidates' scores, the pairs, DPO's and GRPO's curves."""
    def curve(c: dict[str, Any] | None, digits: int = 3) -> str:
        return "" if not c else f"{c['mean_first_tenth']:.{digits}f} -> {c['mean_last_tenth']:.{digits}f}"

    lines = ["| recipe | SFT steps, loss (first -> last tenth) | candidates: instructions, all scored alike "
             "(all 0), mean best, mean spread | DPO pairs (ties), mean score gap | DPO steps, loss, reward margin, "
             "reward accuracy | GRPO reward (first -> last tenth), steps without spread |",
             "|---|---|---|---|---|---|"]
    for recipe, d in found.items():
        sft, cand, pairs = d.get("sft") or {}, d.get("candidates"), d.get("pairs")
        dpo, grpo = d.get("dpo") or {}, d.get("grpo") or {}
        lines.append(
            f"| {recipe} | {sft.get('optimizer_steps', '')}, {curve(sft.get('loss'))} | "
            + (f"{cand['instructions']}, {cand['all_scores_equal']} ({cand['all_scores_zero']}), "
               f"{cand['mean_best']:.3f}, {cand['mean_spread']:.3f}" if cand else "")
            + " | " + (f"{pairs['pairs']} ({pairs['ties']}), {pairs['mean_score_gap']:.3f}" if pairs else "")
            + f" | {dpo.get('optimizer_steps', '')}" + (f", {curve(dpo.get('loss'))}, "
                                                         f"{curve(dpo.get('reward_margin'))}, "
                                                         f"{curve(dpo.get('reward_accuracy'), 2)}" if dpo else "")
            + f" | {curve(grpo.get('reward'))}" + (f", {grpo['steps_without_spread']}" if grpo else "") + " |")
    return lines


def tables(report: dict[str, Any], command: str) -> str:
    """The markdown the doc shows: scores, comparisons, times, diagnostics."""
    s = report["settings"]
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    m = report["machine"]
    state = "complete run" if report["complete"] else \
        f"PARTIAL run (missing: {', '.join(report['missing']) or 'none'}; failed: " \
        f"{', '.join(report['failed_stages']) or 'none'})"
    lines = [f"Measured {when} ({state}) on {m['cpu']}, {m['cores']} cores, {m['torch_threads']} torch threads"
             + (f", GPU {m['gpu']}" if m["gpu"] else "") + f"; total {report['total_seconds'] / 60:.0f} min:",
             "", "```bash", command, "```", "",
             "Function Acc and Result Acc on the whole test split, mean [95 % bootstrap interval over tasks]:", "",
             "| recipe | stage | type | tasks | Function Acc | Result Acc |", "|---|---|---|---|---|---|"]
    for recipe, stages in report["results"].items():
        for stage, groups in stages.items():
            for group in (*TYPES, "overall"):
                if group in groups:
                    g = groups[group]
                    label = f"**{group}**" if group == "overall" else group
                    lines.append(f"| {recipe} | {stage} | {label} | {g['tasks']} | {_cell(g['function_acc'])} | "
                                 f"{_cell(g['result_acc'])} |")
    lines += ["", "Paired comparisons (`pwab leaderboard compare BASELINE OTHER`; difference = other - baseline, "
              "95 % paired bootstrap interval, sign-flip p):", "",
              "| comparison | type | Function Acc difference | p | Result Acc difference | p | Result Acc verdict |",
              "|---|---|---|---|---|---|---|"]
    for item in report["comparisons"]:
        for group in ("overall", *TYPES):
            rows = item["groups"].get(group)
            if not rows:
                continue
            f, r = rows["Function Acc"], rows["Result Acc"]
            name = f"**{item['name']}**" + (" (forced: " + "; ".join(item["forced"]) + ")" if item["forced"] else "")
            lines.append(f"| {name if group == 'overall' else ''} | {group} | {f['difference']:+.3f} "
                         f"[{f['low']:+.3f}, {f['high']:+.3f}] | {_p(f['p'])} | {r['difference']:+.3f} "
                         f"[{r['low']:+.3f}, {r['high']:+.3f}] | {_p(r['p'])} | {r['verdict']} |")
    lines += ["", "What the comparisons say (overall Result Acc, the test's verdict at p < 0.05):", "",
              *(f"- {line}" for line in verdicts(report["comparisons"]))]
    lines += ["", "Why the stages moved or not (`diagnostics` in the JSON):", "",
              *diagnostic_lines(report.get("diagnostics", {}))]
    lines += ["", "Each stage's wall time, the CPU time of its processes, and the machine's 1-minute load average "
              "while it ran:", "", "| stage | seconds | CPU seconds | mean load | max load |", "|---|---|---|---|---|"]
    for name, stage in report["stages"].items():
        lines.append(f"| {name} | {stage['seconds']:.0f} | {stage.get('cpu_seconds', 0):.0f} | "
                     f"{stage['load_mean']:.2f} | {stage['load_max']:.2f} |")
    lines += ["", "Settings: " + ", ".join(f"{k} {v}" for k, v in s.items() if k not in ("doc", "out", "work_dir",
                                                                                         "fresh")) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    s = with_full_preset(parse(LearningSettings, args, prog="scripts/benchmark_puma_learning.py",
                               description=__doc__), args)
    recipes = [r for r in s.recipes.split(",") if r]
    stages = [st for st in s.stages.split(",") if st]
    from PUMA.recipe import RECIPES

    for recipe in recipes:
        if recipe not in RECIPES:
            raise ValueError(f"--recipes: {recipe!r} is not one of {', '.join(RECIPES)}")
    for stage in stages:
        if stage not in STAGES:
            raise ValueError(f"--stages: {stage!r} is not one of {', '.join(STAGES)}")
    if s.doc and not Path(s.doc).is_file():
        raise ValueError(f"--doc {s.doc}: no such file")
    work, out = Path(s.work_dir), Path(s.out)
    work.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    import yaml

    settings_text = yaml.safe_dump(resolved(s), sort_keys=False)
    (work / "settings.yaml").write_text(settings_text)
    out.with_suffix(".yaml").write_text(settings_text)
    runner = Runner(work, s.fresh, resolved(s))
    start = time.monotonic()
    ensure_data(s)
    model_path = ensure_model(s)
    runner.stages.setdefault("prepare (data artefacts, model)", {"seconds": round(time.monotonic() - start, 1),
                                                                  "load_mean": LoadSampler.now(),
                                                                  "load_max": LoadSampler.now()})
    for recipe in recipes:
        run_recipe(s, runner, recipe, model_path, stages)
    report = collect(s, runner, recipes, stages)
    command = "python scripts/benchmark_puma_learning.py " + " ".join(args)
    report["command"] = command.strip()
    out.write_text(json.dumps(report, indent=1) + "\n")
    text = tables(report, report["command"])
    out.with_suffix(".md").write_text(text)
    if s.doc:
        write_block(Path(s.doc), *DOC_BLOCK, text)
    print(text)
    print(f"figures: {out}; tables: {out.with_suffix('.md')}" + (f"; written into {s.doc}" if s.doc else ""))
    return 0 if report["complete"] else 1


if __name__ == "__main__":
    sys.exit(run_command(main, bad_input=(ValueError, OSError)))
