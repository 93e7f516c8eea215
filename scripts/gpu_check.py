"""One-command GPU check of PUMA at the Llama-2-7B shape: training, generation and the memory cache.

    bash scripts/gpu_check.sh OUT                     # writes OUT/gpu_check.json (one GPU: ~5-8 minutes)
    .venv/bin/python scripts/gpu_check.py OUT --phases sft_improved,generate_hf   # a subset
    .venv/bin/python scripts/gpu_check.py --help      # every setting

On one GPU it runs, each as its own phase, with random weights in Llama-2-7B's architecture
(hidden 4096, 32 layers, vocab 32000; `benchmark_puma_training.make_model`, no hub download)
and a BPE tokenizer trained on synthetic PersonalWAB data (`PUMA.tiny_model.train_tokenizer`):

- `data`: synthetic data (`--data_scale`, or `--data_dir`) and PUMA step 1 on its train split
  (function and parameter examples, MiniLM relevance, the 768-token memory cut);
- `sft_release`, `sft_improved`, `dpo_release`, `dpo_improved`: a few optimizer steps of LoRA
  SFT / DPO (with `modules_to_save`) under each recipe of PUMA/recipe.py, through the trainer
  builders the steps use (`PUMA.sft.build_sft_trainer`, `PUMA.dpo.build_dpo_trainer`) and the
  recipe's own batch layout and GPU precision, one GPU doing its share of an optimizer step on
  the release's 4-GPU node: release fp16 with batch 1 x accumulation 16 (64 / 4 GPUs) and every
  example padded to 1280, improved bf16 with 4 examples packed per row x accumulation 4 (DPO:
  release 1 x 16, improved 1 x 16); 4 SFT and 3 DPO optimizer steps per recipe;
- `sft_release_deepspeed`: the release SFT again under DeepSpeed ZeRO-2 fp16
  (PUMA/configs/deepspeed_zero2_release.json, one process under torchrun, as
  PUMA/launch.py starts it), when `deepspeed` is importable (else `skipped`);
- `generate_hf`: step 3b's candidate decoding (10 beams with sampling at temperature 1.5, 10
  returned, 256 new tokens) through `PUMA.modeling.generate_texts`, bf16;
- `generate_vllm`: the same prompts and decoding through `PUMA.vllm_backend` (vLLM has no beam
  sampling: 10 samples), when `vllm` is importable (else `skipped`);
- `memory_cache`: the MiniLM memory cache (every behaviour and instruction of `--memory_scale`
  synthetic data, rebuilt from scratch) through `scripts/benchmark_memory.py`'s `build`.

Figures (OUT/gpu_check.json, written again after every phase; `summary` has the headline ones):
- training: real tokens/s (tokens that are not padding) and computed tokens/s over the
  trainer's `train_runtime`, MFU, peak GPU memory (`torch.cuda.max_memory_allocated` from the
  start of training, the model's weights included), the loss, the batch and precision used;
- MFU = model FLOPs / train_runtime / peak FLOP/s, the model FLOPs counted per batch as in
  scripts/benchmark_puma_training.py:
      SFT  (4 N + 2 N_t) T + 8 L d sum(s^2)
      DPO  (6 N + 2 N_t) T + 12 L d sum(s^2)
  i.e. the 6 N T of full fine-tuning (forward 2N, activation gradients 2N, weight gradients 2N
  per token) minus the weight gradients LoRA does not compute for its frozen base, 2 (N - N_t) T;
  attention 4 L d s^2 per sequence forward, doubled for backward; DPO adds the reference
  forward 2 N T + 4 L d sum(s^2). N = weights of the linear layers one forward runs (LoRA
  matrices and lm_head included; embedding lookups and norms not), N_t = the trainable ones,
  T = computed tokens (padding included: the release trains on it), L layers, d hidden size,
  s each attended sequence's length. Peak: the GPU's dense bf16/fp16 tensor-core peak (H100
  SXM and H200 989.4 TFLOP/s, H100 PCIe 756, A100 312), or `--peak_tflops`; the JSON's `mfu`
  section states the formula and the peak used;
- generation: generated tokens/s (tokens of every returned sequence up to and including its
  EOS, counted from the token ids), prompt tokens, batch size, peak GPU memory;
- memory cache: build seconds (MiniLM load + encoding), behaviours/s.

Every phase catches its own failure (out of memory, a missing package) and records it as
`{"error": ...}`; the others still run. Exit status: 0 when no phase failed (`skipped` phases
are not failures), 1 when one did, 2 for bad settings. The phases `generate_vllm` and
`sft_release_deepspeed` run in a child process of this script (`--isolate`) so that vLLM's
engine and DeepSpeed's process group leave nothing behind. `--time_limit_s` (default 570)
stops starting phases once spent, so the command ends within 10 minutes on one H100.

Without a GPU it says so and runs a CPU dry run of the same code path at tiny size (a tiny
random Llama, a tiny BPE tokenizer, 4 users of the `tiny` synthetic data, 2 optimizer steps with
accumulation 2, 16 new tokens), writing the same JSON with `"device": "cpu", "dry_run": true`
(MFU is null on a CPU unless `--peak_tflops` is given; peak memory is the process's peak RSS).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from collections.abc import Callable
from typing import Any

SCRIPTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = SCRIPTS_DIR.parent
for _path in (str(SCRIPTS_DIR), str(REPO_ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import benchmark_puma_training as bench  # noqa: E402
from PersonalWAB.settings import parse, setting  # noqa: E402

RESULT_NAME = "gpu_check.json"
PHASES = ("data", "sft_release", "sft_improved", "dpo_release", "dpo_improved", "generate_hf", "memory_cache",
          "generate_vllm", "sft_release_deepspeed")
TRAINING_PHASES = {"sft_release": ("sft", "release"), "sft_improved": ("sft", "improved"),
                   "dpo_release": ("dpo", "release"), "dpo_improved": ("dpo", "improved"),
                   "sft_release_deepspeed": ("sft", "release")}
RELEASE_GPUS = 4  # the release trained on one 4-GPU node: one GPU's share of its optimizer step is checked here
DEEPSPEED_CONFIGS = ("PUMA/configs/deepspeed_zero2_release.json", "PUMA/configs/deepspeed_zero2.json")
CHILD_MIN_SECONDS = 60  # a child process (imports, model, engine) needs at least this long
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1")


@dataclass
class GpuCheckConfig:
    """Settings; `None` means the device's default (`resolved`: a GPU run or the CPU dry run)."""

    out: str = setting("", "folder for gpu_check.json", positional=True, nargs="?", metavar="OUT")
    phases: str = setting("all", f"comma-separated subset of: {', '.join(PHASES)}")
    isolate: str = setting("generate_vllm,sft_release_deepspeed", "phases run in a child process of this script")
    work_dir: str = setting("", "scratch folder (data, tokenizer, step-1 files, the saved 7B model for vLLM); "
                                "default: a temporary folder, removed at the end")
    keep_work: bool = setting(False, "keep the scratch folder", aliases=("no-keep_work",))
    data_dir: str = setting("", "data directory for step 1 (default: synthetic --data_scale data in the scratch "
                                "folder)")
    data_scale: str = setting("tiny", "synthetic scale of the step-1 data")
    data_users: int | None = setting(None, "keep only this many users of generated data (0: all; GPU 0, dry run 4)")
    preset: str | None = setting(None, "model: llama-2-7b (GPU default) or custom (dry run: the sizes below)",
                                 choices=("custom", *bench.PRESETS))
    vocab_size: int | None = setting(None, "tokenizer vocabulary (GPU: 32000, dry run 1000)")
    hidden_size: int | None = setting(None, "custom model (dry run 64)")
    intermediate_size: int | None = setting(None, "custom model (dry run 128)")
    layers: int | None = setting(None, "custom model (dry run 2)")
    heads: int | None = setting(None, "custom model (dry run 4)")
    mem_token_length: int = setting(768, "step 1's memory cut (tokens)")
    max_length: int = setting(1280, "SFT max length (the release pads to it)")
    dpo_max_length: int = setting(1024, "DPO max length")
    dpo_max_prompt_length: int = setting(768, "DPO max prompt length (release cut)")
    sft_steps: int | None = setting(None, "SFT optimizer steps per recipe (GPU 4, dry run 2)")
    dpo_steps: int | None = setting(None, "DPO optimizer steps per recipe (GPU 3, dry run 2)")
    sft_accumulation: int | None = setting(None, "SFT gradient accumulation (0: the recipe's per GPU on the "
                                                 "release's 4 GPUs, release 16, improved 4; GPU 0, dry run 2)")
    dpo_accumulation: int | None = setting(None, "DPO gradient accumulation (0: the recipe's per GPU on the "
                                                 "release's 4 GPUs, release 16, improved 16; GPU 0, dry run 2)")
    gradient_checkpointing: bool = setting(False, "recompute activations (not counted in MFU)",
                                           aliases=("no-gradient_checkpointing",))
    gen_prompts: int | None = setting(None, "prompts generated for (GPU 8, dry run 2)")
    gen_new_tokens: int | None = setting(None, "new tokens per sequence (GPU 256, dry run 16)")
    gen_beams: int = setting(10, "beams = returned sequences per prompt (the release's candidate setting)")
    max_prompt_tokens: int = setting(1024, "generation prompt cut (PUMA.generate's)")
    vllm_gpu_memory_utilization: float = setting(0.7, "vLLM's share of GPU memory")
    memory_scale: str | None = setting(None, "synthetic scale of the memory-cache build (GPU full, dry run tiny)")
    memory_users: int | None = setting(None, "keep only this many users for the memory cache (0: all; GPU 0, "
                                             "dry run 4)")
    deepspeed_config: str = setting("", f"DeepSpeed config (default: the first of {', '.join(DEEPSPEED_CONFIGS)})")
    peak_tflops: float = setting(0.0, "peak TFLOP/s for MFU (0: the GPU table; none on a CPU)")
    time_limit_s: float = setting(570.0, "no phase starts after this many seconds")
    seed: int = setting(42, "seed of the weights, the example order and the sampling")
    only: str = setting("", "run this one phase in a prepared --work_dir (the child process)", hidden=True)
    child_result: str = setting("", "where the child process writes its phase's result", hidden=True)

    def phase_list(self) -> list[str]:
        if self.phases.strip() in ("", "all"):
            return list(PHASES)
        chosen = [p.strip() for p in self.phases.split(",") if p.strip()]
        unknown = [p for p in chosen if p not in PHASES]
        if unknown:
            raise ValueError(f"--phases: unknown {', '.join(unknown)}; expected some of {', '.join(PHASES)}")
        needs_data = any(p not in ("data", "memory_cache") for p in chosen)
        return [p for p in PHASES if p in chosen or (p == "data" and needs_data)]

    def check(self) -> None:
        if not self.out and not self.only:
            raise ValueError("give the output folder: scripts/gpu_check.py OUT")
        self.phase_list()
        if self.preset not in (None, "custom", *bench.PRESETS):
            raise ValueError(f"--preset {self.preset!r}: expected custom or {', '.join(bench.PRESETS)}")
        if self.data_dir and self.data_users:
            raise ValueError("--data_users trims generated data only (it would rewrite the caches of --data_dir)")
        if self.only and self.only not in PHASES:
            raise ValueError(f"--only {self.only!r}: expected one of {', '.join(PHASES)}")
        if self.only and not self.work_dir:
            raise ValueError("--only needs the --work_dir the parent prepared")

    def resolved(self, gpu: bool) -> GpuCheckConfig:
        """Every `None` filled with the GPU run's or the CPU dry run's value."""
        preset = self.preset or ("llama-2-7b" if gpu else "custom")
        tiny = {"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "layers": 2, "heads": 4}
        sizes = {**tiny, **bench.PRESETS.get(preset, {})}  # a preset's architecture, else the tiny Llama
        by_device = {"sft_steps": (4, 2), "dpo_steps": (3, 2), "sft_accumulation": (0, 2), "dpo_accumulation": (0, 2),
                     "gen_prompts": (8, 2), "gen_new_tokens": (256, 16), "memory_scale": ("full", "tiny"),
                     "memory_users": (0, 4), "data_users": (0, 0 if self.data_dir else 4)}
        filled = {name: values[0 if gpu else 1] for name, values in by_device.items()}
        filled.update(sizes)
        return replace(self, preset=preset, **{name: value if getattr(self, name) is None else getattr(self, name)
                                               for name, value in filled.items()})


def parse_args(argv: list[str] | None) -> GpuCheckConfig:
    return parse(GpuCheckConfig, argv, prog="scripts/gpu_check.py", description=__doc__)


def config_argv(config: GpuCheckConfig) -> list[str]:
    """The command line that parses back to `config` (for the child processes)."""
    argv: list[str] = [config.out] if config.out else []
    for f in fields(config):
        value = getattr(config, f.name)
        if value is None or f.name == "out":
            continue
        argv += [f"--{f.name}", str(int(value)) if isinstance(value, bool) else str(value)]
    return argv


# --- counting generated tokens ------------------------------------------------------------------------------------
def generated_token_count(new_tokens: Any, eos_token_id: int) -> int:
    """Tokens of each row of a `generate` output's continuation up to and including its first
    EOS (what follows is padding)."""
    is_eos = (new_tokens == eos_token_id).int()
    before = is_eos.cumsum(1) - is_eos  # EOS tokens strictly before each position
    return int((before == 0).sum())


class CountingModel:
    """Stands in for an HF model in `PUMA.modeling.generate_texts` and counts the tokens its
    `generate` calls produce."""

    def __init__(self, model: Any, eos_token_id: int):
        self.model, self.eos_token_id, self.tokens, self.calls = model, eos_token_id, 0, 0

    def parameters(self) -> Any:
        return self.model.parameters()

    @property
    def generation_config(self) -> Any:  # read and swapped by PUMA.modeling.model_defaults_ignored
        return self.model.generation_config

    @generation_config.setter
    def generation_config(self, config: Any) -> None:
        self.model.generation_config = config

    def generate(self, **kwargs: Any) -> Any:
        output = self.model.generate(**kwargs)
        self.tokens += generated_token_count(output[:, kwargs["input_ids"].shape[1]:], self.eos_token_id)
        self.calls += 1
        return output


class CountingLLM:
    """Stands in for `vllm.LLM` in `PUMA.vllm_backend.generate_texts_vllm` and counts the
    token ids of every output it returns."""

    def __init__(self, llm: Any):
        self.llm, self.tokens, self.calls = llm, 0, 0

    def generate(self, requests: list[dict[str, Any]], params: Any, **kwargs: Any) -> Any:
        results = self.llm.generate(requests, params, **kwargs)
        self.tokens += sum(len(output.token_ids) for result in results for output in result.outputs)
        self.calls += 1
        return results

    def beam_search(self, requests: list[dict[str, Any]], params: Any, **kwargs: Any) -> Any:
        results = self.llm.beam_search(requests, params, **kwargs)
        self.tokens += sum(len(beam.tokens) - len(request["prompt_token_ids"])
                           for request, result in zip(requests, results) for beam in result.sequences)
        self.calls += 1
        return results


# --- the run ------------------------------------------------------------------------------------------------------
@dataclass
class Context:
    config: GpuCheckConfig  # resolved
    gpu: bool
    work: Path
    started: float = field(default_factory=time.perf_counter)
    _tokenizer: Any = None

    @property
    def data_dir(self) -> Path:
        return Path(self.config.data_dir) if self.config.data_dir else self.work / "data"

    @property
    def tokenizer_dir(self) -> Path:
        return self.work / "tokenizer"

    def step1_file(self, kind: str) -> Path:
        return self.work / "step1" / f"{kind}_train.json"

    def remaining(self) -> float:
        return self.config.time_limit_s - (time.perf_counter() - self.started)

    def tokenizer(self) -> Any:
        from PUMA.modeling import load_tokenizer

        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.tokenizer_dir)
        return self._tokenizer

    def bench_config(self, **changes: Any) -> bench.BenchmarkConfig:
        """The training benchmark's settings for this run (model, lengths, steps, peak)."""
        c = self.config
        settings = dict(data_dir=str(self.data_dir), function_data=str(self.step1_file("function")),
                        param_data=str(self.step1_file("param")), preset=c.preset,
                        tokenizer_path=str(self.tokenizer_dir),
                        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
                        layers=c.layers, heads=c.heads, mem_token_length=c.mem_token_length, max_length=c.max_length,
                        sft_steps=c.sft_steps, dpo_steps=c.dpo_steps, dpo_max_length=c.dpo_max_length,
                        dpo_max_prompt_length=c.dpo_max_prompt_length, gradient_checkpointing=c.gradient_checkpointing,
                        peak_tflops=c.peak_tflops, seed=c.seed, out="")
        return bench.BenchmarkConfig(**{**settings, **changes})

    def dtype_name(self, wanted: str) -> str:
        """`wanted` (a recipe's GPU dtype) on a GPU (bfloat16 -> float16 without bf16 support); float32 on a CPU."""
        from PUMA.modeling import resolve_dtype

        return str(resolve_dtype(wanted, "cuda")).removeprefix("torch.") if self.gpu else "float32"


def trimmed(data: Any, users: int) -> Any:
    """The data with only `users` users (all when 0): those with train tasks and the shortest
    histories first, so the MiniLM relevance of a dry run encodes few behaviours."""
    if users <= 0:
        return data
    with_train = {t["user_id"] for t in data.split("train")}
    order = sorted(data.histories, key=lambda u: (u not in with_train, len(data.histories[u]), u))
    keep = set(order[:users])
    return replace(data, histories={u: h for u, h in data.histories.items() if u in keep},
                   profiles={u: p for u, p in data.profiles.items() if u in keep},
                   tasks={split: [t for t in tasks if t["user_id"] in keep] for split, tasks in data.tasks.items()})


def phase_data(ctx: Context) -> dict[str, Any]:
    """Synthetic data, the tokenizer (trained on it, saved for the other phases) and step 1."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.data.synthetic import generate_synthetic
    from PersonalWAB.protocol import load_protocol
    from PUMA.data import function_examples
    from PUMA.modeling import write_json

    c = ctx.config
    start = time.perf_counter()
    if not c.data_dir:
        generate_synthetic(ctx.data_dir, scale=c.data_scale, seed=0)
    data = trimmed(load_benchmark_data(ctx.data_dir), c.data_users)
    config = ctx.bench_config()
    tokenizer, source = bench.make_tokenizer(replace(config, tokenizer_path=None))
    tokenizer.save_pretrained(ctx.tokenizer_dir)
    functions = function_examples(load_protocol(), data.split("train"), "train")
    params = bench.step1_param_examples(config, data, tokenizer)
    write_json(ctx.step1_file("function"), functions)
    write_json(ctx.step1_file("param"), params)
    prompt_tokens = [len(ids) for ids in tokenizer([e["prompt"] for e in params])["input_ids"]]
    return {"data_dir": str(ctx.data_dir) if c.data_dir else f"synthetic {c.data_scale} (generated)",
            "source": data.source, "users": len(data.histories), "train_tasks": len(data.split("train")),
            "function_examples": len(functions), "param_examples": len(params), "tokenizer": source,
            "tokenizer_vocab": len(tokenizer),
            "param_prompt_tokens_mean": round(sum(prompt_tokens) / max(len(prompt_tokens), 1), 1),
            "seconds": round(time.perf_counter() - start, 2)}


def deepspeed_config_path(config: GpuCheckConfig) -> str:
    if config.deepspeed_config:
        return config.deepspeed_config
    return next((path for path in DEEPSPEED_CONFIGS if (REPO_ROOT / path).is_file()), DEEPSPEED_CONFIGS[-1])


def training_phase(ctx: Context, phase: str) -> dict[str, Any]:
    """A few optimizer steps of one step (SFT or DPO) under one recipe, with the recipe's batch
    layout for one GPU of the release's 4 (accumulation as configured) and GPU precision;
    `bench.run_step` times it."""
    from PUMA.cli import recipe_config
    from PUMA.dpo import DPOStepConfig
    from PUMA.lora import precision_path
    from PUMA.modeling import read_json
    from PUMA.recipe import get_recipe
    from PUMA.sft import SFTConfig, load_examples

    step, recipe = TRAINING_PHASES[phase]
    c = ctx.config
    step_config: type[SFTConfig] | type[DPOStepConfig] = SFTConfig if step == "sft" else DPOStepConfig
    layout = recipe_config(step_config, step, recipe).batch_layout(world_size=RELEASE_GPUS)
    accumulation = (c.sft_accumulation if step == "sft" else c.dpo_accumulation) or layout.gradient_accumulation_steps
    per_device = layout.per_device_train_batch_size
    dtype = ctx.dtype_name(get_recipe(recipe).value(step, "gpu_dtype"))
    config = ctx.bench_config(per_device_train_batch_size=per_device, gradient_accumulation_steps=accumulation,
                              bf16=dtype == "bfloat16", fp16=dtype == "float16")
    tokenizer = ctx.tokenizer()
    steps = config.sft_steps if step == "sft" else config.dpo_steps
    count = steps * per_device * accumulation
    if step == "sft":
        pool = load_examples(SFTConfig(train_on=config.train_on, function_data=config.function_data,
                                       param_data=config.param_data))
        items = bench.exactly(pool, count, config.seed)
    else:
        param_pool = read_json(config.param_data)
        items = bench.exactly(bench.throughput_pairs(param_pool), count, config.seed)
        if recipe == "improved":
            items = bench.improved_pairs(config, tokenizer, items, param_pool)
    overrides = {"deepspeed": deepspeed_config_path(c)} if phase == "sft_release_deepspeed" else {}
    result = bench.run_step(step, recipe, config, tokenizer, items, **overrides)
    precision = precision_path(recipe_config(step_config, step, recipe, bf16=config.bf16, fp16=config.fp16,
                                           deepspeed=overrides.get("deepspeed")), "cuda" if ctx.gpu else "cpu")
    return {"step": step, "recipe": recipe, "precision": precision, "dtype": dtype,
            "per_device_train_batch_size": per_device, "gradient_accumulation_steps": accumulation,
            "examples_per_optimizer_step": per_device * accumulation,
            "recipe_accumulation_per_gpu_of_4": layout.gradient_accumulation_steps,
            "max_length": config.max_length if step == "sft" else config.dpo_max_length,
            "packed": step == "sft" and bool(get_recipe(recipe).value("sft", "packing")),
            **({"deepspeed_config": overrides["deepspeed"]} if overrides else {}), **result}


def generation_work(ctx: Context) -> tuple[list[str], dict[str, Any]]:
    """The prompts (step 1's parameter prompts) and step 3b's candidate decoding (the release's)."""
    from PUMA.generate import GenerateConfig, decoding_settings
    from PUMA.modeling import read_json

    c = ctx.config
    prompts = [e["prompt"] for e in read_json(ctx.step1_file("param"))[:c.gen_prompts]]
    settings = decoding_settings(GenerateConfig(mode="param", recipe="release", max_new_tokens=c.gen_new_tokens,
                                                num_beams=c.gen_beams, num_return_sequences=c.gen_beams))
    return prompts, settings


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def phase_generate_hf(ctx: Context) -> dict[str, Any]:
    """HF `generate` (beam sampling) through `PUMA.modeling.generate_texts` on the random model."""
    import torch

    from PUMA.generate import auto_batch_size
    from PUMA.modeling import encode_prompts, generate_texts

    c = ctx.config
    dtype_name = ctx.dtype_name("bfloat16")
    dtype = getattr(torch, dtype_name)
    tokenizer = ctx.tokenizer()
    model = bench.make_model(ctx.bench_config(bf16=dtype_name == "bfloat16", fp16=dtype_name == "float16"),
                             tokenizer).eval()
    model.config.use_cache = True
    prompts, settings = generation_work(ctx)
    encoded = encode_prompts(tokenizer, prompts, c.max_prompt_tokens)
    free = torch.cuda.mem_get_info()[0] if ctx.gpu else None
    batch_size = auto_batch_size(model, dtype, max(len(ids) for ids in encoded), settings, free)
    counter = CountingModel(model, tokenizer.eos_token_id)
    _synchronize()
    start = time.perf_counter()
    outputs = generate_texts(counter, tokenizer, prompts, batch_size=batch_size, max_prompt_tokens=c.max_prompt_tokens,
                             seed=c.seed, **settings)
    _synchronize()
    seconds = time.perf_counter() - start
    return {"backend": "hf", "dtype": dtype_name, "prompts": len(prompts), "sequences": sum(map(len, outputs)),
            "batch_size": batch_size, "generate_calls": counter.calls, "prompt_tokens": sum(map(len, encoded)),
            "generated_tokens": counter.tokens, "seconds": round(seconds, 2),
            "generated_tokens_per_s": round(counter.tokens / seconds, 1), "decoding": settings,
            "decoding_note": "beam sampling: num_beams beams with do_sample, num_beams sequences returned"}


def phase_generate_vllm(ctx: Context) -> dict[str, Any]:
    """vLLM's offline engine on the same random model (saved once to the scratch folder)."""
    import torch

    from PUMA.modeling import encode_prompts
    from PUMA.vllm_backend import generate_texts_vllm, load_vllm

    c = ctx.config
    dtype_name = ctx.dtype_name("bfloat16")
    tokenizer = ctx.tokenizer()
    model_dir = ctx.work / f"model_{c.preset}_{dtype_name}"
    start = time.perf_counter()
    if not (model_dir / "config.json").exists():
        model = bench.make_model(ctx.bench_config(bf16=dtype_name == "bfloat16", fp16=dtype_name == "float16"),
                                 tokenizer)
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        del model
        bench.free_memory()
    save_seconds = time.perf_counter() - start
    prompts, settings = generation_work(ctx)
    start = time.perf_counter()
    llm, lora_request, vllm_tokenizer = load_vllm(model_dir, dtype=dtype_name, max_model_len=c.max_prompt_tokens +
                                                  c.gen_new_tokens, seed=c.seed,
                                                  gpu_memory_utilization=c.vllm_gpu_memory_utilization)
    load_seconds = time.perf_counter() - start
    counter = CountingLLM(llm)
    start = time.perf_counter()
    outputs = generate_texts_vllm(counter, vllm_tokenizer, prompts, lora_request=lora_request,
                                  max_prompt_tokens=c.max_prompt_tokens, seed=c.seed, **settings)
    seconds = time.perf_counter() - start
    free, total = torch.cuda.mem_get_info()
    import vllm

    return {"backend": "vllm", "vllm": vllm.__version__, "dtype": dtype_name, "prompts": len(prompts),
            "sequences": sum(map(len, outputs)), "generate_calls": counter.calls,
            "prompt_tokens": sum(map(len, encode_prompts(tokenizer, prompts, c.max_prompt_tokens))),
            "generated_tokens": counter.tokens, "seconds": round(seconds, 2),
            "generated_tokens_per_s": round(counter.tokens / seconds, 1), "engine_load_seconds": round(load_seconds, 1),
            "model_save_seconds": round(save_seconds, 1), "decoding": settings,
            "decoding_note": "vLLM has no beam sampling: do_sample draws num_beams samples per prompt",
            "gpu_memory_utilization": c.vllm_gpu_memory_utilization,
            "peak_memory_gib": round((total - free) / 2**30, 2),
            "peak_memory_source": "GPU memory in use at the end, all processes (vLLM preallocates its share)"}


def phase_memory_cache(ctx: Context) -> dict[str, Any]:
    """The MiniLM memory cache of `--memory_scale` synthetic data, built from scratch
    (`scripts/benchmark_memory.py`'s `build`: every behaviour and instruction)."""
    import benchmark_memory

    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.data.synthetic import generate_synthetic

    c = ctx.config
    data_dir = ctx.work / f"memory_{c.memory_scale}"
    start = time.perf_counter()
    if not (data_dir / "synthetic_manifest.json").exists():
        generate_synthetic(data_dir, scale=c.memory_scale, seed=0)
    data = trimmed(load_benchmark_data(data_dir), c.memory_users)
    data_seconds = time.perf_counter() - start
    built = benchmark_memory.build(data, keep_cache=False, threads=os.cpu_count() or 1)
    return {"data": f"synthetic {c.memory_scale}" + (f", {c.memory_users} users" if c.memory_users else ""),
            "users": len(data.histories), "instructions": sum(len(t) for t in data.tasks.values()),
            "build_seconds": built["total_seconds"], "data_seconds": round(data_seconds, 2), **built}


PHASE_FUNCTIONS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "data": phase_data, "generate_hf": phase_generate_hf, "generate_vllm": phase_generate_vllm,
    "memory_cache": phase_memory_cache, **{name: (lambda ctx, name=name: training_phase(ctx, name))
                                           for name in TRAINING_PHASES}}


def skip_reason(ctx: Context, phase: str) -> str | None:
    """Why an optional phase cannot run here (None: it should run)."""
    if phase == "generate_vllm":
        if not ctx.gpu:
            return "no GPU (vLLM needs CUDA)"
        if importlib.util.find_spec("vllm") is None:
            return "vllm is not importable here (install it in a separate environment on the GPU machine, see " \
                   "docs/puma.md, Generation)"
    if phase == "sft_release_deepspeed":
        if not ctx.gpu:
            return "no GPU (the release's DeepSpeed ZeRO-2 fp16 path needs CUDA)"
        if importlib.util.find_spec("deepspeed") is None:
            return "deepspeed is not importable here (pip install -r requirements-gpu.txt)"
        if not (REPO_ROOT / deepspeed_config_path(ctx.config)).is_file() \
                and not Path(deepspeed_config_path(ctx.config)).is_file():
            return f"no DeepSpeed config {deepspeed_config_path(ctx.config)}"
    return None


def _reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def error_record(error: BaseException) -> dict[str, Any]:
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    return {"error": f"{type(error).__name__}: {error}"[:4000],
            "traceback": "".join(lines)[-4000:].splitlines()}


def run_in_process(ctx: Context, phase: str) -> dict[str, Any]:
    """One phase here; any exception becomes the phase's `{"error": ...}`."""
    _reset_peak()
    start = time.perf_counter()
    try:
        result = PHASE_FUNCTIONS[phase](ctx)
    except Exception as error:  # noqa: BLE001 - every failure of a phase is recorded, the others still run
        result = error_record(error)
    result["wall_seconds"] = round(time.perf_counter() - start, 2)
    if "error" not in result and "peak_memory_gib" not in result:
        memory, source = bench.peak_memory_gib()
        result.update(peak_memory_gib=round(memory, 2), peak_memory_source=f"{source}, over the phase")
    bench.free_memory()
    return result


def run_in_child(ctx: Context, phase: str) -> dict[str, Any]:
    """One phase in a child process of this script (under torchrun for DeepSpeed, which wants
    the rank variables), given the time left; its result comes back through a file."""
    result_file = ctx.work / f"child_{phase}.json"
    result_file.unlink(missing_ok=True)
    child = replace(ctx.config, only=phase, child_result=str(result_file), work_dir=str(ctx.work), isolate="")
    launcher = [sys.executable, *TORCHRUN] if phase == "sft_release_deepspeed" else [sys.executable]
    command = [*launcher, str(Path(__file__).resolve()), *config_argv(child)]
    limit = ctx.remaining()
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO_ROOT, start_new_session=True)
    try:
        code = process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return {"error": f"the child process ran past the {limit:.0f} s left of --time_limit_s and was stopped",
                "wall_seconds": round(time.perf_counter() - start, 2)}
    if result_file.is_file():
        result = json.loads(result_file.read_text(encoding="utf-8"))
    else:
        result = {"error": f"the child process ({' '.join(launcher[:1] + launcher[2:3])}) exited with status {code} "
                           "without a result (its output is above)"}
    result.update(child_process=True, wall_seconds_with_start=round(time.perf_counter() - start, 2))
    return result


def run_phase(ctx: Context, phase: str, results: dict[str, Any]) -> dict[str, Any]:
    reason = skip_reason(ctx, phase)
    if reason:
        return {"skipped": reason}
    if phase != "data" and phase != "memory_cache" and "error" in results.get("data", {}):
        return {"error": "not run: the data phase failed"}
    if ctx.remaining() <= 0:
        return {"error": f"not started: the --time_limit_s of {ctx.config.time_limit_s:.0f} s was spent"}
    isolated = {p.strip() for p in ctx.config.isolate.split(",") if p.strip()}
    if phase in isolated and not ctx.config.only:
        if ctx.remaining() < CHILD_MIN_SECONDS:
            return {"error": f"not started: less than {CHILD_MIN_SECONDS} s of --time_limit_s left for a child process"}
        return run_in_child(ctx, phase)
    return run_in_process(ctx, phase)


def mfu_section(ctx: Context) -> dict[str, Any]:
    peak, source = bench.peak_flops(ctx.bench_config())
    return {"name": "MFU, model FLOPs utilisation (PaLM, Chowdhery et al. 2022, appendix B), with the model FLOPs "
                    "of LoRA training counted as in scripts/benchmark_puma_training.py",
            "mfu": "model_flops / train_runtime_seconds / peak_flops_per_s",
            "sft_model_flops": "(4*N + 2*N_t)*T + 8*L*d*sum(s^2)",
            "dpo_model_flops": "(6*N + 2*N_t)*T + 12*L*d*sum(s^2)",
            "derivation": "full fine-tuning's 6*N*T (forward 2N, activation gradients 2N, weight gradients 2N per "
                          "token) minus the weight gradients of the frozen base, 2*(N - N_t)*T; attention 4*L*d*s^2 "
                          "per sequence forward, x2 with its backward; DPO adds the reference forward (adapter "
                          "disabled) 2*N*T + 4*L*d*sum(s^2)",
            "terms": {"N": "weights of the linear layers one forward pass runs (LoRA matrices and lm_head included; "
                           "embedding lookups and norms not): matmul_weights_N of each phase",
                      "N_t": "the trainable ones among them (LoRA matrices, lm_head in modules_to_save): "
                             "trainable_matmul_weights_Nt",
                      "T": "computed tokens (padding included: the release trains on it); real_tokens_per_s counts "
                           "the tokens that are not padding",
                      "L": "layers", "d": "hidden size",
                      "s": "each attended sequence's length (a padded row's width, each packed example's own)"},
            "not_counted": "recomputation under --gradient_checkpointing, embedding lookups, norms, the optimizer",
            "peak_flops_per_s": peak, "peak_flops_source": source,
            "peak_table_flops_per_s": {name: flops for name, flops in bench.GPU_PEAK_FLOPS},
            "peak_note": "dense (no sparsity) bf16/fp16 tensor-core peaks; fp16 and bf16 share them"}


def summary(phases: dict[str, Any]) -> dict[str, Any]:
    """The headline figure(s) of each phase."""
    keys = {"sft": ("real_tokens_per_s", "computed_tokens_per_s", "mfu", "peak_memory_gib", "precision"),
            "dpo": ("real_tokens_per_s", "computed_tokens_per_s", "mfu", "peak_memory_gib", "precision"),
            "generate": ("generated_tokens_per_s", "peak_memory_gib"),
            "memory": ("build_seconds", "behaviours", "backend"), "data": ("seconds", "param_examples")}
    lines = {}
    for name, result in phases.items():
        if "error" in result:
            lines[name] = {"error": result["error"][:300]}
        elif "skipped" in result:
            lines[name] = {"skipped": result["skipped"]}
        else:
            lines[name] = {k: result.get(k) for k in keys[name.split("_")[0]]}
    return lines


def environment(ctx: Context) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    versions = bench.environment()
    for package in ("deepspeed", "vllm", "accelerate", "sentence-transformers", "onnxruntime"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return {**versions, "cpu_count": os.cpu_count(), "python": sys.version.split()[0]}


def write_report(out: Path, report: dict[str, Any]) -> Path:
    from PUMA.modeling import write_json

    report["summary"] = summary(report["phases"])
    report["failed"] = [name for name, result in report["phases"].items() if "error" in result]
    report["ok"] = not report["failed"]
    return write_json(out / RESULT_NAME, report)


def print_summary(report: dict[str, Any]) -> None:
    print(f"\nGPU check on {report['gpu_name'] or 'CPU (dry run)'}:")
    for name, line in report["summary"].items():
        text = ", ".join(f"{k} {v}" for k, v in line.items())
        print(f"  {name:<22} {text}")


def child_main(ctx: Context) -> int:
    """A child process: the one phase `--only`, its result into `--child_result` (rank 0)."""
    result = run_in_process(ctx, ctx.config.only)
    if int(os.environ.get("RANK", "0")) == 0:
        from PUMA.modeling import write_json

        write_json(ctx.config.child_result, result)
    return 0


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.memory.embeddings import STORE_ENV

    try:
        config = parse_args(argv)
        config.check()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    import torch

    bench.quiet()
    gpu = torch.cuda.is_available()
    config = config.resolved(gpu)
    if config.only:
        return child_main(Context(config, gpu, Path(config.work_dir)))
    if not gpu:
        print("no GPU: torch sees no CUDA device. Running the CPU dry run of the same code path at tiny size "
              "(tiny random Llama, tiny tokenizer); its figures only show that the path works.", flush=True)
    made_work = not config.work_dir
    work = Path(config.work_dir) if config.work_dir else Path(tempfile.mkdtemp(prefix="gpu_check_"))
    work.mkdir(parents=True, exist_ok=True)
    config = replace(config, work_dir=str(work))
    saved_store = os.environ.get(STORE_ENV)
    os.environ[STORE_ENV] = str(work / "text_store")  # MiniLM vectors are computed here, not read from a shared store
    out = Path(config.out)
    ctx = Context(config, gpu, work)
    report: dict[str, Any] = {
        "device": "cuda" if gpu else "cpu", "dry_run": not gpu,
        "gpu_name": torch.cuda.get_device_name(0) if gpu else None,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {**dataclasses.asdict(config), "architecture": ctx.bench_config().architecture(),
                     "deepspeed_config": deepspeed_config_path(config)},
        "environment": environment(ctx), "mfu": mfu_section(ctx), "phases": {}}
    try:
        for phase in config.phase_list():
            print(f"--- gpu_check phase {phase} ({time.perf_counter() - ctx.started:.0f} s in)", flush=True)
            report["phases"][phase] = run_phase(ctx, phase, report["phases"])
            report["seconds_total"] = round(time.perf_counter() - ctx.started, 1)
            write_report(out, report)
    finally:
        if saved_store is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = saved_store
        if made_work and not config.keep_work:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    print_summary(report)
    print(f"saved {out / RESULT_NAME}")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
