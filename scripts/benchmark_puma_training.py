"""Training throughput of PUMA step 2 (SFT) and step 6b (DPO), both with LoRA.

    .venv/bin/python scripts/benchmark_puma_training.py            # CPU defaults, a few minutes

SFT runs three times on the same examples, from the same random initialisation, for the
same number of optimizer steps: batches padded to their longest example (the project's
collator), the same with batches of similar lengths (`--train_sampling_strategy
group_by_length`), and every example padded to `--max_length`. Real tokens are the non-pad
tokens of the batches consumed (attention mask sum), computed tokens what the model runs
on (batch x padded length); both are divided by the trainer's measured `train_runtime`.
DPO runs TRL's `DPOTrainer` with LoRA as `PUMA/dpo.py` does; its tokens are counted on
the batches TRL's preference collator produces (prompt+chosen and prompt+rejected rows,
after truncation to `--dpo_max_length`). With a LoRA model TRL gets the reference log
probabilities from the same model with the adapter disabled, an extra forward pass per
batch that is part of the measured time.

Model: a randomly initialised Llama of the given size (`--hidden_size --layers --heads
--intermediate_size`) with a BPE tokenizer trained on `--data_dir` (`--vocab_size`), or
`--tokenizer_path`; or any causal LM folder / hub name with `--model_path`.
Data: the step-1 files `--function_data` / `--param_data`, else step 1 run on the train
split of `--data_dir` with the benchmark's tokenizer (offline search labels; needs the
data directory's embedding caches, built here when missing). DPO pairs: `--dpo_data`,
else throughput-only pairs from the parameter examples (chosen: an example's label,
rejected: the label of another example of the same function).
The first run also pays one-off start-up costs, so the dynamic-padding speed-up is
if anything understated.

On a GPU (the HF Trainer picks the device; expose a single one), e.g. a 1.1B model:

    CUDA_VISIBLE_DEVICES=0 .venv/bin/python scripts/benchmark_puma_training.py --bf16 \\
        --data_dir data/synthetic/full --hidden_size 2048 --intermediate_size 5632 --layers 16 --heads 16 \\
        --vocab_size 32000 --sft_steps 300 --dpo_steps 200 --per_device_train_batch_size 8 \\
        --output data/benchmarks/puma_training_gpu.json

Figures go to a table on stdout and to `--output` (JSON, with every setting and version).
"""

from __future__ import annotations

import gc
import random
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from PUMA.data import DataConfig  # noqa: E402
from PUMA.dpo import DPOStepConfig  # noqa: E402
from PUMA.sft import SFTConfig  # noqa: E402


@dataclass
class BenchmarkConfig:
    data_dir: str = "data/synthetic/small"
    function_data: str | None = None  # step-1 files; built from data_dir when not given
    param_data: str | None = None
    dpo_data: str | None = None  # {prompt, chosen, rejected} list; throughput-only pairs when not given
    train_on: str = "function_param"
    mem_token_length: int = DataConfig.mem_token_length
    model_path: str | None = None  # any causal LM instead of the random Llama
    tokenizer_path: str | None = None  # instead of training one on data_dir
    vocab_size: int = 8000
    hidden_size: int = 256
    intermediate_size: int = 688  # Llama-2's 2.6875 x hidden
    layers: int = 4
    heads: int = 4
    max_length: int = SFTConfig.max_length
    sft_steps: int = 20
    dpo_steps: int = 10
    dpo_max_length: int = DPOStepConfig.max_length
    dpo_max_prompt_length: int = DPOStepConfig.max_prompt_length
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    bf16: bool = False
    gradient_checkpointing: bool = False
    seed: int = 42
    output: str = "data/benchmarks/puma_training.json"


@dataclass
class TokenCounter:
    """Wraps a trainer's collator and records (real, computed) tokens of every batch it builds,
    in order, so the batches the optimizer steps consumed can be counted afterwards."""

    collate: Callable[[list[dict[str, Any]]], dict[str, Any]]
    batches: list[tuple[int, int]] = field(default_factory=list)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = self.collate(features)
        self.batches.append((int(batch["attention_mask"].sum()), batch["input_ids"].numel()))
        return batch


def make_tokenizer(config: BenchmarkConfig) -> tuple[Any, str]:
    """The model's tokenizer, the given one, or a BPE trained on the data directory's texts."""
    from PUMA.modeling import load_tokenizer
    from PUMA.tiny_model import corpus, train_tokenizer

    path = config.model_path or config.tokenizer_path
    if path:
        return load_tokenizer(path), path
    tokenizer = train_tokenizer(corpus(config.data_dir), config.vocab_size)
    return tokenizer, f"BPE trained on {config.data_dir} (vocab {len(tokenizer)})"


def make_model(config: BenchmarkConfig, tokenizer: Any) -> Any:
    """A fresh base model: identical weights on every call (seeded), as each run wraps its own in LoRA."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from PUMA.modeling import load_causal_lm, torch_dtype

    dtype = torch_dtype(config.bf16)
    if config.model_path:
        return load_causal_lm(config.model_path, dtype=dtype)[0]
    torch.manual_seed(config.seed)
    model_config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        num_hidden_layers=config.layers, num_attention_heads=config.heads, num_key_value_heads=config.heads,
        max_position_embeddings=max(config.max_length, config.dpo_max_length), bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
    )
    return LlamaForCausalLM(model_config).to(dtype)


def step1_param_examples(config: BenchmarkConfig, data: Any, tokenizer: Any) -> list[dict[str, Any]]:
    """Step 1's parameter examples of the train split, memory truncated with the benchmark's tokenizer."""
    from PersonalWAB.memory_embeddings import build_behaviour_embeddings
    from PersonalWAB.protocol import load_protocol
    from PUMA.data import param_examples

    protocol = load_protocol()
    build_behaviour_embeddings(data, protocol, log=lambda line: print(line, file=sys.stderr))
    return param_examples(protocol, data, data.split("train"), "train", tokenizer, config.mem_token_length,
                          DataConfig.memory_length)


def step1_files(config: BenchmarkConfig, tokenizer: Any, work_dir: Path) -> tuple[str, str, float | None]:
    """The function and parameter train files: the given ones, or step 1 run on the data
    directory's train split (written to `work_dir`); with the seconds step 1 took (None when
    both files were given)."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.protocol import load_protocol
    from PUMA.data import function_examples
    from PUMA.modeling import write_json

    if config.function_data and config.param_data:
        return config.function_data, config.param_data, None
    start = time.perf_counter()
    data = load_benchmark_data(config.data_dir)
    function_path = config.function_data or str(
        write_json(work_dir / "function_train.json", function_examples(load_protocol(), data.split("train"), "train")))
    param_path = config.param_data or str(
        write_json(work_dir / "param_train.json", step1_param_examples(config, data, tokenizer)))
    return function_path, param_path, time.perf_counter() - start


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
                pairs.append({"prompt": example["prompt"], "chosen": example["label"], "rejected": other["label"]})
    return pairs


def training_fields(config: BenchmarkConfig, steps: int, output_dir: str) -> dict[str, Any]:
    """Trainer settings both steps share here: no checkpoints, one log line, fixed step count."""
    return {"output_dir": output_dir, "max_steps": steps, "save_strategy": "no", "logging_steps": steps,
            "per_device_train_batch_size": config.per_device_train_batch_size,
            "gradient_accumulation_steps": config.gradient_accumulation_steps, "bf16": config.bf16,
            "gradient_checkpointing": config.gradient_checkpointing, "seed": config.seed}


def measure(trainer: Any, accumulation: int) -> dict[str, Any]:
    """Train, then divide the tokens of the batches consumed (prefetched extras left out) by
    the trainer's train runtime; peak GPU memory when on CUDA."""
    import torch
    from transformers.trainer_callback import PrinterCallback

    counter = TokenCounter(trainer.data_collator)
    trainer.data_collator = counter
    trainer.remove_callback(PrinterCallback)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    metrics = trainer.train().metrics
    seconds = metrics["train_runtime"]
    steps = trainer.state.global_step
    consumed = counter.batches[:steps * accumulation]
    real, computed = sum(r for r, _ in consumed), sum(c for _, c in consumed)
    figures = {"steps": steps, "batches": len(consumed), "seconds": round(seconds, 2),
               "steps_per_s": round(steps / seconds, 3), "real_tokens": real, "computed_tokens": computed,
               "real_tokens_per_s": round(real / seconds, 1), "computed_tokens_per_s": round(computed / seconds, 1),
               "pad_share": round(1 - real / computed, 3), "train_loss": round(metrics["train_loss"], 4),
               "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
               "total_params": sum(p.numel() for p in trainer.model.parameters()),
               "device": str(trainer.args.device)}
    if cuda:
        figures["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return figures


def free_memory() -> None:
    """Drop the previous run's model and optimizer (held in reference cycles) before building the next."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_sft(config: BenchmarkConfig, tokenizer: Any, examples: list[dict[str, Any]],
            pad_to_length: int | None, sampling: str = "random") -> dict[str, Any]:
    from PUMA.sft import build_sft_trainer

    free_memory()
    with tempfile.TemporaryDirectory() as output_dir:
        sft_config = SFTConfig(max_length=config.max_length, train_sampling_strategy=sampling,
                               **training_fields(config, config.sft_steps, output_dir))
        trainer, _ = build_sft_trainer(sft_config, make_model(config, tokenizer), tokenizer, examples, pad_to_length)
        return measure(trainer, config.gradient_accumulation_steps)


def run_dpo(config: BenchmarkConfig, tokenizer: Any, pairs: list[dict[str, str]]) -> dict[str, Any]:
    from PUMA.dpo import build_dpo_trainer

    free_memory()
    with tempfile.TemporaryDirectory() as output_dir:
        dpo_config = DPOStepConfig(max_length=config.dpo_max_length, max_prompt_length=config.dpo_max_prompt_length,
                                   **training_fields(config, config.dpo_steps, output_dir))
        trainer, _ = build_dpo_trainer(dpo_config, make_model(config, tokenizer), tokenizer, pairs)
        return measure(trainer, config.gradient_accumulation_steps)


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
    runs = {"SFT dynamic padding": result["sft"]["dynamic_padding"],
            "SFT dynamic, by length": result["sft"]["dynamic_padding_group_by_length"],
            f"SFT pad to {result['settings']['max_length']}": result["sft"]["pad_to_max_length"],
            "DPO (TRL, dynamic)": result["dpo"]}
    gpu = any("peak_gpu_memory_gib" in r for r in runs.values())
    header = f"{'run':<24}{'steps':>6}{'seconds':>9}{'steps/s':>9}{'real tok/s':>12}{'computed tok/s':>16}{'pad':>7}"
    print(header + (f"{'peak GiB':>10}" if gpu else ""))
    for name, r in runs.items():
        line = (f"{name:<24}{r['steps']:>6}{r['seconds']:>9.1f}{r['steps_per_s']:>9.3f}{r['real_tokens_per_s']:>12.0f}"
                f"{r['computed_tokens_per_s']:>16.0f}{r['pad_share']:>7.0%}")
        print(line + (f"{r['peak_gpu_memory_gib']:>10.2f}" if gpu else ""))
    print(f"dynamic padding speed-up over padding to max length (real tokens/s): "
          f"{result['sft']['dynamic_padding_speedup']}x, grouped by length {result['sft']['group_by_length_speedup']}x")


def benchmark(config: BenchmarkConfig) -> dict[str, Any]:
    from PUMA.modeling import read_json, torch_dtype
    from PUMA.sft import load_examples

    tokenizer, tokenizer_source = make_tokenizer(config)
    per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps
    with tempfile.TemporaryDirectory() as work_dir:
        function_path, param_path, step1_s = step1_files(config, tokenizer, Path(work_dir))
        sft_pool = load_examples(SFTConfig(train_on=config.train_on, function_data=function_path,
                                           param_data=param_path))
        pair_pool = read_json(config.dpo_data) if config.dpo_data else throughput_pairs(read_json(param_path))
    examples = exactly(sft_pool, config.sft_steps * per_step, config.seed)
    pairs = exactly(pair_pool, config.dpo_steps * per_step, config.seed)
    dynamic = run_sft(config, tokenizer, examples, None)
    grouped = run_sft(config, tokenizer, examples, None, "group_by_length")
    padded = run_sft(config, tokenizer, examples, config.max_length)
    dpo = run_dpo(config, tokenizer, pairs)
    dpo["tokens_counted"] = ("attention-mask sum (real) and numel (computed) of TRL's preference collator "
                             "batches (prompt+chosen and prompt+rejected rows); the reference pass (adapter "
                             "disabled) is timed but not counted")
    step1 = f"step 1 on {config.data_dir} (train split)"
    settings = {**asdict(config), "model": config.model_path or "random Llama", "tokenizer": tokenizer_source,
                "dtype": str(torch_dtype(config.bf16)).removeprefix("torch."), "device": dynamic["device"],
                "base_params": dynamic["total_params"] - dynamic["trainable_params"], **environment(),
                "sft_examples": {"function": config.function_data or step1, "param": config.param_data or step1,
                                 "pool": len(sft_pool), "used": len(examples)},
                "step1_seconds": None if step1_s is None else round(step1_s, 1),
                "dpo_pairs": {"source": config.dpo_data or THROUGHPUT_PAIRS, "pool": len(pair_pool),
                              "used": len(pairs)}}
    def speedup(run: dict[str, Any]) -> float:
        return round(run["real_tokens_per_s"] / padded["real_tokens_per_s"], 2)

    return {"settings": settings,
            "sft": {"dynamic_padding": dynamic, "dynamic_padding_group_by_length": grouped, "pad_to_max_length": padded,
                    "dynamic_padding_speedup": speedup(dynamic), "group_by_length_speedup": speedup(grouped),
                    "tokens_counted": "attention-mask sum (real) and numel (computed) of the SFT collator batches"},
            "dpo": dpo}


def quiet() -> None:
    """Keep the table readable: library warnings, info logs and progress bars off."""
    import datasets
    import transformers

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config
    from PUMA.modeling import write_json

    config = parse_config(BenchmarkConfig, argv, "scripts/benchmark_puma_training.py", __doc__)
    quiet()
    result = benchmark(config)
    print_table(result)
    print(f"saved {write_json(config.output, result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
