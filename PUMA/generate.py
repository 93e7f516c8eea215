"""Step 3: generation with a fine-tuned model (a merged model folder, a hub name, or a
LoRA adapter folder, which is merged into its base on load).

- `--mode function`: function predictions for the prompts of a function data file
  (greedy, short outputs).
- `--mode param`: parameter candidates for the prompts of a parameter data file;
  defaults are the release's DPO candidate settings (beam search with 10 beams,
  sampling at temperature 1.5, 10 candidates, up to 256 new tokens). For final
  predictions use `--num_return_sequences 1 --num_beams 1 --no-do_sample`.

Output: JSON object instruction text -> list of outputs (duplicates dropped, order kept).
Batches are padded on the left and generated with HF `generate`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass
class GenerateConfig:
    model_path: str = "PUMA/output/sft_merged"
    mode: str = "param"  # function | param
    data_file: str = "PUMA/data/param_train.json"
    output_file: str = "PUMA/output/param_candidates_train.json"
    max_new_tokens: int = 256
    num_return_sequences: int = 10
    num_beams: int = 10
    do_sample: bool = True
    temperature: float = 1.5
    top_p: float = 1.0
    batch_size: int = 8
    max_prompt_tokens: int = 1024
    max_examples: int = -1
    seed: int = 42
    bf16: bool = False
    fp16: bool = False


def generate_file(config: GenerateConfig, log: Callable[[str], None] = print) -> Path:
    import torch

    from PUMA.modeling import generate_texts, load_causal_lm, read_json, torch_dtype, write_json

    if config.mode not in ("function", "param"):
        raise ValueError(f"--mode must be function or param, got {config.mode!r}")
    examples = read_json(config.data_file)
    if config.max_examples > 0:
        examples = examples[:config.max_examples]
    prompts = {e["instruction"]: e["prompt"] for e in examples}  # repeated instructions keep one entry
    model, tokenizer = load_causal_lm(config.model_path, for_generation=True,
                                      dtype=torch_dtype(config.bf16, config.fp16))
    if torch.cuda.is_available():
        model = model.to("cuda")
    tokenizer.truncation_side = "left"  # an over-long prompt keeps its end (the memory tail and the cue)
    if config.mode == "function":
        settings = dict(max_new_tokens=min(config.max_new_tokens, 16), num_return_sequences=1, num_beams=1,
                        do_sample=False)
    else:
        settings = dict(max_new_tokens=config.max_new_tokens, num_return_sequences=config.num_return_sequences,
                        num_beams=config.num_beams, do_sample=config.do_sample, temperature=config.temperature,
                        top_p=config.top_p)
    outputs = generate_texts(model, tokenizer, list(prompts.values()), batch_size=config.batch_size,
                             max_prompt_tokens=config.max_prompt_tokens, seed=config.seed, **settings)
    result = {instruction: list(dict.fromkeys(texts)) for instruction, texts in zip(prompts, outputs)}
    path = write_json(config.output_file, result)
    log(f"{path}: {config.mode} outputs for {len(result)} instructions")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    generate_file(parse_config(GenerateConfig, argv, "python -m PUMA.generate", __doc__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
