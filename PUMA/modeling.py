"""Loading causal LMs (full models or LoRA adapter folders) and batched generation."""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any, Literal

# One request to the hub, answered or not within this time, says whether a hub id can be loaded
# (the hub's client retries an unreachable host for about 50 s before it says anything).
HUB_PROBE_TIMEOUT_S = 1.5
HUB_FILES = ("config.json", "tokenizer_config.json")  # either one cached: the model was downloaded
_TRUE = {"1", "ON", "YES", "TRUE"}


def looks_like_folder(path: str) -> bool:
    """A path meant as a local folder (absolute, relative with a dot, `~`, or deeper than a
    hub id's `owner/name`)."""
    return path.startswith(("/", ".", "~")) or path.count("/") > 1


def hub_offline() -> bool:
    """Whether the hub is switched off for this process (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    return any((os.environ.get(name) or "").upper() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_cached(repo_id: str) -> bool:
    """Whether the local hub cache holds a downloaded copy of `repo_id`."""
    from huggingface_hub import try_to_load_from_cache

    for filename in HUB_FILES:
        try:
            if isinstance(try_to_load_from_cache(repo_id, filename), str):
                return True
        except ValueError:  # not a valid repo id
            return False
    return False


def _unreachable(exc: BaseException) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.gaierror):
        return "does not resolve"
    if isinstance(reason, ConnectionRefusedError):
        return "refuses connections"
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return f"gave no answer within {HUB_PROBE_TIMEOUT_S:g} s"
    return f"cannot be reached ({reason})"


@cache
def hub_problem(endpoint: str, repo_id: str) -> str | None:
    """Why the hub at `endpoint` cannot serve `repo_id` now ("does not resolve", "refuses
    connections", "answered HTTP 503", ...), or None when it answers. One request, never
    retried, waited for at most HUB_PROBE_TIMEOUT_S (a name lookup that hangs included); an
    answer such as 401 or 404 counts as reachable, and the load then says what it means."""
    outcome: list[str | None] = []

    def ask() -> None:
        request = urllib.request.Request(f"{endpoint}/api/models/{repo_id}", method="HEAD")
        try:
            with urllib.request.urlopen(request, timeout=HUB_PROBE_TIMEOUT_S) as answer:
                status = answer.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except Exception as exc:  # whatever kept the request from an answer
            outcome.append(_unreachable(exc))
            return
        outcome.append(f"answered HTTP {status}" if status >= 500 else None)

    thread = threading.Thread(target=ask, name="hub-probe", daemon=True)
    thread.start()
    thread.join(HUB_PROBE_TIMEOUT_S)
    return outcome[0] if outcome else f"gave no answer within {HUB_PROBE_TIMEOUT_S:g} s"


def local_files_only(path: str | Path, flag: str = "model") -> bool:
    """Whether `path` is to be loaded from local files alone: True for a local folder, and for
    a hub id whose cached copy is used (HF_HUB_OFFLINE set, or the hub unreachable); False for
    a hub id the hub answers for. A path that none of these can load raises a DataError at
    once, one line naming `flag` with what to do, instead of the hub client's retries."""
    from PersonalWAB.errors import DataError

    path = str(path)
    if Path(path).expanduser().exists():
        return True
    if looks_like_folder(path):
        raise DataError(f"{flag} {path}: no such model folder")
    cached = hub_cached(path)
    if hub_offline():
        if cached:
            return True
        raise DataError(f"{flag} {path}: not a local folder, and HF_HUB_OFFLINE is set but the hub cache has no "
                        f"copy of it: give a local model folder, or unset HF_HUB_OFFLINE where the hub can be reached")
    from huggingface_hub import constants

    problem = hub_problem(constants.ENDPOINT, path)
    if problem is None:
        return False
    if cached:
        return True
    raise DataError(f"{flag} {path}: not a local folder, and the Hugging Face hub ({constants.ENDPOINT}) {problem}: "
                    f"give a local model folder, or check the network (HF_ENDPOINT, proxy settings); "
                    f"with HF_HUB_OFFLINE=1 a copy in the hub cache is used")


def _offline_if_local(path: str) -> None:
    """For loaders that read the hub settings from the environment alone (vLLM): offline when
    `path` loads from local files (`local_files_only`)."""
    if local_files_only(path):
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
    path = str(path)
    source = path
    if is_adapter_dir(path) and not (Path(path) / "tokenizer_config.json").exists():
        source = adapter_base_path(path)
    local_only = local_files_only(source)  # before transformers loads (seconds): a path it cannot use ends now
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    if tokenizer.eos_token is None:
        from PersonalWAB.errors import DataError

        raise DataError(f"{source}: the tokenizer has no EOS token, which ends every PUMA label and every generation")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = padding_side
    return tokenizer


def special_prefix(tokenizer: Any) -> int:
    """How many special tokens the tokenizer puts before a text (Llama-2's BOS: 1; SmolLM2: 0)."""
    marked = tokenizer("a", add_special_tokens=True)["input_ids"]
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    return next((i for i in range(len(marked)) if marked[i:i + len(plain)] == plain), 0)


# What the release's code takes for granted of its base model, Llama-2-7b-chat-hf, where another model
# can differ and so change what a step does (the prompts are plain text in every case, as the release
# fed Llama-2-chat: no chat template is applied).
LLAMA2_FAMILY = {"model_type": "llama", "special_tokens_before": 1, "special_tokens_after": 0,
                 "tied_embeddings": False}


def model_family(tokenizer: Any, config: Any = None) -> dict[str, Any]:
    """The base model's facts a PUMA step depends on (recorded as `base_model` in its record)."""
    prefix = special_prefix(tokenizer)
    facts: dict[str, Any] = {"special_tokens_before": prefix,
                             "special_tokens_after": tokenizer.num_special_tokens_to_add() - prefix,
                             "bos_token": tokenizer.bos_token if prefix else None, "eos_token": tokenizer.eos_token,
                             "pad_token": tokenizer.pad_token,
                             "chat_template": bool(getattr(tokenizer, "chat_template", None))}
    if config is not None:
        facts.update(model_type=getattr(config, "model_type", None),
                     tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)))
    return facts


def family_departures(facts: dict[str, Any], step: str) -> list[str]:
    """Where a base model with these facts makes a step differ from what the release's code did on
    Llama-2 (empty for a Llama-2-like model: the tiny test model included)."""
    lines = []
    if facts.get("model_type") not in (None, LLAMA2_FAMILY["model_type"]):
        lines.append(f"{step}: the base model is of type {facts['model_type']}, not Llama (the release's code "
                     "loads LlamaForCausalLM)")
    if facts["special_tokens_before"] != LLAMA2_FAMILY["special_tokens_before"]:
        lines.append(f"{step}: the tokenizer puts {facts['special_tokens_before']} special token(s) before a text "
                     "(Llama-2: its BOS), so a memory cut to N tokens keeps N minus that many memory tokens "
                     "and every prompt starts with them")
    if facts["special_tokens_after"]:
        lines.append(f"{step}: the tokenizer appends {facts['special_tokens_after']} special token(s) to every text "
                     "(Llama-2: none)")
    if facts.get("tied_embeddings"):
        lines.append(f"{step}: the base model ties its input and output embeddings (Llama-2: two matrices); "
                     "modules_to_save trains a copy of each, so the adapter and the merged model have them untied")
    return lines


def model_family_of(path: str | Path, tokenizer: Any = None) -> dict[str, Any]:
    """`model_family` of a model or adapter folder (an adapter: its base's configuration)."""
    from transformers import AutoConfig

    source = adapter_base_path(path) if is_adapter_dir(path) else str(path)
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_files_only(source))
    except (OSError, ValueError):
        config = None
    return model_family(tokenizer if tokenizer is not None else load_tokenizer(path), config)


def checked_tokenizer(path: str, flag: str = "--model_path") -> Any:
    """`load_tokenizer(path)`, or a DataError naming `flag` when there is no tokenizer there:
    a step loads it before its long work (the memory embedding) so a wrong path ends at once."""
    from PersonalWAB.errors import DataError

    local_files_only(path, flag)
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
    path = str(path)
    tokenizer = load_tokenizer(path, padding_side="left" if for_generation else "right")
    from transformers import AutoModelForCausalLM

    model: Any
    if is_adapter_dir(path):
        from peft import PeftModel

        base_path = adapter_base_path(path)
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype,
                                                    local_files_only=local_files_only(base_path))
        model = PeftModel.from_pretrained(base, path)
        model = model.merge_and_unload() if merge else model
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=local_files_only(path))
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if for_generation:
        model.eval()
    return model, tokenizer


def encode_prompts(tokenizer: Any, prompts: list[str], max_prompt_tokens: int | None = None) -> list[list[int]]:
    """The prompts' token ids with the tokenizer's special tokens (Llama's BOS); an over-long
    prompt keeps the special tokens before it and its end (the memory tail and the cue), the
    same for every generation backend."""
    encoded = tokenizer(prompts, add_special_tokens=True)["input_ids"]
    if max_prompt_tokens is None:
        return [list(ids) for ids in encoded]
    head = special_prefix(tokenizer)
    keep = max(max_prompt_tokens - head, 0)
    return [list(ids) if len(ids) <= max_prompt_tokens else [*ids[:head], *ids[len(ids) - keep:]] for ids in encoded]


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


# Every decoding field at the value transformers 4.45 (the release's) gave a `GenerationConfig` that
# did not set it. Generation starts from these and from nothing else: transformers 5 fills each field
# a passed config leaves unset from the model folder's `generation_config.json` (Llama-2-chat ships
# do_sample, temperature 0.6, top_p 0.9; Qwen2.5 a repetition penalty and top-k), transformers 4.45
# took a passed config as it was, so a model folder's defaults would change what either recipe makes.
# (`max_length` is left out: every generation sets `max_new_tokens`, which takes precedence.)
DECODING_DEFAULTS: dict[str, Any] = {
    "max_new_tokens": None, "min_length": 0, "min_new_tokens": None, "early_stopping": False,
    "max_time": None, "stop_strings": None, "do_sample": False, "num_beams": 1, "num_beam_groups": 1,
    "penalty_alpha": None, "dola_layers": None, "use_cache": True, "temperature": 1.0, "top_k": 50, "top_p": 1.0,
    "min_p": None, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "diversity_penalty": 0.0,
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "length_penalty": 1.0, "no_repeat_ngram_size": 0,
    "bad_words_ids": None, "force_words_ids": None, "renormalize_logits": False, "forced_bos_token_id": None,
    "forced_eos_token_id": None, "remove_invalid_values": False, "exponential_decay_length_penalty": None,
    "suppress_tokens": None, "begin_suppress_tokens": None, "sequence_bias": None, "guidance_scale": None,
    "num_return_sequences": 1, "encoder_no_repeat_ngram_size": 0,
}
# A generation's GenerationConfig: the one the release's test_llama.py and agent build, or the project's.
Decoding = Literal["release", "project"]
# The special tokens transformers 4.45 still took from the model when a config was passed.
SPECIAL_TOKEN_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def decoding_config(tokenizer: Any, *, max_new_tokens: int, num_return_sequences: int = 1, num_beams: int = 1,
                    do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                    early_stopping: bool = False, decoding: Decoding = "project") -> Any:
    """The `GenerationConfig` of a generation, every decoding field set (`DECODING_DEFAULTS`
    where the settings say nothing), so the model folder's defaults cannot enter.

    `decoding="release"`: the config the release's `test_llama.py` and agent build (as many sequences
    as beams, early stopping with beams, temperature 0 when greedy, transformers 4.45's
    defaults for the rest: top-k 50 and top-p 1.0 when sampling). Otherwise the project's:
    temperature and top-p only when sampling, at least as many beams as sequences when not."""
    from transformers import GenerationConfig

    beams = max(num_beams, 1)
    if decoding == "release":
        chosen = dict(num_beams=beams, max_new_tokens=max_new_tokens, num_return_sequences=beams,
                      early_stopping=beams != 1, do_sample=do_sample,
                      temperature=temperature if do_sample and temperature > 0 else 0)
    else:
        chosen = dict(num_beams=beams if do_sample else max(beams, num_return_sequences), max_new_tokens=max_new_tokens,
                      num_return_sequences=num_return_sequences, do_sample=do_sample,
                      early_stopping=early_stopping if beams > 1 else False)
        if do_sample:
            chosen.update(temperature=temperature, top_p=top_p)
    config = GenerationConfig(**{**DECODING_DEFAULTS, **chosen})
    if tokenizer is not None:
        config.pad_token_id, config.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
        config.bos_token_id = tokenizer.bos_token_id
    return config


def effective_decoding(config: Any) -> dict[str, Any]:
    """The decoding fields a generation ran with (recorded in step 3's and the agent's records)."""
    return {key: getattr(config, key, None) for key in DECODING_DEFAULTS}


@contextmanager
def model_defaults_ignored(model: Any) -> Iterator[None]:
    """While generating, the model's own generation config holds only its special tokens (what
    transformers 4.45 still read from it beside a passed config), so nothing else of it merges in."""
    from transformers import GenerationConfig

    owner = model.get_base_model() if hasattr(model, "get_base_model") else model
    original = owner.generation_config
    owner.generation_config = GenerationConfig(**{key: getattr(original, key, None) for key in SPECIAL_TOKEN_FIELDS})
    try:
        yield
    finally:
        owner.generation_config = original


def release_decode(tokenizer: Any) -> Callable[[list[int]], str]:
    """Ids to text as the release decoded its generations: its slow `LlamaTokenizer`, which is
    the SentencePiece model itself with the special tokens skipped (measured equal on 3,000
    random id sequences). transformers 5's tokenizer decodes alike except where byte-fallback
    pieces form no valid UTF-8 (a random or undertrained model's output): there the two put
    other replacement characters. A tokenizer without a SentencePiece file decodes itself."""
    vocab_file = getattr(tokenizer, "vocab_file", None)
    if not vocab_file or not Path(vocab_file).is_file():
        return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)
    import sentencepiece

    model = sentencepiece.SentencePieceProcessor(model_file=str(vocab_file))
    special, size = set(tokenizer.all_special_ids), model.get_piece_size()

    def decode(ids: list[int]) -> str:
        kept = [i for i in ids if i not in special]
        if any(i >= size for i in kept):  # a token added beside the SentencePiece vocabulary
            return tokenizer.decode(ids, skip_special_tokens=True)
        return model.decode(kept)

    return decode


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

    Every decoding field comes from `decoding_config`, none from the model folder's
    `generation_config.json`. `release_after` (the prompt's cue) decodes as the release: its
    `GenerationConfig` (`num_beams` sequences), the whole sequence decoded as the release
    decoded it (`release_decode`) and read by `text_after`."""
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    device = next(model.parameters()).device
    beams = max(num_beams, 1)
    config = decoding_config(tokenizer, max_new_tokens=max_new_tokens, num_return_sequences=num_return_sequences,
                             num_beams=beams, do_sample=do_sample, temperature=temperature, top_p=top_p,
                             early_stopping=early_stopping,
                             decoding="release" if release_after is not None else "project")
    num_return_sequences = config.num_return_sequences
    encoded = encode_prompts(tokenizer, prompts, max_prompt_tokens)
    decode = release_decode(tokenizer) if release_after is not None else None

    def run(chunk: list[list[int]]) -> list[list[str]]:
        batch = {k: v.to(device) for k, v in left_padded(chunk, tokenizer.pad_token_id).items()}
        with torch.no_grad(), model_defaults_ignored(model):
            generated = model.generate(**batch, generation_config=config)
        if release_after is not None and decode is not None:
            texts = [text_after(release_after, decode(ids)) for ids in generated.tolist()]
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
    from PersonalWAB.scratch import atomic_write_text

    path = Path(path)
    atomic_write_text(path, json.dumps(content, ensure_ascii=False, indent=1))
    return path
