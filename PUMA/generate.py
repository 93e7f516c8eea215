"""Step 3: generation with a fine-tuned model (a merged model folder, a hub name, or a
LoRA adapter folder, which is merged into its base on load).

- `--mode function`: function predictions for the prompts of a function data file
  (greedy, 32 new tokens, as the release).
- `--mode param`: parameter candidates for the prompts of a parameter data file;
  defaults are the release's DPO candidate settings (beam search with 10 beams,
  sampling at temperature 1.5, 10 candidates, up to 256 new tokens, early stopping).
  For final predictions use `--num_return_sequences 1 --num_beams 1 --do_sample 0`.

`--prompts release` (the release recipe) generates as the release's `test_llama.py`: a
parameter prompt is built again from the example (`load_param_prompt`): the parameter prompt
with the bare instruction (no product block), the stored memory cut to `--mem_token_length`
tokens, and as tool the first output of `--function_file` for the instruction (the *predicted*
function, step 3a); the release's `GenerationConfig` (as many sequences as beams, top-k 50 when
sampling); prompts never cut; an adapter kept unmerged; each output read from the whole decoded
sequence after the prompt's cue (`### Tool:` / `### Tool Parameter:`), leading whitespace kept;
every output listed, repeats included. `--prompts training` (the improved recipe): the
example's training prompt as it is (cut to `--max_prompt_tokens`), the new tokens decoded and
stripped, repeats dropped.

Every decoding field is set by the step's settings (`PUMA.modeling.decoding_config`; vLLM: every
sampling field), so the model folder's `generation_config.json` changes nothing (transformers 5
would fill unset fields from it: Llama-2-chat's sampling at top-p 0.9, say). The record's
`effective_decoding` lists what the backend ran with.

Output (`--out`): JSON object instruction text -> list of outputs, and its record
(`<output>.puma_run.json`: recipe, settings, decoding).

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
from dataclasses import dataclass, replace
from pathlib import Path
from collections.abc import Callable
from typing import Any, Literal, cast

from PersonalWAB.settings import setting
from PersonalWAB.shards import SHARD_HELP, shard_setting
from PUMA.modeling import DTYPES
from PUMA.prompting import FUNCTION_NEW_TOKENS
from PUMA.recipe import RECIPE_HELP
from PUMA.vllm_backend import BACKENDS, resolve_backend


MODES = ("function", "param")
# release: the release's rebuilt prompts, GenerationConfig and whole-sequence decoding; training: the
# example's training prompt, the project's GenerationConfig, the new tokens decoded
Prompts = Literal["release", "training"]


@dataclass
class GenerateConfig:
    """Step 3's settings."""

    model_path: str = setting("PUMA/output/sft_merged", "the fine-tuned model: a merged model folder, a hub name, or "
                              "a LoRA adapter folder (merged into its base on load)")
    mode: str = setting("param", "function predictions (greedy, 32 new tokens) or parameter candidates",
                        choices=MODES)
    data_file: str = setting("PUMA/data/param_train.json", "step 1's examples whose prompts are generated from")
    output_file: str = setting("PUMA/output/param_candidates_train.json", "JSON file instruction -> outputs (its "
                               "record beside it)", flag="out", aliases=("output_file",), metavar="FILE")
    recipe: str = setting("release", RECIPE_HELP, metavar="NAME|FILE")
    prompts: Prompts = setting("release", "release: the release's prompts rebuilt (param mode: the predicted "
                               "function, the memory cut again), its GenerationConfig, the whole sequence decoded and "
                               "read after the cue; training: the example's training prompt, the new tokens decoded "
                               "and stripped, repeated outputs dropped")
    max_new_tokens: int = setting(256, "param mode: most tokens generated per candidate")
    num_return_sequences: int = setting(10, "param mode: candidates per prompt (release: equal to --num_beams)")
    num_beams: int = setting(10, "param mode: beams of the beam search (1: no beam search)")
    do_sample: bool = setting(True, "param mode: sample (with beams: beam sampling); 0 decodes greedily or by "
                              "beam search", aliases=("no-do_sample",))
    temperature: float = setting(1.5, "param mode: sampling temperature (higher: more diverse candidates)")
    top_p: float = setting(1.0, "param mode: nucleus sampling's probability mass (1: off)")
    early_stopping: bool = setting(True, "param mode: beam search stops once num_beams sequences are finished "
                                   "(the release's)", aliases=("no-early_stopping",))
    batch_size: int = setting(0, "prompts per HF generate call; 0: as many as fit the free GPU memory (8 on a CPU)")
    max_prompt_tokens: int = setting(1024, "--prompts training: a longer prompt keeps its first token and its end; "
                                     "vllm: the context is this plus --max_new_tokens")
    function_file: str | None = setting(None, "param mode, --prompts release: step 3's function predictions for "
                                        "these instructions, whose first output names the prompt's tool")
    mem_token_length: int = setting(768, "param mode, --prompts release: the memory cut of the rebuilt prompt; must "
                                    "be the value the data was made with (checked against its record)")
    max_examples: int = setting(-1, "generate for the first N examples only; -1: all")
    seed: int = setting(42, "seed of the sampling")
    dtype: str = setting("auto", "model precision; auto: bfloat16 on a GPU (as the release generated), float32 on "
                         "a CPU", choices=DTYPES)
    backend: str = setting("auto", "hf: HF generate in left-padded batches; vllm: vLLM's offline engine (GPU, "
                           "much faster; beam sampling becomes sampling); auto: vllm when installed with a GPU",
                           choices=BACKENDS)
    tensor_parallel_size: int = setting(1, "vllm: GPUs one model is split over")
    gpu_memory_utilization: float = setting(0.9, "vllm: share of GPU memory for weights and KV cache")
    protocol_file: str | None = setting(None, "--prompts release: the protocol pack whose texts rebuild the prompts",
                                        default_text="the release pack when placed, else the project's")
    shard: str | None = setting(None, f"{SHARD_HELP} with puma merge_shards (the data file's instructions in order; "
                                "sampling draws each part apart, greedy and beam decoding give the unsharded outputs)",
                                metavar="I/N", kind=shard_setting)


CPU_BATCH_SIZE = 8
GPU_DTYPE = "bfloat16"  # `--dtype auto` on a GPU: the release's test_llama.py ran with --bf16


def dtype_name(config: GenerateConfig, device: str) -> str:
    """The precision the model generates in on `device` (cpu or cuda): `--dtype`, where auto is
    float32 on a CPU and GPU_DTYPE on a GPU."""
    if config.dtype != "auto":
        return config.dtype
    return "float32" if device == "cpu" else GPU_DTYPE
MAX_AUTO_BATCH_SIZE = 64


def decoding_settings(config: GenerateConfig) -> dict[str, Any]:
    """Function predictions are greedy with 32 new tokens (the release's); parameters use
    the configured decoding."""
    if config.mode == "function":
        return dict(max_new_tokens=FUNCTION_NEW_TOKENS, num_return_sequences=1, num_beams=1, do_sample=False,
                    temperature=0.0)
    if config.prompts == "release" and config.num_return_sequences != config.num_beams:
        raise ValueError(f"--prompts release returns one sequence per beam (the release's test_llama.py): give "
                         f"--num_return_sequences {config.num_beams} with --num_beams {config.num_beams}")
    return dict(max_new_tokens=config.max_new_tokens, num_return_sequences=config.num_return_sequences,
                num_beams=config.num_beams, do_sample=config.do_sample, temperature=config.temperature,
                top_p=config.top_p, early_stopping=config.early_stopping)


def effective_settings(config: GenerateConfig, backend: str) -> dict[str, Any]:
    """Every decoding field the backend generates with, after all defaults (the record's
    `effective_decoding`): the same whatever the model folder's `generation_config.json` says."""
    settings = decoding_settings(config)
    if backend == "vllm":
        from PUMA.vllm_backend import vllm_sampling

        width = max(settings["num_beams"], settings["num_return_sequences"], 1)
        if not settings["do_sample"] and width > 1:
            return {"backend": "vllm", "beam_search": True, "beam_width": width,
                    "max_tokens": settings["max_new_tokens"]}
        return {"backend": "vllm", "max_tokens": settings["max_new_tokens"], "seed": config.seed,
                **vllm_sampling(settings["do_sample"], settings["num_return_sequences"], settings["temperature"],
                                settings.get("top_p", 1.0))}
    from PUMA.modeling import decoding_config, effective_decoding

    return {"backend": "hf", "seed": config.seed,
            **effective_decoding(decoding_config(
                None, decoding="release" if config.prompts == "release" else "project", **settings))}


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


def release_cue(protocol: Any, mode: str) -> str:
    """The line after which the release reads a generation (`### Tool:` / `### Tool Parameter:`)."""
    from PUMA.prompting import prompt_cue

    return prompt_cue(protocol.text("puma.function_prompt" if mode == "function" else "puma.param_prompt"))


def release_param_prompts(protocol: Any, tokenizer: Any, examples: list[dict[str, Any]],
                          functions: dict[str, list[str]], mem_token_length: int) -> list[str]:
    """The release's `load_param_prompt`: the bare instruction, the stored memory cut to
    `mem_token_length` tokens, the predicted function's text as the tool."""
    from PUMA.prompting import cut_to_tokens

    prompts = []
    for example in examples:
        predicted = functions.get(example["instruction"])
        if not predicted:
            raise ValueError(f"--function_file has no prediction for the instruction {example['instruction'][:80]!r} "
                             "(generate the functions of this split first: PUMA/scripts/generate_function.sh)")
        memory = cut_to_tokens(example["memory"], tokenizer, mem_token_length)
        prompts.append(protocol.puma_param_prompt(example["instruction"], predicted[0], memory))
    return prompts


def generate_outputs(config: GenerateConfig, prompts: list[str], log: Callable[[str], None] = print,
                     release_after: str | None = None) -> list[list[str]]:
    """The outputs for each prompt, with the backend `config.backend` resolves to
    (`release_after`: decoded as the release, see `PUMA.modeling.generate_texts`)."""
    from PUMA.modeling import encode_prompts, generate_texts, inference_device, load_causal_lm, resolve_dtype

    backend = resolve_backend(config.backend)
    settings = decoding_settings(config)
    max_prompt_tokens = None if release_after is not None else config.max_prompt_tokens
    log(f"generating with the {backend} backend")
    if backend == "vllm":
        from PUMA.vllm_backend import generate_texts_vllm, load_vllm, vllm_dtype

        llm, lora_request, tokenizer = load_vllm(config.model_path, dtype=vllm_dtype(config.dtype),
                                                 max_model_len=config.max_prompt_tokens + settings["max_new_tokens"],
                                                 seed=config.seed, tensor_parallel_size=config.tensor_parallel_size,
                                                 gpu_memory_utilization=config.gpu_memory_utilization, log=log)
        return generate_texts_vllm(llm, tokenizer, prompts, lora_request=lora_request,
                                   max_prompt_tokens=max_prompt_tokens, seed=config.seed,
                                   release_after=release_after, **settings)
    import torch

    device = inference_device()
    dtype = resolve_dtype(dtype_name(config, device), device)
    model, tokenizer = load_causal_lm(config.model_path, for_generation=True, dtype=dtype,
                                      merge=release_after is None)  # the release kept its adapter unmerged
    model = model.to(device)
    batch_size = config.batch_size
    if batch_size <= 0:
        longest = max((len(ids) for ids in encode_prompts(tokenizer, prompts, max_prompt_tokens)), default=1)
        free = torch.cuda.mem_get_info()[0] if device == "cuda" else None
        batch_size = auto_batch_size(model, dtype, longest, settings, free)
    log(f"{device}, {str(dtype).removeprefix('torch.')}, {batch_size} prompts per batch")
    return generate_texts(model, tokenizer, prompts, batch_size=batch_size, max_prompt_tokens=max_prompt_tokens,
                          seed=config.seed, log=log, release_after=release_after, **settings)


def generate_file(config: GenerateConfig, log: Callable[[str], None] = print) -> Path:
    from PUMA.modeling import local_files_only, model_family_of, read_json, write_json
    from PUMA.lineage import check_carried
    from PersonalWAB.shards import shard_part, shard_plan
    from PUMA.recipe import check_inputs, get_recipe, write_record

    if config.mode not in ("function", "param"):
        raise ValueError(f"--mode must be function or param, got {config.mode!r}")
    recipe = get_recipe(config.recipe)
    release = config.prompts == "release"
    if release and config.mode == "param" and not config.function_file:
        raise ValueError("--prompts release --mode param needs --function_file: the release's prompt names the "
                         "predicted function (step 3a's output for these instructions)")
    inputs = {"--data_file": config.data_file, "--model_path": config.model_path,
              "--function_file": config.function_file if release and config.mode == "param" else None}
    check_inputs(recipe, inputs)
    notes = check_carried("generate", config, inputs, log)
    local_files_only(config.model_path, "--model_path")  # a model it cannot load ends here, before the data loads
    examples = read_json(config.data_file)
    if config.max_examples > 0:
        examples = examples[:config.max_examples]
    part, places = shard_part(list(dict.fromkeys(e["instruction"] for e in examples)), config.shard)
    examples = [e for e in examples if e["instruction"] in part]
    cue = None
    if release:
        from PersonalWAB.protocol import load_protocol
        from PUMA.modeling import load_tokenizer

        protocol = load_protocol(config.protocol_file)
        cue = release_cue(protocol, config.mode)
        texts = [e["prompt"] for e in examples] if config.mode == "function" else release_param_prompts(
            protocol, load_tokenizer(config.model_path), examples,
            read_json(cast(str, config.function_file)),  # checked above: the release's param mode needs it
            config.mem_token_length)
        prompts = list(zip((e["instruction"] for e in examples), texts))  # one generation per example
    else:
        prompts = list({e["instruction"]: e["prompt"] for e in examples}.items())  # repeats keep one entry
    backend = resolve_backend(config.backend)
    outputs = generate_outputs(replace(config, backend=backend), [text for _, text in prompts], log, release_after=cue)
    result = {instruction: texts if release else list(dict.fromkeys(texts))
              for (instruction, _), texts in zip(prompts, outputs)}  # release: the last repeat's outputs
    path = write_json(config.output_file, result)
    write_record(path, "generate", recipe, config, inputs, decoding=decoding_settings(config),
                 effective_decoding=effective_settings(config, backend),
                 prompts="release load_param_prompt (predicted function, bare instruction)"
                 if release and config.mode == "param" else "the data file's prompts",
                 prompt_cut=None if release else config.max_prompt_tokens, input_notes=notes,
                 base_model=model_family_of(config.model_path),
                 batching="left-padded batches (the release: one prompt per generate call; the same outputs, "
                          "measured by the parity harness)",
                 **({"shard_plan": shard_plan(places, list(result))} if config.shard else {}))
    shard = f", shard {config.shard}" if config.shard else ""
    log(f"{path}: {config.mode} outputs for {len(result)} instructions{shard}")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    generate_file(parse_step(GenerateConfig, argv, "python -m PUMA.generate", __doc__, "generate"))
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
