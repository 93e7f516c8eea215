"""Does GRPO on the benchmark's reward raise it? Mean Result Acc of the search queries a model
generates for the train prompts, before and after N GRPO steps on those prompts.

Both measurements use the prompts the trainer sees (step 1's parameter prompts cut to
`--max_prompt_length` tokens) and the reward the trainer optimises (step 4's scoring): greedy
decoding (what step 7 uses) and `--samples` sampled queries per prompt at the training
temperature (what GRPO's groups see). Prepare the inputs as scripts/grpo_smoke.sh does
(synthetic data, built artefacts, a model, `python -m PUMA.data param`), then:

    python scripts/benchmark_grpo.py --data_dir data/grpo_small/data \\
        --model_path data/grpo_small/tiny_model --param_file data/grpo_small/puma_data/param_train.json \\
        --work_dir data/grpo_small/run --steps 30 --out data/grpo_small/benchmark_grpo.json
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import fmean
from typing import Any

from PersonalWAB.cli import run_command
from PersonalWAB.settings import parse, setting


@dataclass
class GrpoBenchmarkSettings:
    """The inputs scripts/grpo_smoke.sh prepares, and the GRPO run measured on them."""

    data_dir: str = setting(str, "the data directory the prompts come from (built artefacts: step 4 scores on it)",
                            required=True)
    model_path: str = setting(str, "the (merged SFT) model GRPO starts from", required=True)
    param_file: str = setting(str, "step 1's param_train.json: the prompts trained and measured on", required=True)
    work_dir: str = setting(str, "the GRPO adapter and its log go here", required=True)
    out: str = setting(str, "JSON file for the numbers", required=True)
    steps: int = setting(30, "GRPO optimizer steps between the two measurements")
    prompts: int = setting(64, "search prompts trained and measured on")
    batch: int = setting(16, "completions per step (prompts x generations)")
    num_generations: int = setting(8, "completions per prompt in a GRPO group; their spread is the signal")
    learning_rate: float = setting(5e-4, "the LoRA adapter's learning rate")
    temperature: float = setting(1.0, "sampling temperature in training and in the sampled measurement")
    max_completion_length: int = setting(16, "new tokens per generated query")
    max_prompt_length: int = setting(384, "prompt tokens kept (the trainer's cut, also used when measuring)")
    samples: int = setting(4, "sampled queries per prompt in the measurement")
    seed: int = setting(0, "seed of the training and of the sampling")


def measure(model_path: str, examples: list[dict[str, str]], reward: Any, samples: int, temperature: float,
            max_new_tokens: int, seed: int) -> dict[str, float]:
    """Mean Result Acc of greedy and of sampled queries from `model_path` (a model or an adapter)."""
    from PUMA.generate import GenerateConfig, generate_outputs

    prompts = [e["prompt"] for e in examples]
    instructions = [e["instruction"] for e in examples]
    base = GenerateConfig(model_path=model_path, max_new_tokens=max_new_tokens, num_return_sequences=1,
                          num_beams=1, do_sample=False, batch_size=16, max_prompt_tokens=100_000, seed=seed,
                          backend="hf")
    greedy = [outputs[0] for outputs in generate_outputs(base, prompts, log=lambda _: None)]
    sampled = generate_outputs(replace(base, num_return_sequences=samples, do_sample=True, temperature=temperature),
                               prompts, log=lambda _: None)
    greedy_scores = reward.scores(instructions, greedy)
    sampled_scores = reward.scores([i for i, outs in zip(instructions, sampled) for _ in outs],
                                   [o for outs in sampled for o in outs])
    return {"greedy_mean_result_acc": fmean(greedy_scores), "sampled_mean_result_acc": fmean(sampled_scores),
            "greedy_share_nonzero": fmean(s > 0 for s in greedy_scores), "examples_greedy": greedy[:3]}


def main(argv: list[str] | None = None) -> int:
    args = parse(GrpoBenchmarkSettings, argv, prog="scripts/benchmark_grpo.py", description=__doc__)

    from PUMA.grpo import GRPOStepConfig, build_grpo_trainer, reward_for, training_examples
    from PUMA.modeling import load_tokenizer
    from PUMA.sft import save_adapter

    config = GRPOStepConfig(
        model_path=args.model_path, data_file=args.param_file, output_dir=str(Path(args.work_dir) / "grpo"),
        data_dir=args.data_dir, task_types="search", max_examples=args.prompts, max_steps=args.steps,
        per_device_train_batch_size=args.batch, gradient_accumulation_steps=1,
        num_generations=args.num_generations, temperature=args.temperature,
        max_completion_length=args.max_completion_length, max_prompt_length=args.max_prompt_length,
        learning_rate=args.learning_rate, save_strategy="no", generation_backend="hf", seed=args.seed)
    examples = training_examples(config, load_tokenizer(args.model_path, padding_side="left"))
    reward = reward_for(config, {e["instruction"]: e["function"] for e in examples})
    settings = (args.samples, args.temperature, args.max_completion_length, args.seed)
    start = time.perf_counter()
    before = measure(args.model_path, examples, reward, *settings)
    print(f"before: {json.dumps(before)}", flush=True)
    trainer, tokenizer = build_grpo_trainer(config, reward=reward)
    trainer.train()
    adapter = save_adapter(trainer, tokenizer, config.output_dir)
    after = measure(str(adapter), examples, reward, *settings)
    print(f"after: {json.dumps(after)}", flush=True)
    log = [json.loads(line) for line in (adapter / "grpo_log.jsonl").read_text().splitlines()]
    result = {"settings": vars(args), "prompts": len(examples), "before": before, "after": after,
              "step_mean_reward": [round(entry["rewards/result_acc/mean"], 4) for entry in log],
              "wall_s": round(time.perf_counter() - start, 1)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"mean Result Acc of the search queries on {len(examples)} train prompts, before -> after "
          f"{args.steps} GRPO steps: greedy {before['greedy_mean_result_acc']:.4f} -> "
          f"{after['greedy_mean_result_acc']:.4f}, "
          f"sampled {before['sampled_mean_result_acc']:.4f} -> {after['sampled_mean_result_acc']:.4f} ({args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
