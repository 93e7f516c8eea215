"""Step 3 on vLLM: the optional fast generation backend of `PUMA.generate`.

`--backend auto` picks it when the `vllm` package is installed and a GPU is visible;
`--backend vllm` insists on it. Prompts are tokenized by the model's own tokenizer
exactly as the HF backend does (BOS added, over-long prompts keep their end) and sent as
token ids, and outputs are decoded by that tokenizer too, so both backends read and
write the same text. A LoRA adapter folder is served on its base model through vLLM's
LoRA support instead of being merged.

Decoding maps onto vLLM's offline API (checked against vLLM 0.33.0):
- sampling (`do_sample`): `n` samples at `temperature`/`top_p`, seeded per request.
  vLLM has no beam *sampling*, so the release's candidate setting (10 beams with
  sampling) becomes plain sampling there;
- no sampling with several beams or return sequences: `LLM.beam_search` with width
  max(num_beams, num_return_sequences), best beams first;
- otherwise greedy (temperature 0).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

BACKENDS = ("auto", "hf", "vllm")  # generation backends: `auto` picks one (resolve_backend)
# The adapter ranks vLLM can reserve room for (vllm.config.lora.MaxLoRARanks).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def resolve_backend(name: str) -> str:
    """`hf` or `vllm`; `auto` means vLLM when it is installed and a GPU is visible."""
    if name not in BACKENDS:
        raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "vllm" and not vllm_installed():
        raise ValueError("--backend vllm: the vllm package is not installed (pip install vllm on a GPU machine), "
                         "or use --backend hf")
    if name == "auto":
        import torch

        return "vllm" if vllm_installed() and torch.cuda.is_available() else "hf"
    return name


def lora_rank_limit(rank: int) -> int:
    """The smallest rank vLLM accepts as `max_lora_rank` that holds an adapter of `rank`."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank} is above the largest vLLM supports ({VLLM_LORA_RANKS[-1]})")


def vllm_dtype(name: str) -> str:
    """vLLM's dtype for a `--dtype` value: `auto` is bfloat16, as the release generated."""
    return "bfloat16" if name == "auto" else name


def saves_whole_modules(path: str | Path) -> bool:
    """Whether a LoRA adapter also stores whole modules (`modules_to_save`), which vLLM's
    LoRA support refuses."""
    return bool(json.loads((Path(path) / "adapter_config.json").read_text()).get("modules_to_save"))


def load_vllm(model_path: str | Path, *, dtype: str = "bfloat16", max_model_len: int | None = None, seed: int = 0,
              tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
              log: Any = print) -> tuple[Any, Any, Any]:
    """(vllm.LLM, LoRARequest or None, tokenizer) for a model folder / hub name or a LoRA
    adapter folder. An adapter with `modules_to_save` (both recipes train embed_tokens,
    lm_head and the norms) is merged into its base once, in `<adapter>/merged`, and that
    model is served."""
    from vllm import LLM

    from PUMA.modeling import _offline_if_local, adapter_base_path, is_adapter_dir, load_tokenizer

    path = str(model_path)
    _offline_if_local(path)
    settings: dict[str, Any] = dict(dtype=dtype, seed=seed, max_model_len=max_model_len,
                                    tensor_parallel_size=tensor_parallel_size,
                                    gpu_memory_utilization=gpu_memory_utilization,
                                    generation_config="vllm")  # the folder's generation defaults never apply
    if is_adapter_dir(path) and saves_whole_modules(path):
        merged = Path(path) / "merged"
        if not (merged / "config.json").exists():
            from PUMA.merging import MergeConfig, merge_adapter
            from PUMA.recipe import read_record

            log(f"{path}: the adapter stores whole modules, which vLLM cannot serve; merging it into {merged}")
            recipe = (read_record(path) or {}).get("recipe", "release")
            merge_adapter(MergeConfig(adapter_path=path, output_dir=str(merged), recipe=recipe, bf16=True))
        path = str(merged)
    tokenizer = load_tokenizer(path)
    if not is_adapter_dir(path):
        return LLM(model=path, **settings), None, tokenizer
    from vllm.lora.request import LoRARequest

    rank = int(json.loads((Path(path) / "adapter_config.json").read_text())["r"])
    base = adapter_base_path(path)
    tokenizer_source = path if (Path(path) / "tokenizer_config.json").exists() else base
    llm = LLM(model=base, tokenizer=tokenizer_source, enable_lora=True, max_lora_rank=lora_rank_limit(rank),
              **settings)
    return llm, LoRARequest(lora_name="puma", lora_int_id=1, lora_path=path), tokenizer


def vllm_sampling(do_sample: bool, num_return_sequences: int, temperature: float, top_p: float) -> dict[str, Any]:
    """Every sampling field of vLLM's `SamplingParams` set, as the HF path sets them
    (`PUMA.modeling.DECODING_DEFAULTS`: top-k 50 when sampling, no penalties), so neither the
    model folder's generation config (the engine is told to ignore it) nor vLLM's defaults enter."""
    from PUMA.modeling import DECODING_DEFAULTS

    return dict(n=num_return_sequences if do_sample else 1, temperature=temperature if do_sample else 0.0,
                top_p=top_p if do_sample else 1.0, top_k=DECODING_DEFAULTS["top_k"] if do_sample else -1,
                min_p=0.0, repetition_penalty=DECODING_DEFAULTS["repetition_penalty"], presence_penalty=0.0,
                frequency_penalty=0.0)


def generate_texts_vllm(llm: Any, tokenizer: Any, prompts: list[str], *, lora_request: Any = None,
                        max_new_tokens: int = 256, num_return_sequences: int = 1, num_beams: int = 1,
                        do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                        early_stopping: bool = True, max_prompt_tokens: int | None = None,
                        seed: int | None = None, release_after: str | None = None) -> list[list[str]]:
    """For each prompt, `num_return_sequences` continuations (decoded, stripped), with the
    decoding arguments of `PUMA.modeling.generate_texts`; vLLM batches all prompts itself.
    vLLM's beam search has no early-stopping switch: a beam ends at EOS or the length limit.
    `release_after`: sampled with the release's top-k and read from the whole decoded
    sequence as the release reads it (`PUMA.modeling.text_after`)."""
    from PUMA.modeling import encode_prompts, release_decode, text_after

    prompt_ids = encode_prompts(tokenizer, prompts, max_prompt_tokens)
    requests = [{"prompt_token_ids": list(ids)} for ids in prompt_ids]
    width = max(num_beams, num_return_sequences, 1)
    if not do_sample and width > 1:
        from vllm.sampling_params import BeamSearchParams

        results = llm.beam_search(requests, BeamSearchParams(beam_width=width, max_tokens=max_new_tokens),
                                  lora_request=lora_request)
        continuations = [[beam.tokens[len(ids):] for beam in result.sequences[:num_return_sequences]]
                         for ids, result in zip(prompt_ids, results)]
    else:
        from vllm import SamplingParams

        params = SamplingParams(**vllm_sampling(do_sample, num_return_sequences, temperature, top_p), seed=seed,
                                max_tokens=max_new_tokens, detokenize=False)
        results = llm.generate(requests, params, use_tqdm=False, lora_request=lora_request)
        continuations = [[list(output.token_ids) for output in result.outputs] for result in results]
    if release_after is not None:
        decode = release_decode(tokenizer)
        return [[text_after(release_after, decode(ids + list(tokens))) for tokens in outputs]
                for ids, outputs in zip(prompt_ids, continuations)]
    return [[text.strip() for text in tokenizer.batch_decode(tokens, skip_special_tokens=True)]
            for tokens in continuations]
