"""Online RL on the benchmark's own reward: GRPO (TRL `GRPOTrainer`) on PUMA's parameter prompts.

An alternative to steps 3-6 (candidates -> scoring -> DPO pairs -> DPO): for each parameter
prompt of step 1 the policy samples `num_generations` parameters, each is scored with the
benchmark's Result Acc by the same scoring as step 4 (`PUMA.candidate_scores.score_candidates`: the
searches in one batch, the recommendations in one batch, the reviews in one MiniLM encode),
and GRPO moves the policy toward the parameters that beat their group's mean. Scores are
cached per (instruction, parameter), so a parameter sampled again costs nothing.

The policy is a new LoRA adapter (the SFT/DPO LoRA settings) on the merged SFT model, as in
the DPO step; the adapter saved in `--out` is evaluated by step 7 like DPO's:
`run.py --agent_strategy puma --puma_generate 1 --puma_model_path OUTPUT_DIR`.

Generation inside TRL: `--generation_backend auto` (default) uses vLLM when the `vllm`
package is installed and a GPU is visible (`--vllm_mode colocate`: in the training process,
or `server`: a `trl vllm-serve` process), else HF `generate`; `vllm` insists on it and stops
with a message when it cannot run. Every step's mean Result Acc is printed and appended to
`--out`'s `grpo_log.jsonl`. Runs under `accelerate launch` like the SFT and DPO steps
(`PUMA/scripts/grpo_llama.sh`).
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.engines.search import BACKENDS as SEARCH_BACKENDS
from PersonalWAB.settings import setting
from PUMA.lora import LoRATrainingConfig
from PersonalWAB.schema_types import Task

TASK_TYPES = ("search", "recommend", "review")
VLLM_MODES = ("colocate", "server")


@dataclass
class GRPOStepConfig(LoRATrainingConfig):
    model_path: str = setting("PUMA/output/sft_merged", "the merged SFT model the policy's adapter is trained on "
                              "(PUMA/scripts/merge.sh)")
    data_file: str = setting("PUMA/data/param_train.json", "step 1's parameter prompts")
    output_dir: str = setting("PUMA/output/grpo", "folder for the GRPO LoRA adapter, its tokenizer and "
                              "grpo_log.jsonl", flag="out", aliases=("output_dir",), metavar="DIR")
    data_dir: str | None = setting(None, "the benchmark data the rewards are scored on",
                                   default_text="the official data when placed, else the bundled synthetic data")
    task_split: str = setting("train", "the split whose tasks score the rewards")
    search_backend: str = setting("lucene", "search engine of the search function (bm25s needs no Java)",
                                  choices=SEARCH_BACKENDS)
    protocol_file: str | None = setting(None, "protocol pack whose texts render the function results",
                                        default_text="the release pack when placed, else the project's")
    task_types: str = setting("search,recommend,review", "comma-separated task types whose prompts are trained on")
    max_examples: int = setting(-1, "train on the first N prompts only; -1: all")
    per_device_train_batch_size: int = setting(8, "completions per device per micro-batch")
    gradient_accumulation_steps: int = setting(4, "micro-batches per optimizer step on each process")
    num_generations: int = setting(8, "parameters sampled per prompt (one GRPO group, at least 2)")
    temperature: float = setting(1.0, "sampling temperature of the policy's completions")
    max_completion_length: int = setting(256, "most tokens of a sampled parameter")
    max_prompt_length: int = setting(1024, "a longer prompt keeps its end (memory tail and cue), as in DPO")
    learning_rate: float = setting(1e-5, "peak learning rate")
    num_train_epochs: float = setting(1.0, "passes over the prompts")
    beta: float = setting(0.0, "KL weight to the SFT model (TRL's default: none)")
    loss_type: str = setting("dapo", "TRL's GRPO loss (grpo, dr_grpo, bnpo, dapo, ...)")
    logging_steps: int = setting(1, "optimizer steps between two logged rewards")
    generation_backend: str = setting("auto", "generation inside the trainer: hf generate, vllm (GPU), or auto "
                                      "(vllm when installed with a GPU)", choices=("auto", "hf", "vllm"))
    vllm_mode: str = setting("colocate", "vllm: colocate runs it in the training process, server talks to a `trl "
                             "vllm-serve` process", choices=VLLM_MODES)
    vllm_gpu_memory_utilization: float = setting(0.3, "vllm colocate: share of GPU memory vLLM takes")
    vllm_tensor_parallel_size: int = setting(1, "vllm: GPUs one model is split over")
    vllm_server_base_url: str | None = setting(None, "vllm server: its URL, e.g. http://localhost:8000")

    def trainer_config_class(self) -> type:
        from trl import GRPOConfig

        return GRPOConfig


def resolve_generation_backend(name: str) -> str:
    """`hf` or `vllm` for generation inside the trainer; `auto` takes vLLM when the package is
    installed and a GPU is visible. An explicit `vllm` that cannot run is refused with a message."""
    import torch

    from PUMA.vllm_backend import resolve_backend

    backend = resolve_backend(name)  # refuses an unknown name and a vllm that is not installed
    if backend == "vllm" and not torch.cuda.is_available():
        raise ValueError("--generation_backend vllm: vLLM generation inside TRL needs a GPU, and none is visible; "
                         "use --generation_backend hf (or auto) on this machine")
    return backend


def check_config(config: GRPOStepConfig) -> str:
    """Check the settings before anything loads; returns the generation backend."""
    from PUMA.modeling import is_adapter_dir

    config.check()
    if config.vllm_mode not in VLLM_MODES:
        raise ValueError(f"--vllm_mode must be one of {', '.join(VLLM_MODES)}, got {config.vllm_mode!r}")
    unknown = set(config.task_types.split(",")) - set(TASK_TYPES)
    if unknown:
        raise ValueError(f"--task_types: {', '.join(sorted(unknown))} not among {', '.join(TASK_TYPES)}")
    if config.num_generations < 2:
        raise ValueError(f"--num_generations {config.num_generations}: GRPO compares a group of at least 2")
    if is_adapter_dir(config.model_path):
        raise ValueError(f"--model_path {config.model_path} is a LoRA adapter folder: merge it into its base first "
                         "(python -m PUMA.merge --adapter_path ... --out ...), then train on the merged model")
    if not Path(config.data_file).is_file():
        raise ValueError(f"--data_file {config.data_file}: no such file (step 1: PUMA/scripts/pre_sft_param_data.sh)")
    return resolve_generation_backend(config.generation_backend)


class ResultAccReward:
    """TRL reward function: each completion's Result Acc under its prompt's function, scored by
    step 4's `score_candidates` over the benchmark's engines, with a cache per (instruction,
    parameter). Completions are stripped as generation and the PUMA agent strip them."""

    __name__ = "result_acc"  # TRL logs the reward as rewards/result_acc/{mean,std}

    def __init__(self, engines: Any, tasks: list[Task], functions: dict[str, str] | None = None):
        self.engines = engines
        self.tasks = tasks
        self.functions = functions
        self.cache: dict[tuple[str, str], float] = {}
        self.requests = 0
        self.hits = 0
        self._lock = threading.Lock()

    def scores(self, instructions: list[str], parameters: list[str]) -> list[float]:
        """Result Acc of each (instruction, parameter); the uncached ones are scored in one batch."""
        from PUMA.candidate_scores import score_candidates

        keys = list(zip(instructions, (p.strip() for p in parameters)))
        with self._lock:
            missing: dict[str, list[str]] = {}
            for instruction, parameter in dict.fromkeys(keys):
                if (instruction, parameter) not in self.cache:
                    missing.setdefault(instruction, []).append(parameter)
            if missing:
                scored = score_candidates(self.engines, self.tasks, missing, self.functions)
                for instruction, parameters_ in missing.items():
                    if instruction not in scored:
                        raise ValueError(f"instruction {instruction[:80]!r} is not a task of the scoring split")
                    for parameter in parameters_:
                        self.cache[(instruction, parameter)] = scored[instruction][parameter]
            self.requests += len(keys)
            self.hits += len(keys) - sum(len(v) for v in missing.values())
            return [self.cache[key] for key in keys]

    def __call__(self, prompts: list[Any], completions: list[Any], instruction: list[str],
                 **kwargs: Any) -> list[float | None]:  # TRL's reward type (None: no reward)
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        rewards: list[float | None] = list(self.scores(instruction, texts))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("result_acc/cache_hit_rate", self.hits / max(self.requests, 1))
        return rewards


def cut_prompt(tokenizer: Any, prompt: str, max_tokens: int) -> str:
    """`prompt` as it is, or its last `max_tokens` tokens (the memory tail and the cue)."""
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return prompt if len(ids) <= max_tokens else tokenizer.decode(ids[-max_tokens:], skip_special_tokens=True)


def training_examples(config: GRPOStepConfig, tokenizer: Any) -> list[dict[str, str]]:
    """The parameter prompts of the chosen task types: prompt (cut to max_prompt_length tokens
    with the BOS TRL adds, keeping its end), instruction and function."""
    from PUMA.modeling import read_json

    types = set(config.task_types.split(","))
    examples = [e for e in read_json(config.data_file) if e["type"] in types]
    if config.max_examples > 0:
        examples = examples[:config.max_examples]
    if not examples:
        raise ValueError(f"{config.data_file}: no parameter prompts of type {config.task_types}")
    return [{"prompt": cut_prompt(tokenizer, e["prompt"], config.max_prompt_length - 1),
             "instruction": e["instruction"], "function": e["function"]} for e in examples]


def reward_for(config: GRPOStepConfig, functions: dict[str, str],
               log: Callable[[str], None] = print) -> ResultAccReward:
    """The reward over the benchmark data's engines (built once if needed), as step 4 scores
    under each prompt's function (`functions`: instruction -> function)."""
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.shared import shared_engines
    from PersonalWAB.paths import default_data_dir
    from PersonalWAB.protocol import load_protocol

    protocol = load_protocol(config.protocol_file)
    data = load_benchmark_data(config.data_dir or default_data_dir())
    build_artifacts(data, (config.search_backend,), recommender=True, log=log, protocol=protocol)
    return ResultAccReward(shared_engines(data, config.search_backend, protocol), data.split(config.task_split),
                           functions)


class RewardLog:
    """A trainer callback: one line per logged step with the mean Result Acc, and the step's
    logs appended to `path` (JSON lines)."""

    def __init__(self, path: Path, log: Callable[[str], None] = print):
        from transformers import TrainerCallback

        self.path = path
        self.log = log
        outer = self

        class _Callback(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if state.is_world_process_zero:  # one line per step, not one per process
                    outer.record(state.global_step, logs or {})

        self.callback = _Callback()

    def record(self, step: int, logs: dict[str, Any]) -> None:
        mean = logs.get("rewards/result_acc/mean")
        if mean is None:  # the closing summary of the run, not a step
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"step": step, **logs}) + "\n")
        self.log(f"GRPO step {step}: mean Result Acc {mean:.4f} (std {logs.get('rewards/result_acc/std', 0.0):.4f}, "
                 f"completion length {logs.get('completions/mean_length', 0.0):.1f}, "
                 f"score cache hits {logs.get('result_acc/cache_hit_rate', 0.0):.2f})")


def build_grpo_trainer(config: GRPOStepConfig, reward: ResultAccReward | None = None,
                       log: Callable[[str], None] = print) -> tuple[Any, Any]:
    """The LoRA `GRPOTrainer` (not yet run) and its tokenizer; `reward` defaults to the
    benchmark's Result Acc over `config.data_dir`."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from PUMA.modeling import load_causal_lm, load_tokenizer, torch_dtype
    from PUMA.lora import lora_config, main_process
    from PUMA.train_progress import TrainingProgress

    backend = check_config(config)
    tokenizer = load_tokenizer(config.model_path, padding_side="left")
    examples = training_examples(config, tokenizer)
    model, _ = load_causal_lm(config.model_path, dtype=torch_dtype(config.bf16, config.fp16))
    vllm: dict[str, Any] = {"use_vllm": backend == "vllm", "vllm_mode": config.vllm_mode,
            "vllm_gpu_memory_utilization": config.vllm_gpu_memory_utilization,
            "vllm_tensor_parallel_size": config.vllm_tensor_parallel_size,
            "vllm_server_base_url": config.vllm_server_base_url,
            "vllm_max_model_length": config.max_prompt_length + config.max_completion_length}
    own: dict[str, Any] = dict(
        output_dir=config.output_dir, learning_rate=config.learning_rate, num_train_epochs=config.num_train_epochs,
        num_generations=config.num_generations, temperature=config.temperature,
        max_completion_length=config.max_completion_length, beta=config.beta, loss_type=config.loss_type,
        gradient_checkpointing=config.gradient_checkpointing, **vllm,
        generation_kwargs=decoding_left_to_the_model() if backend == "hf" else None,
    )
    args = GRPOConfig(**own, **config.trainer_arguments(), **config.trainer_overrides(GRPOConfig, own))
    # the first process builds the data folder's indexes and recommender, the others then load them
    with args.main_process_first(local=False, desc="the reward's engines"):
        reward = reward or reward_for(config, {e["instruction"]: e["function"] for e in examples}, log)
    log_path = Path(config.output_dir) / "grpo_log.jsonl"
    if not config.resume and main_process():  # one process starts the log afresh
        log_path.unlink(missing_ok=True)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=Dataset.from_list(examples),
                          processing_class=tokenizer, peft_config=lora_config(config),
                          callbacks=[RewardLog(log_path, log).callback])
    TrainingProgress.attach(trainer, "grpo", log)
    if main_process():
        log(f"GRPO on {len(examples)} parameter prompts ({config.task_types}), {config.num_generations} samples each, "
            f"generation on {backend}")
    return trainer, tokenizer


# The decoding fields TRL's GRPO sets itself on the HF path (the rest would come from the model folder).
TRL_DECODING_FIELDS = ("max_new_tokens", "do_sample", "temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def decoding_left_to_the_model() -> dict[str, Any]:
    """Every decoding field TRL leaves unset, at `PUMA.modeling.DECODING_DEFAULTS`' value, so the
    policy samples the same whatever the model folder's `generation_config.json` says (vLLM
    ignores the folder's defaults unless asked)."""
    from PUMA.modeling import DECODING_DEFAULTS

    return {key: value for key, value in DECODING_DEFAULTS.items()
            if key not in TRL_DECODING_FIELDS and value is not None}


def train_grpo(config: GRPOStepConfig, log: Callable[[str], None] = print) -> Path:
    """Train and save the GRPO LoRA adapter (and tokenizer) in `output_dir`; returns it."""
    from PUMA.lora import resume_point, save_adapter
    from PUMA.modeling import local_files_only

    local_files_only(config.model_path, "--model_path")  # a model it cannot load ends here, before the libraries load
    trainer, tokenizer = build_grpo_trainer(config, log=log)
    trainer.train(resume_from_checkpoint=resume_point(config.resume, config.output_dir))
    return save_adapter(trainer, tokenizer, config.output_dir)


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step
    from PUMA.lora import main_process

    config = parse_step(GRPOStepConfig, argv, "python -m PUMA.grpo", __doc__, "grpo")
    try:
        check_config(config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = train_grpo(config)
    if main_process():
        print(f"GRPO LoRA adapter saved in {out}")
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
