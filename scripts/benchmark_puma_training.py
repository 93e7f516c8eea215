"""Training throughput of PUMA step 2 (SFT) and step 6b (DPO) with LoRA, for both recipes.

    .venv/bin/python scripts/benchmark_puma_training.py                      # tiny model, CPU, minutes
    CUDA_VISIBLE_DEVICES=0 .venv/bin/python scripts/benchmark_puma_training.py --preset llama-2-7b --bf16 \\
        --data_dir data/synthetic/small --sft_steps 20 --dpo_steps 10 --out data/benchmarks/puma_7b.json

Four runs on the same examples and the same random initialisation, each for the same number
of optimizer steps: SFT and DPO, each under `--recipe release` and `--recipe improved`
(PUMA/recipe.py): the release's SFT pads every example to `--max_length` with EOS and trains
on the padding, the improved SFT packs each micro-batch into one row; the DPO recipes differ in
how an over-long prompt is cut. Each run reports:

- tokens/s: real tokens (the examples' own tokens) and computed tokens (what the model runs
  on, padding included), over the trainer's measured `train_runtime`;
- model FLOPs utilisation, MFU = model FLOPs / seconds / peak FLOP/s of the device, with
  model FLOPs counted per batch, for N = the weights of the matrix multiplications (every
  linear layer, lm_head included, LoRA matrices included; not the embedding lookup or the
  norms), N_t = the trainable ones among them (LoRA matrices, and lm_head when it is in
  `modules_to_save`), T = computed tokens, L layers, d hidden size, s each attended sequence's
  length (a padded row's width; each packed example's own length):
    SFT:  (4 N + 2 N_t) T + 8 L d sum(s^2)    forward 2N, activation gradients 2N, weight
                                               gradients of the trained weights only 2N_t;
                                               attention scores and values 4 L d s^2 forward, x2
    DPO:  (6 N + 2 N_t) T + 12 L d sum(s^2)   the same for the policy, plus the reference
                                               forward (adapter disabled) on every row
  Recomputation under gradient checkpointing is not counted (as MFU's definition wants).
  Padding counts as computed: the release trains on its EOS padding. Peak FLOP/s: dense
  bf16/fp16 tensor-core peak of the GPU (H100/H200 SXM 989 TFLOP/s, H100 PCIe 756, A100 312),
  or `--peak_tflops`; none on a CPU unless given;
- peak memory: `torch.cuda.max_memory_allocated` on a GPU; on a CPU the process's peak
  resident set (it only grows, so later runs show at least the earlier runs' peak).

Model: `--preset llama-2-7b` builds Llama-2-7B's architecture (hidden 4096, 11008, 32
layers, 32 heads, vocab 32000) from its config with random weights (no hub); `--preset
custom` (default) a small Llama from `--hidden_size --intermediate_size --layers --heads`;
`--model_path` any causal LM folder instead. The tokenizer is a BPE trained on `--data_dir`
(`--vocab_size`; the model's vocabulary is at least the preset's) or `--tokenizer_path`.
Data: the step-1 files `--function_data` / `--param_data`, else step 1 run on the train split
of `--data_dir` with the benchmark's tokenizer (offline search labels; builds the data
directory's embedding caches when missing). DPO pairs: `--dpo_data`, else throughput-only
pairs from the parameter examples (chosen: an example's label, rejected: the label of another
example of the same function). The first run also pays one-off start-up costs.

Figures go to a table on stdout and to `--out` (JSON, with every setting and version).
"""

from __future__ import annotations

import gc
import random
import resource
import sys
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PUMA.data import DataConfig
from PUMA.dpo import DPOStepConfig
from PUMA.recipe import RECIPES
from PUMA.sft import SFTConfig
from PersonalWAB.cli import run_command
from PersonalWAB.outputs import check_output
from PersonalWAB.settings import parse, setting

REPO_ROOT = Path(__file__).resolve().parent.parent
# Llama-2-7B's architecture (its published config.json): built here with random weights.
PRESETS = {"llama-2-7b": {"hidden_size": 4096, "intermediate_size": 11008, "layers": 32, "heads": 32,
                          "vocab_size": 32000}}
# Dense bf16/fp16 tensor-core peaks (no sparsity), FLOP/s, matched on the CUDA device name.
GPU_PEAK_FLOPS = (("H100 PCIe", 756e12), ("H100", 989.4e12), ("H200", 989.4e12), ("GH200", 989.4e12),
                  ("A100", 312e12), ("L40S", 362e12), ("A10G", 125e12), ("L4", 121e12))


@dataclass
class BenchmarkConfig:
    """The model, the data and the runs timed; every field is a flag."""

    data_dir: str = setting("data/synthetic/small", "data directory step 1 runs on (train split) and the "
                                                    "tokenizer is trained on")
    function_data: str | None = setting(None, "step 1's function file instead of running step 1 on --data_dir")
    param_data: str | None = setting(None, "step 1's parameter file instead of running step 1 on --data_dir")
    dpo_data: str | None = setting(None, "DPO pairs ({prompt, chosen, rejected} list); default: throughput-only "
                                         "pairs from the parameter examples")
    train_on: str = setting("function_param", "which step-1 examples SFT trains on",
                            choices=("function", "param", "function_param"))
    mem_token_length: int = setting(DataConfig.mem_token_length, "step 1's memory cut (tokens), when step 1 runs "
                                                                 "here")
    recipes: str = setting("release,improved", f"comma-separated recipes to time, of: {', '.join(RECIPES)}")
    preset: str = setting("custom", "model: custom = a small random Llama of the sizes below; llama-2-7b = "
                                    "Llama-2-7B's architecture with random weights", choices=("custom", *PRESETS))
    model_path: str | None = setting(None, "any causal LM folder instead of the random Llama")
    tokenizer_path: str | None = setting(None, "a tokenizer folder instead of training one on --data_dir")
    vocab_size: int = setting(8000, "vocabulary of the trained tokenizer (the model's is at least the preset's)")
    hidden_size: int = setting(256, "custom model: hidden size")
    intermediate_size: int = setting(688, "custom model: MLP size (Llama-2's 2.6875 x hidden)")
    layers: int = setting(4, "custom model: decoder layers")
    heads: int = setting(4, "custom model: attention heads")
    max_length: int = setting(SFTConfig.max_length, "SFT max length (the release pads every example to it)")
    sft_steps: int = setting(20, "SFT optimizer steps per recipe")
    dpo_steps: int = setting(10, "DPO optimizer steps per recipe")
    dpo_max_length: int = setting(DPOStepConfig.max_length, "DPO max length (prompt and answer)")
    dpo_max_prompt_length: int = setting(DPOStepConfig.max_prompt_length, "DPO max prompt length (where an "
                                                                          "over-long prompt is cut)")
    per_device_train_batch_size: int = setting(4, "examples per micro-batch")
    gradient_accumulation_steps: int = setting(1, "micro-batches per optimizer step")
    bf16: bool = setting(False, "train in bfloat16 (a GPU that has it)")
    fp16: bool = setting(False, "train in float16 (the release's GPU precision)")
    gradient_checkpointing: bool = setting(False, "recompute activations to save memory (not counted in MFU)")
    peak_tflops: float = setting(0.0, "the device's peak TFLOP/s for MFU; 0: the GPU table, none on a CPU")
    seed: int = setting(42, "seed of the weights and the example order")
    out: str = setting("data/benchmarks/puma_training.json", "JSON file for the figures, every setting and the "
                                                              "library versions", aliases=("output",))

    def check(self) -> None:
        if self.preset != "custom" and self.preset not in PRESETS:
            raise ValueError(f"--preset {self.preset!r}: expected custom or {', '.join(PRESETS)}")
        unknown = [r for r in self.recipe_list() if r not in RECIPES]
        if unknown or not self.recipe_list():
            raise ValueError(f"--recipes {self.recipes!r}: a comma-separated list of {', '.join(RECIPES)}")
        if self.bf16 and self.fp16:
            raise ValueError("--bf16 and --fp16: choose one")

    def recipe_list(self) -> list[str]:
        return [r.strip() for r in self.recipes.split(",") if r.strip()]

    def architecture(self) -> dict[str, int]:
        sizes = {name: getattr(self, name) for name in ("hidden_size", "intermediate_size", "layers", "heads",
                                                         "vocab_size")}
        return {**sizes, **PRESETS.get(self.preset, {})}


@dataclass
class TokenCounter:
    """Wraps a trainer's collator and records, for every batch it builds in order, the real
    tokens, the computed tokens and the sum of squared attended lengths (for attention FLOPs)."""

    collate: Callable[[list[dict[str, Any]]], dict[str, Any]]
    batches: list[tuple[int, int, int]] = field(default_factory=list)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = self.collate(features)
        self.batches.append(batch_tokens(batch))
        return batch


def batch_tokens(batch: dict[str, Any]) -> tuple[int, int, int]:
    """(real tokens, computed tokens, sum of s^2 over the attended sequences) of a batch: a
    packed row (no attention mask) attends within each example, a padded row over its width."""
    import torch

    rows, width = batch["input_ids"].shape
    if "attention_mask" not in batch:
        lengths = torch.bincount(batch["example_index"].reshape(-1))
        return int(lengths.sum()), rows * width, int((lengths ** 2).sum())
    return int(batch["attention_mask"].sum()), rows * width, rows * width * width


def matmul_weights(model: Any) -> tuple[int, int]:
    """(N, N_t) of the MFU formula: weights of the linear layers one forward pass runs
    (embedding lookups and norms excluded; of a module PEFT saves whole, the active copy; of
    the adapters TRL may add, such as its `ref` copy for the reference pass, the active one)
    and the trainable ones among them."""
    import torch

    active = getattr(model, "active_adapter", "default")
    total = trainable = 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or ".original_module" in name:
            continue
        if any(part in name for part in (".lora_A.", ".lora_B.", ".modules_to_save.")) \
                and not name.endswith(f".{active}"):
            continue
        total += module.weight.numel()
        trainable += module.weight.numel() if module.weight.requires_grad else 0
    return total, trainable


def model_flops(step: str, n: int, n_trainable: int, layers: int, hidden: int, tokens: int, squares: int) -> float:
    """The formula in the module docstring (SFT: forward + backward; DPO: that plus the reference forward)."""
    if step == "sft":
        return (4 * n + 2 * n_trainable) * tokens + 8 * layers * hidden * squares
    return (6 * n + 2 * n_trainable) * tokens + 12 * layers * hidden * squares


def peak_flops(config: BenchmarkConfig) -> tuple[float | None, str]:
    """The device's peak FLOP/s for MFU and where it came from."""
    import torch

    if config.peak_tflops > 0:
        return config.peak_tflops * 1e12, "--peak_tflops"
    if not torch.cuda.is_available():
        return None, "none on a CPU (give --peak_tflops)"
    name = torch.cuda.get_device_name(0)
    for key, flops in GPU_PEAK_FLOPS:
        if key in name:
            return flops, f"{name}: dense bf16/fp16 peak"
    return None, f"{name}: not in the table (give --peak_tflops)"


def make_tokenizer(config: BenchmarkConfig) -> tuple[Any, str]:
    """The model's tokenizer, the given one, or a BPE trained on the data directory's texts."""
    from PUMA.modeling import load_tokenizer
    from PUMA.tiny_model import corpus, train_tokenizer

    path = config.model_path or config.tokenizer_path
    if path:
        return load_tokenizer(path), path
    tokenizer = train_tokenizer(corpus(config.data_dir), config.architecture()["vocab_size"])
    return tokenizer, f"BPE trained on {config.data_dir} (vocab {len(tokenizer)})"


def make_model(config: BenchmarkConfig, tokenizer: Any) -> Any:
    """A fresh base model: identical weights on every call (seeded), as each run wraps its own in LoRA;
    built on the GPU when there is one (a 7B model in fp32 would not fit a CPU's memory first)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from PUMA.modeling import inference_device, load_causal_lm, torch_dtype

    dtype = torch_dtype(config.bf16, config.fp16)
    if config.model_path:
        return load_causal_lm(config.model_path, dtype=dtype)[0]
    torch.manual_seed(config.seed)
    sizes = config.architecture()
    model_config = LlamaConfig(
        vocab_size=max(len(tokenizer), sizes["vocab_size"]), hidden_size=sizes["hidden_size"],
        intermediate_size=sizes["intermediate_size"], num_hidden_layers=sizes["layers"],
        num_attention_heads=sizes["heads"], num_key_value_heads=sizes["heads"],
        max_position_embeddings=max(config.max_length, config.dpo_max_length, 4096),
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False, dtype=dtype,
    )
    with torch.device(inference_device()):
        return LlamaForCausalLM(model_config).to(dtype)


def step1_param_examples(config: BenchmarkConfig, data: Any, tokenizer: Any) -> list[dict[str, Any]]:
    """Step 1's parameter examples of the train split, memory truncated with the benchmark's tokenizer."""
    from PUMA.prompting import PUMA_TEMPLATE
    from PersonalWAB.memory.embeddings import build_behaviour_embeddings
    from PersonalWAB.protocol import load_protocol
    from PUMA.data import param_examples

    protocol = load_protocol()
    build_behaviour_embeddings(data, protocol, log=lambda line: print(line, file=sys.stderr),
                               template=PUMA_TEMPLATE)
    return param_examples(protocol, data, data.split("train"), "train", tokenizer, config.mem_token_length,
                          DataConfig.memory_length)


def step1_files(config: BenchmarkConfig, tokenizer: Any, work_dir: Path) -> tuple[str, str]:
    """The function and parameter train files: the given ones, or step 1 run on the data
    directory's train split (written to `work_dir`)."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.protocol import load_protocol
    from PUMA.data import function_examples
    from PUMA.modeling import write_json

    if config.function_data and config.param_data:
        return config.function_data, config.param_data
    data = load_benchmark_data(config.data_dir)
    function_path = config.function_data or str(
        write_json(work_dir / "function_train.json", function_examples(load_protocol(), data.split("train"), "train")))
    param_path = config.param_data or str(
        write_json(work_dir / "param_train.json", step1_param_examples(config, data, tokenizer)))
    return function_path, param_path


def exactly(items: list[Any], count: int, seed: int) -> list[Any]:
    """`count` items in a seeded shuffled order, repeated when there are fewer: a dataset of
    exactly the examples `count` steps consume, so every run sees the same mix."""
    if not items:
        raise ValueError("no examples to train on")
    order = list(items)
    random.Random(seed).shuffle(order)
    return [order[i % len(order)] for i in range(count)]


THROUGHPUT_PAIRS = ("throughput-only pairs from the parameter examples (chosen: an example's label, rejected: "
                    "another example's label of the same function)")


def throughput_pairs(param_examples: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Preference pairs for timing only: chosen = an example's label, rejected = the label of
    the next example of the same function (realistic lengths, no scoring needed)."""
    by_function: dict[str, list[dict[str, Any]]] = {}
    for example in param_examples:
        by_function.setdefault(example["function"], []).append(example)
    pairs = []
    for group in by_function.values():
        for example, other in zip(group, group[1:] + group[:1]):
            if example["label"] != other["label"]:
                pairs.append({"prompt": example["prompt"], "chosen": example["label"], "rejected": other["label"],
                              "instruction": example["instruction"]})
    return pairs


def improved_pairs(config: BenchmarkConfig, tokenizer: Any, pairs: list[dict[str, Any]],
                   param_examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs as step 5 of the improved recipe writes them: a prompt that would not fit
    gets a shorter memory (`PUMA.dpo_data.fitted_prompt`)."""
    from PersonalWAB.protocol import load_protocol
    from PUMA.dpo_data import fitted_prompt

    protocol = load_protocol()
    by_instruction = {e["instruction"]: e for e in param_examples}
    fitted = []
    for pair in pairs:
        example = by_instruction.get(pair.get("instruction", ""))
        prompt = (fitted_prompt(protocol, tokenizer, example, pair, config.dpo_max_length)
                  if example and "memory" in example else pair["prompt"])
        fitted.append({**pair, "prompt": prompt})
    return fitted


def training_fields(config: BenchmarkConfig, recipe: str, steps: int, output_dir: str) -> dict[str, Any]:
    """Trainer settings all runs share here: no checkpoints, one log line, fixed step count."""
    return {"output_dir": output_dir, "max_steps": steps, "save_strategy": "no",
            "logging_steps": steps, "per_device_train_batch_size": config.per_device_train_batch_size,
            "gradient_accumulation_steps": config.gradient_accumulation_steps, "bf16": config.bf16,
            "fp16": config.fp16, "gradient_checkpointing": config.gradient_checkpointing, "seed": config.seed}


def peak_memory_gib() -> tuple[float, str]:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30, "GPU max allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "process peak RSS (CPU)"


def measure(trainer: Any, step: str, config: BenchmarkConfig, base: tuple[int, int]) -> dict[str, Any]:
    """Train, then count the batches the optimizer steps consumed (prefetched extras left out)
    over the trainer's train runtime: tokens/s, model FLOPs, MFU and peak memory."""
    import torch
    from transformers.trainer_callback import PrinterCallback

    counter = TokenCounter(trainer.data_collator)
    trainer.data_collator = counter
    trainer.remove_callback(PrinterCallback)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    n, n_trainable = matmul_weights(trainer.model)
    metrics = trainer.train().metrics
    seconds = metrics["train_runtime"]
    steps = trainer.state.global_step
    consumed = counter.batches[:steps * config.gradient_accumulation_steps]
    real, computed, squares = (sum(b[i] for b in consumed) for i in range(3))
    layers, hidden = base
    flops = model_flops(step, n, n_trainable, layers, hidden, computed, squares)
    peak, peak_source = peak_flops(config)
    memory, memory_source = peak_memory_gib()
    return {"steps": steps, "batches": len(consumed), "seconds": round(seconds, 2),
            "real_tokens": real, "computed_tokens": computed,
            "real_tokens_per_s": round(real / seconds, 1), "computed_tokens_per_s": round(computed / seconds, 1),
            "pad_share": round(1 - real / computed, 3), "train_loss": round(metrics["train_loss"], 4),
            "matmul_weights_N": n, "trainable_matmul_weights_Nt": n_trainable,
            "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
            "model_tflops": round(flops / 1e12, 4), "achieved_tflops_per_s": round(flops / seconds / 1e12, 4),
            "mfu": None if peak is None else round(flops / seconds / peak, 4), "peak_flops_source": peak_source,
            "peak_memory_gib": round(memory, 2), "peak_memory_source": memory_source,
            "device": str(trainer.args.device)}


def free_memory() -> None:
    """Drop the previous run's model and optimizer (held in reference cycles) before building the next."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_step(step: str, recipe: str, config: BenchmarkConfig, tokenizer: Any, items: list[dict[str, Any]],
             **overrides: Any) -> dict:
    """One timed run: a fresh model wrapped in the recipe's LoRA, trained for the configured steps.
    `overrides`: further fields of the step's config (`SFTConfig` / `DPOStepConfig`), e.g.
    `deepspeed=` for scripts/gpu_check.py; none here."""
    from PUMA.cli import recipe_config
    from PUMA.dpo import build_dpo_trainer
    from PUMA.sft import build_sft_trainer

    free_memory()
    with tempfile.TemporaryDirectory() as output_dir:
        model = make_model(config, tokenizer)
        base = (model.config.num_hidden_layers, model.config.hidden_size)
        if step == "sft":
            sft = recipe_config(SFTConfig, "sft", recipe, max_length=config.max_length,
                                **{**training_fields(config, recipe, config.sft_steps, output_dir), **overrides})
            trainer, _ = build_sft_trainer(sft, model, tokenizer, items)
        else:
            dpo = recipe_config(DPOStepConfig, "dpo", recipe, max_length=config.dpo_max_length,
                                max_prompt_length=config.dpo_max_prompt_length,
                                **{**training_fields(config, recipe, config.dpo_steps, output_dir), **overrides})
            trainer, _ = build_dpo_trainer(dpo, model, tokenizer, items)
        del model
        return measure(trainer, step, config, base)


def environment() -> dict[str, Any]:
    """Library versions and hardware, for comparing result files."""
    import peft
    import torch
    import transformers
    import trl

    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "trl": trl.__version__, "cpu_threads": torch.get_num_threads(),
            "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def print_table(result: dict[str, Any]) -> None:
    print(f"{'run':<18}{'steps':>6}{'seconds':>9}{'real tok/s':>12}{'computed tok/s':>16}{'pad':>6}"
          f"{'TFLOP/s':>10}{'MFU':>8}{'peak GiB':>10}")
    for name, r in result["runs"].items():
        mfu = "-" if r["mfu"] is None else f"{r['mfu']:.1%}"
        print(f"{name:<18}{r['steps']:>6}{r['seconds']:>9.1f}{r['real_tokens_per_s']:>12.0f}"
              f"{r['computed_tokens_per_s']:>16.0f}{r['pad_share']:>6.0%}{r['achieved_tflops_per_s']:>10.3f}"
              f"{mfu:>8}{r['peak_memory_gib']:>10.2f}")


def benchmark(config: BenchmarkConfig) -> dict[str, Any]:
    from PUMA.modeling import read_json, torch_dtype
    from PUMA.sft import load_examples

    config.check()
    tokenizer, tokenizer_source = make_tokenizer(config)
    per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps
    with tempfile.TemporaryDirectory() as work_dir:
        function_path, param_path = step1_files(config, tokenizer, Path(work_dir))
        sft_pool = load_examples(SFTConfig(train_on=config.train_on, function_data=function_path,
                                           param_data=param_path))
        param_pool = read_json(param_path)
    pair_pool = read_json(config.dpo_data) if config.dpo_data else throughput_pairs(param_pool)
    examples = exactly(sft_pool, config.sft_steps * per_step, config.seed)
    pairs = exactly(pair_pool, config.dpo_steps * per_step, config.seed)
    runs = {}
    for recipe in config.recipe_list():
        runs[f"SFT {recipe}"] = run_step("sft", recipe, config, tokenizer, examples)
    for recipe in config.recipe_list():
        recipe_pairs = improved_pairs(config, tokenizer, pairs, param_pool) if recipe == "improved" else pairs
        runs[f"DPO {recipe}"] = run_step("dpo", recipe, config, tokenizer, recipe_pairs)
    first = next(iter(runs.values()))
    settings = {**asdict(config), "architecture": config.architecture() if not config.model_path else None,
                "model": config.model_path or f"random Llama ({config.preset})", "tokenizer": tokenizer_source,
                "dtype": str(torch_dtype(config.bf16, config.fp16)).removeprefix("torch."), "device": first["device"],
                **environment(),
                "sft_examples": {"function": config.function_data or "step 1 on the train split",
                                 "param": config.param_data or "step 1 on the train split",
                                 "pool": len(sft_pool), "used": len(examples)},
                "dpo_pairs": {"source": config.dpo_data or THROUGHPUT_PAIRS, "pool": len(pair_pool),
                              "used": len(pairs)}}
    return {"settings": settings, "runs": runs,
            "mfu_formula": {"sft": "(4 N + 2 N_t) T + 8 L d sum(s^2)", "dpo": "(6 N + 2 N_t) T + 12 L d sum(s^2)",
                            "terms": "N linear-layer weights, N_t the trainable ones, T computed tokens, L layers, "
                                     "d hidden size, s attended sequence lengths"}}


def quiet() -> None:
    """Keep the table readable: library warnings, info logs and progress bars off."""
    import datasets
    import transformers

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()


def main(argv: list[str] | None = None) -> int:
    from PUMA.modeling import write_json

    config = parse(BenchmarkConfig, argv, prog="scripts/benchmark_puma_training.py", description=__doc__)
    check_output(config.out, "--out")
    try:
        config.check()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    quiet()
    result = benchmark(config)
    print_table(result)
    print(f"saved {write_json(config.out, result)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
