"""Step 3: generation with a fine-tuned model (a merged model folder, a hub name, or a
LoRA adapter folder, which is merged into its base on load).

- `--mode function`: function predictions for the prompts of a function data file
  (greedy, short outputs).
- `--mode param`: parameter candidates for the prompts of a parameter data file;
  defaults are the release's DPO candidate settings (beam search with 10 beams,
  sampling at temperature 1.5, 10 candidates, up to 256 new tokens). For final
  predictions use `--num_return_sequences 1 --num_beams 1 --no-do_sample`.

Output: JSON object instruction text -> list of outputs (duplicates dropped, order kept).

Backends (`--backend`): `hf` pads batches on the left and runs HF `generate`; `vllm`
runs vLLM's offline engine (`PUMA/vllm_backend.py`: much faster on a GPU; beam
sampling becomes sampling there); `auto` (default) takes vLLM when it is installed and
a GPU is visible, else HF.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


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
    backend: str = "auto"  # auto | hf | vllm
    tensor_parallel_size: int = 1  # vllm: GPUs one model is split over
    gpu_memory_utilization: float = 0.9  # vllm: share of GPU memory for weights and KV cache


BACKENDS = ("auto", "hf", "vllm")


def resolve_backend(name: str) -> str:
    """`hf` or `vllm`; `auto` means vLLM when it is installed and a GPU is visible."""
    from PUMA.vllm_backend import vllm_installed

    if name not in BACKENDS:
        raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "vllm" and not vllm_installed():
        raise ValueError("--backend vllm: the vllm package is not installed (pip install vllm on a GPU machine), "
                         "or use --backend hf")
    if name == "auto":
        import torch

        return "vllm" if vllm_installed() and torch.cuda.is_available() else "hf"
    return name


def decoding_settings(config: GenerateConfig) -> dict[str, Any]:
    """Function predictions are greedy and short; parameters use the configured decoding."""
    if config.mode == "function":
        return dict(max_new_tokens=min(config.max_new_tokens, 16), num_return_sequences=1, num_beams=1,
                    do_sample=False)
    return dict(max_new_tokens=config.max_new_tokens, num_return_sequences=config.num_return_sequences,
                num_beams=config.num_beams, do_sample=config.do_sample, temperature=config.temperature,
                top_p=config.top_p)


def generate_outputs(config: GenerateConfig, prompts: list[str], log: Callable[[str], None] = print) -> list[list[str]]:
    """The outputs for each prompt, with the backend `config.backend` resolves to."""
    from PUMA.modeling import generate_texts, load_causal_lm, load_tokenizer, torch_dtype

    backend = resolve_backend(config.backend)
    settings = decoding_settings(config)
    log(f"generating with the {backend} backend")
    if backend == "vllm":
        from PUMA.vllm_backend import generate_texts_vllm, load_vllm, vllm_dtype

        llm, lora_request = load_vllm(config.model_path, dtype=vllm_dtype(config.bf16, config.fp16),
                                      max_model_len=config.max_prompt_tokens + settings["max_new_tokens"],
                                      seed=config.seed, tensor_parallel_size=config.tensor_parallel_size,
                                      gpu_memory_utilization=config.gpu_memory_utilization)
        tokenizer = load_tokenizer(config.model_path)
        return generate_texts_vllm(llm, tokenizer, prompts, lora_request=lora_request,
                                   max_prompt_tokens=config.max_prompt_tokens, seed=config.seed, **settings)
    import torch

    model, tokenizer = load_causal_lm(config.model_path, for_generation=True,
                                      dtype=torch_dtype(config.bf16, config.fp16))
    if torch.cuda.is_available():
        model = model.to("cuda")
    return generate_texts(model, tokenizer, prompts, batch_size=config.batch_size,
                          max_prompt_tokens=config.max_prompt_tokens, seed=config.seed, **settings)


def generate_file(config: GenerateConfig, log: Callable[[str], None] = print) -> Path:
    from PUMA.modeling import read_json, write_json

    if config.mode not in ("function", "param"):
        raise ValueError(f"--mode must be function or param, got {config.mode!r}")
    examples = read_json(config.data_file)
    if config.max_examples > 0:
        examples = examples[:config.max_examples]
    prompts = {e["instruction"]: e["prompt"] for e in examples}  # repeated instructions keep one entry
    outputs = generate_outputs(config, list(prompts.values()), log)
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
