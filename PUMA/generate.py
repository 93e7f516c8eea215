"""Step 3: generation with a fine-tuned model (a merged model folder, a hub name, or a
LoRA adapter folder, which is merged into its base on load).

- `--mode function`: function predictions for the prompts of a function data file
  (greedy, 32 new tokens, as the release).
- `--mode param`: parameter candidates for the prompts of a parameter data file;
  defaults are the release's DPO candidate settings (beam search with 10 beams,
  sampling at temperature 1.5, 10 candidates, up to 256 new tokens, early stopping).
  For final predictions use `--num_return_sequences 1 --num_beams 1 --no-do_sample`.

Output: JSON object instruction text -> list of outputs (duplicates dropped, order kept),
and its record (`<output>.puma_run.json`: recipe, settings, decoding).

On a GPU the model runs in bf16 (`--dtype`, as the release generated) and `--batch_size 0`
(the default) takes as many prompts per call as the estimate of their key/value cache,
prefill activations and scores says fit in the free GPU memory (8 on a CPU); a batch that
still runs out of memory is halved and retried.

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

from PersonalWAB.agents.puma import FUNCTION_NEW_TOKENS


@dataclass
class GenerateConfig:
    model_path: str = "PUMA/output/sft_merged"
    mode: str = "param"  # function | param
    data_file: str = "PUMA/data/param_train.json"
    output_file: str = "PUMA/output/param_candidates_train.json"
    recipe: str = "release"  # generation is the same in both recipes; recorded, and inputs are checked
    max_new_tokens: int = 256
    num_return_sequences: int = 10
    num_beams: int = 10
    do_sample: bool = True
    temperature: float = 1.5
    top_p: float = 1.0
    early_stopping: bool = True  # beam search stops once num_beams sequences are finished (the release's)
    batch_size: int = 0  # prompts per HF generate call; 0: as many as fit the GPU (8 on a CPU)
    max_prompt_tokens: int = 1024
    max_examples: int = -1
    seed: int = 42
    dtype: str = "auto"  # auto: bfloat16 on a GPU (the release generated in bf16), float32 on a CPU
    backend: str = "auto"  # auto | hf | vllm
    tensor_parallel_size: int = 1  # vllm: GPUs one model is split over
    gpu_memory_utilization: float = 0.9  # vllm: share of GPU memory for weights and KV cache


BACKENDS = ("auto", "hf", "vllm")
CPU_BATCH_SIZE = 8
MAX_AUTO_BATCH_SIZE = 64


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
    """Function predictions are greedy with 32 new tokens (the release's); parameters use
    the configured decoding."""
    if config.mode == "function":
        return dict(max_new_tokens=FUNCTION_NEW_TOKENS, num_return_sequences=1, num_beams=1, do_sample=False)
    return dict(max_new_tokens=config.max_new_tokens, num_return_sequences=config.num_return_sequences,
                num_beams=config.num_beams, do_sample=config.do_sample, temperature=config.temperature,
                top_p=config.top_p, early_stopping=config.early_stopping)


def auto_batch_size(model: Any, dtype: Any, prompt_tokens: int, settings: dict[str, Any], free_bytes: int | None,
                    limit: int = MAX_AUTO_BATCH_SIZE) -> int:
    """Prompts per generate call: on a GPU (`free_bytes` known) as many as the estimate says
    fit, else the CPU default; raises with what to change when not even one fits."""
    from PUMA.modeling import fitting_batch_size, generation_bytes_per_prompt

    if free_bytes is None:
        return CPU_BATCH_SIZE
    sequences = max(settings["num_beams"], settings["num_return_sequences"])
    need = generation_bytes_per_prompt(model.config, dtype.itemsize, prompt_tokens, settings["max_new_tokens"],
                                       sequences)
    size = fitting_batch_size(need, free_bytes, limit)
    if size == 0:
        raise ValueError(f"one prompt of {prompt_tokens} tokens with {sequences} beams/samples and "
                         f"{settings['max_new_tokens']} new tokens needs about {need / 2**30:.1f} GiB, "
                         f"{free_bytes / 2**30:.1f} GiB of GPU memory are free: lower --num_beams, "
                         "--max_new_tokens or --max_prompt_tokens, or use --backend vllm")
    return size


def generate_outputs(config: GenerateConfig, prompts: list[str], log: Callable[[str], None] = print) -> list[list[str]]:
    """The outputs for each prompt, with the backend `config.backend` resolves to."""
    from PUMA.modeling import encode_prompts, generate_texts, inference_device, load_causal_lm, resolve_dtype

    backend = resolve_backend(config.backend)
    settings = decoding_settings(config)
    log(f"generating with the {backend} backend")
    if backend == "vllm":
        from PUMA.vllm_backend import generate_texts_vllm, load_vllm, vllm_dtype

        llm, lora_request, tokenizer = load_vllm(config.model_path, dtype=vllm_dtype(config.dtype),
                                                 max_model_len=config.max_prompt_tokens + settings["max_new_tokens"],
                                                 seed=config.seed, tensor_parallel_size=config.tensor_parallel_size,
                                                 gpu_memory_utilization=config.gpu_memory_utilization, log=log)
        return generate_texts_vllm(llm, tokenizer, prompts, lora_request=lora_request,
                                   max_prompt_tokens=config.max_prompt_tokens, seed=config.seed, **settings)
    import torch

    device = inference_device()
    dtype = resolve_dtype(config.dtype, device, "bfloat16")
    model, tokenizer = load_causal_lm(config.model_path, for_generation=True, dtype=dtype)
    model = model.to(device)
    batch_size = config.batch_size
    if batch_size <= 0:
        longest = max((len(ids) for ids in encode_prompts(tokenizer, prompts, config.max_prompt_tokens)), default=1)
        free = torch.cuda.mem_get_info()[0] if device == "cuda" else None
        batch_size = auto_batch_size(model, dtype, longest, settings, free)
    log(f"{device}, {str(dtype).removeprefix('torch.')}, {batch_size} prompts per batch")
    return generate_texts(model, tokenizer, prompts, batch_size=batch_size, max_prompt_tokens=config.max_prompt_tokens,
                          seed=config.seed, log=log, **settings)


def generate_file(config: GenerateConfig, log: Callable[[str], None] = print) -> Path:
    from PUMA.modeling import read_json, write_json
    from PUMA.recipe import check_inputs, get_recipe, write_record

    if config.mode not in ("function", "param"):
        raise ValueError(f"--mode must be function or param, got {config.mode!r}")
    recipe = get_recipe(config.recipe)
    inputs = {"--data_file": config.data_file, "--model_path": config.model_path}
    check_inputs(recipe, inputs)
    examples = read_json(config.data_file)
    if config.max_examples > 0:
        examples = examples[:config.max_examples]
    prompts = {e["instruction"]: e["prompt"] for e in examples}  # repeated instructions keep one entry
    outputs = generate_outputs(config, list(prompts.values()), log)
    result = {instruction: list(dict.fromkeys(texts)) for instruction, texts in zip(prompts, outputs)}
    path = write_json(config.output_file, result)
    write_record(path, f"generate_{config.mode}", recipe, config, inputs, decoding=decoding_settings(config))
    log(f"{path}: {config.mode} outputs for {len(result)} instructions")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    generate_file(parse_config(GenerateConfig, argv, "python -m PUMA.generate", __doc__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
