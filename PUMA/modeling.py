"""Loading causal LMs (full models or LoRA adapter folders) and batched generation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


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


def load_causal_lm(path: str | Path, for_generation: bool = False, dtype: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) from a model folder / hub name, or from a LoRA adapter folder
    (its base is loaded and the adapter merged in). For generation the tokenizer pads
    on the left and the model is in eval mode."""
    from transformers import AutoModelForCausalLM

    path = str(path)
    _offline_if_local(path)
    tokenizer = load_tokenizer(path, padding_side="left" if for_generation else "right")
    if is_adapter_dir(path):
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(adapter_base_path(path), dtype=dtype)
        model = PeftModel.from_pretrained(base, path).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if for_generation:
        model.eval()
    return model, tokenizer


def encode_prompts(tokenizer: Any, prompts: list[str], max_prompt_tokens: int | None = None,
                   **options: Any) -> Any:
    """The prompts' token ids with BOS; an over-long prompt keeps its BOS and its end (the
    memory tail and the cue), the same for every generation backend."""
    tokenizer.truncation_side = "left"
    return tokenizer(prompts, add_special_tokens=True, truncation=max_prompt_tokens is not None,
                     max_length=max_prompt_tokens, **options)


def generate_texts(model: Any, tokenizer: Any, prompts: list[str], *, max_new_tokens: int = 256,
                   num_return_sequences: int = 1, num_beams: int = 1, do_sample: bool = False,
                   temperature: float = 1.0, top_p: float = 1.0, batch_size: int = 8,
                   max_prompt_tokens: int | None = None, seed: int | None = None) -> list[list[str]]:
    """For each prompt, `num_return_sequences` continuations (decoded, stripped), in
    batches padded on the left; generation stops at the EOS token."""
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    tokenizer.padding_side = "left"
    device = next(model.parameters()).device
    settings: dict[str, Any] = {"max_new_tokens": max_new_tokens, "num_return_sequences": num_return_sequences,
                                "num_beams": max(num_beams, 1), "do_sample": do_sample,
                                "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
    if do_sample:
        settings.update(temperature=temperature, top_p=top_p)
    if settings["num_beams"] < num_return_sequences:
        settings["num_beams"] = num_return_sequences if not do_sample else settings["num_beams"]
    outputs: list[list[str]] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start:start + batch_size]
        encoded = encode_prompts(tokenizer, chunk, max_prompt_tokens, return_tensors="pt", padding=True)
        encoded = {k: v.to(device) for k, v in encoded.items()}
        with torch.no_grad():
            generated = model.generate(**encoded, **settings)
        new_tokens = generated[:, encoded["input_ids"].shape[1]:]
        texts = [t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]
        for i in range(len(chunk)):
            outputs.append(texts[i * num_return_sequences:(i + 1) * num_return_sequences])
    return outputs


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_json(path: str | Path, content: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(content, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path
