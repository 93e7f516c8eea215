"""Loading causal LMs (full models or LoRA adapter folders) and batched generation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable


def _offline_if_local(path: str) -> None:
    if Path(path).exists():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def is_adapter_dir(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").exists()


def adapter_base_path(path: str | Path) -> str:
    return json.loads((Path(path) / "adapter_config.json").read_text())["base_model_name_or_path"]


def torch_dtype(bf16: bool = False, fp16: bool = False) -> Any:
    import torch

    return torch.bfloat16 if bf16 else torch.float16 if fp16 else torch.float32


DTYPES = ("auto", "float32", "bfloat16", "float16")


def inference_device() -> str:
    """`cuda` when a GPU is visible, else `cpu` (one process generates on one device)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(name: str, device: str, gpu_default: str = "bfloat16") -> Any:
    """The torch dtype for `name`: `auto` is float32 on a CPU and `gpu_default` on a GPU
    (bfloat16 becomes float16 on a GPU without bf16 support)."""
    import torch

    if name not in DTYPES:
        raise ValueError(f"dtype {name!r}: expected one of {', '.join(DTYPES)}")
    if name == "auto":
        name = "float32" if device == "cpu" else gpu_default
    if name == "bfloat16" and device == "cuda" and not torch.cuda.is_bf16_supported():
        name = "float16"
    return getattr(torch, name)


def load_tokenizer(path: str | Path, padding_side: str = "right") -> Any:
    """The tokenizer of a model or adapter folder (an adapter without one uses its base's),
    with a pad token (the EOS token when the model has none, as for Llama-2)."""
    from transformers import AutoTokenizer

    path = str(path)
    _offline_if_local(path)
    source = path
    if is_adapter_dir(path) and not (Path(path) / "tokenizer_config.json").exists():
        source = adapter_base_path(path)
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = padding_side
    return tokenizer


def checked_tokenizer(path: str, flag: str = "--model_path") -> Any:
    """`load_tokenizer(path)`, or a DataError naming `flag` when there is no tokenizer there:
    a step loads it before its long work (the memory embedding) so a wrong path ends at once."""
    from PersonalWAB.errors import DataError

    if not Path(path).exists() and (path.startswith(("/", ".", "~")) or path.count("/") > 1):
        raise DataError(f"{flag} {path}: no such model folder")
    try:
        return load_tokenizer(path)
    except (OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{flag} {path}: no tokenizer could be loaded from it ({reason})") from None


def load_causal_lm(path: str | Path, for_generation: bool = False, dtype: Any = None,
                   merge: bool = True) -> tuple[Any, Any]:
    """(model, tokenizer) from a model folder / hub name, or from a LoRA adapter folder
    (its base is loaded and the adapter merged in; `merge=False` keeps it beside the base,
    as the release generated, which rounds the same way as the release in half precision).
    For generation the tokenizer pads on the left and the model is in eval mode."""
    from transformers import AutoModelForCausalLM

    path = str(path)
    _offline_if_local(path)
    tokenizer = load_tokenizer(path, padding_side="left" if for_generation else "right")
    if is_adapter_dir(path):
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(adapter_base_path(path), dtype=dtype)
        model = PeftModel.from_pretrained(base, path)
        model = model.merge_and_unload() if merge else model
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if for_generation:
        model.eval()
    return model, tokenizer


def encode_prompts(tokenizer: Any, prompts: list[str], max_prompt_tokens: int | None = None) -> list[list[int]]:
    """The prompts' token ids with the tokenizer's special tokens (Llama's BOS); an over-long
    prompt keeps its first token and its end (the memory tail and the cue), the same for
    every generation backend."""
    encoded = tokenizer(prompts, add_special_tokens=True)["input_ids"]
    if max_prompt_tokens is None:
        return [list(ids) for ids in encoded]
    keep = max(max_prompt_tokens - 1, 0)
    return [list(ids) if len(ids) <= max_prompt_tokens else [ids[0], *ids[len(ids) - keep:]] for ids in encoded]


def left_padded(token_ids: list[list[int]], pad_token_id: int) -> dict[str, Any]:
    """A batch padded on the left (generation continues every row at the same position)."""
    import torch

    width = max(len(ids) for ids in token_ids)
    return {"input_ids": torch.tensor([[pad_token_id] * (width - len(ids)) + ids for ids in token_ids]),
            "attention_mask": torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in token_ids])}


def generation_bytes_per_prompt(config: Any, dtype_bytes: int, prompt_tokens: int, new_tokens: int,
                                sequences: int) -> int:
    """GPU memory one prompt needs while HF generates `sequences` continuations of it (beams
    or samples, all expanded before the prefill): its key/value cache at full length, the
    prefill's largest activations, and the fp32 next-token scores (logits, processed scores
    and beam scores)."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    cache = 2 * config.num_hidden_layers * kv_heads * head_dim * dtype_bytes * (prompt_tokens + new_tokens)
    prefill = prompt_tokens * (2 * config.intermediate_size + 4 * config.hidden_size) * dtype_bytes
    scores = 3 * config.vocab_size * 4
    return sequences * (cache + prefill + scores)


def fitting_batch_size(bytes_per_prompt: int, free_bytes: int, limit: int, headroom: float = 0.85) -> int:
    """How many prompts fit in `headroom` of `free_bytes` (at most `limit`; 0 when not one)."""
    return max(0, min(limit, int(free_bytes * headroom) // max(bytes_per_prompt, 1)))


RELEASE_TOP_K = 50  # the HF GenerationConfig default when the release sampled (transformers 4.x)


def release_generation_config(max_new_tokens: int, num_beams: int, do_sample: bool, temperature: float) -> Any:
    """The `GenerationConfig` the release's `test_llama.py` builds: as many sequences returned
    as beams, early stopping with beams, its temperature when sampling (0 for greedy, as its
    greedy commands set none), and the top-k it sampled with."""
    from transformers import GenerationConfig

    return GenerationConfig(num_beams=num_beams, max_new_tokens=max_new_tokens, num_return_sequences=num_beams,
                            early_stopping=num_beams != 1, use_cache=True,
                            temperature=temperature if do_sample and temperature > 0 else 0, do_sample=do_sample,
                            top_k=RELEASE_TOP_K if do_sample else None)


def text_after(header: str, text: str) -> str:
    """The release's reading of a generation: the whole decoded sequence, stripped, after the
    last `header` (the prompt's cue), leading whitespace of the answer kept."""
    return text.strip().split(header)[-1]


def generate_texts(model: Any, tokenizer: Any, prompts: list[str], *, max_new_tokens: int = 256,
                   num_return_sequences: int = 1, num_beams: int = 1, do_sample: bool = False,
                   temperature: float = 1.0, top_p: float = 1.0, early_stopping: bool = False, batch_size: int = 8,
                   max_prompt_tokens: int | None = None, seed: int | None = None,
                   log: Callable[[str], None] | None = None, release_after: str | None = None) -> list[list[str]]:
    """For each prompt, `num_return_sequences` continuations (decoded, stripped), in
    batches padded on the left; generation stops at the EOS token. A batch that runs the
    GPU out of memory is split in two and retried (down to one prompt).

    `release_after` (the prompt's cue) decodes as the release: its `GenerationConfig`
    (`release_generation_config`, `num_beams` sequences), the whole sequence decoded and
    read by `text_after`."""
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    device = next(model.parameters()).device
    beams = max(num_beams, 1)
    if release_after is not None:
        num_return_sequences = beams
        config = release_generation_config(max_new_tokens, beams, do_sample, temperature)
        config.pad_token_id = tokenizer.pad_token_id  # batches are padded (the release generated one prompt at a time)
        settings: dict[str, Any] = {"generation_config": config}
    else:
        settings = {"max_new_tokens": max_new_tokens, "num_return_sequences": num_return_sequences,
                    "num_beams": beams, "do_sample": do_sample,
                    "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
        if do_sample:
            settings.update(temperature=temperature, top_p=top_p)
        if beams > 1:
            settings["early_stopping"] = early_stopping
        if settings["num_beams"] < num_return_sequences and not do_sample:
            settings["num_beams"] = num_return_sequences
    encoded = encode_prompts(tokenizer, prompts, max_prompt_tokens)

    def run(chunk: list[list[int]]) -> list[list[str]]:
        batch = {k: v.to(device) for k, v in left_padded(chunk, tokenizer.pad_token_id).items()}
        with torch.no_grad():
            generated = model.generate(**batch, **settings)
        if release_after is not None:
            texts = [text_after(release_after, t) for t in tokenizer.batch_decode(generated, skip_special_tokens=True)]
        else:
            texts = [t.strip() for t in tokenizer.batch_decode(generated[:, batch["input_ids"].shape[1]:],
                                                               skip_special_tokens=True)]
        return [texts[i * num_return_sequences:(i + 1) * num_return_sequences] for i in range(len(chunk))]

    outputs: list[list[str]] = []
    start, size = 0, max(batch_size, 1)
    while start < len(encoded):
        chunk = encoded[start:start + size]
        try:
            outputs += run(chunk)
        except torch.OutOfMemoryError:
            if size == 1:
                raise RuntimeError(
                    f"one prompt of {len(chunk[0])} tokens with {max(beams, num_return_sequences)} beams/samples "
                    f"and {max_new_tokens} new tokens does not fit in GPU memory: lower --num_beams, "
                    "--max_new_tokens or --max_prompt_tokens, use --backend vllm, or a larger GPU") from None
            size //= 2
            torch.cuda.empty_cache()
            if log is not None:
                log(f"out of GPU memory: batch size lowered to {size}")
            continue
        start += len(chunk)
    return outputs


def read_json(path: str | Path) -> Any:
    """A step's JSON input; a DataError naming it when it is missing or not JSON."""
    from PersonalWAB.errors import DataError

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (ValueError, RecursionError) as exc:
        reason = "nested deeper than the parser allows" if isinstance(exc, RecursionError) else exc
        raise DataError(f"{path}: not valid JSON ({reason})") from None


def write_json(path: str | Path, content: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(content, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path
