"""PUMA's generation (`PUMA.generate`, and the live agent's generator) depends on the recipe alone:
a model folder whose `generation_config.json` carries sampling defaults (Llama-2-chat's
`do_sample`, temperature 0.6, top-p 0.9; Qwen2.5's repetition penalty and top-k) generates exactly
what the same weights without them do, under both recipes, greedy and sampled, in `puma generate`
and in the live agent; and `--recipe release` decodes with the SentencePiece model itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from PersonalWAB.runner.config import RunConfig
from PUMA.agent_settings import PumaAgentSettings
from PUMA.cli import recipe_config

# Llama-2-7b-chat-hf's generation_config.json, with Qwen2.5-Instruct's penalty and top-k added
FOLDER_DEFAULTS = {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.3,
                   "max_length": 4096}
EXAMPLES = [{"instruction": "find a red kettle for my kitchen", "memory": "Title:Kettle\nMain Category:Home\n",
             "prompt": "Instruction: find a red kettle for my kitchen\nParameter: ", "product": None},
            {"instruction": "recommend a mug", "memory": "Title:Mug\n",
             "prompt": "Instruction: recommend a mug\nParameter: ", "product": None}]


@pytest.fixture(scope="module")
def two_folders(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny model as it is, and a copy whose generation_config.json gains `FOLDER_DEFAULTS`."""
    shipped = tmp_path_factory.mktemp("with_defaults") / "model"
    shutil.copytree(tiny_model_dir, shipped)
    config_file = shipped / "generation_config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    config_file.write_text(json.dumps({**config, **FOLDER_DEFAULTS}))
    return tiny_model_dir, shipped


def generate(model: Path, out: Path, recipe: str, sampled: bool) -> tuple[dict, dict]:
    from PUMA.generate import GenerateConfig, generate_file
    from PUMA.modeling import write_json

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "param.json", EXAMPLES)
    write_json(out / "functions.json", {e["instruction"]: ["search_product_by_query"] for e in EXAMPLES})
    decoding = dict(num_beams=3, num_return_sequences=3, do_sample=True, temperature=1.5) if sampled else \
        dict(num_beams=1, num_return_sequences=1, do_sample=False)
    path = generate_file(recipe_config(GenerateConfig, "generate", recipe, model_path=str(model), mode="param",
                                       backend="hf", data_file=str(out / "param.json"),
                                       function_file=str(out / "functions.json"),
                                       output_file=str(out / "outputs.json"), max_new_tokens=12, batch_size=2,
                                       **decoding), log=lambda _: None)
    record = json.loads(path.with_name("outputs.puma_run.json").read_text())
    return json.loads(path.read_text()), record["effective_decoding"]


@pytest.mark.parametrize("recipe", ["release", "improved"])
@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_generate_ignores_the_model_folders_generation_defaults(two_folders, tmp_path: Path, recipe: str,
                                                                 sampled: bool):
    plain, shipped = two_folders
    outputs, effective = generate(plain, tmp_path / "plain", recipe, sampled)
    outputs_shipped, effective_shipped = generate(shipped, tmp_path / "shipped", recipe, sampled)
    assert outputs == outputs_shipped
    assert effective == effective_shipped
    assert (effective["repetition_penalty"], effective["top_p"], effective["do_sample"]) == (1.0, 1.0, sampled)
    assert effective["top_k"] == 50  # transformers 4.45's default, set, never the folder's 20


def test_the_folders_defaults_would_change_the_outputs(two_folders):
    """The inputs tell the two folders apart: generating without pinning every field (how
    transformers 5 treats a partial config) gives other greedy outputs from the folder with defaults."""
    import torch
    from transformers import GenerationConfig

    from PUMA.modeling import load_causal_lm

    outputs = []
    for folder in two_folders:
        model, tokenizer = load_causal_lm(folder, for_generation=True, dtype=torch.float32)
        ids = tokenizer([EXAMPLES[0]["prompt"]], return_tensors="pt")
        torch.manual_seed(0)
        partial = GenerationConfig(max_new_tokens=12, num_beams=1, pad_token_id=tokenizer.pad_token_id)
        outputs.append(model.generate(**ids, generation_config=partial).tolist())
    assert outputs[0] != outputs[1]


def run_config(**puma: object) -> RunConfig:
    return RunConfig(agent_strategy="puma", agent_options={"puma": recipe_config(PumaAgentSettings, "agent", **puma)})


def test_live_agent_records_its_effective_decoding():
    from PUMA.agent import recorded_settings

    release = recorded_settings(run_config(puma_generate=True, recipe="release"))
    improved = recorded_settings(run_config(puma_generate=True, recipe="improved"))
    assert release["decoding"]["function"]["max_new_tokens"] == 32
    assert release["decoding"]["param"]["max_new_tokens"] == 256
    assert all(not part["do_sample"] and part["repetition_penalty"] == 1.0 and part["top_k"] == 50
               for settings in (release, improved) for part in settings["decoding"].values())
    assert release["decoding"]["param"]["temperature"] == 0  # the release's greedy config sets 0
    assert recorded_settings(run_config(puma_generate=False, recipe="release")) == {"outputs": "files"}


def test_live_generation_ignores_the_folders_defaults(two_folders):
    from PUMA.agent import LiveGenerator

    prompt = EXAMPLES[0]["prompt"]
    for release in (True, False):
        texts = [LiveGenerator(str(folder), dtype="float32", max_new_tokens=12,
                               decoding="release" if release else "new_tokens").generate(
            prompt, cue="Parameter: " if release else None) for folder in two_folders]
        assert texts[0] == texts[1]


def test_release_decoding_is_the_sentencepiece_model_itself(tiny_data_dir: Path, tmp_path: Path):
    """The release decoded with its slow LlamaTokenizer (the SentencePiece model); transformers
    5's tokenizer puts other replacement characters where byte pieces form no valid UTF-8, so
    `--recipe release` decodes with the SentencePiece model."""
    import sentencepiece

    from PUMA.modeling import load_tokenizer, release_decode
    from PUMA.tiny_model import TinyModelConfig, make_tiny_model

    folder = make_tiny_model(tiny_data_dir, tmp_path / "sp", TinyModelConfig(vocab_size=400, tokenizer="sentencepiece"))
    tokenizer = load_tokenizer(folder)
    model = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    decode = release_decode(tokenizer)
    words = tokenizer("a red kettle for my kitchen")["input_ids"]
    # a stray continuation byte before the byte of ";": SentencePiece decodes the ";", transformers 5 does not
    broken = [words[1], model.piece_to_id("<0xB5>"), model.piece_to_id("<0x3B>"), words[2], tokenizer.eos_token_id]
    assert decode(words) == tokenizer.decode(words, skip_special_tokens=True) == "a red kettle for my kitchen"
    assert decode(broken) == model.decode(broken[:-1])
    assert decode(broken) != tokenizer.decode(broken, skip_special_tokens=True)  # the case that tells them apart
    bpe = load_tokenizer(make_tiny_model(tiny_data_dir, tmp_path / "bpe"))
    assert release_decode(bpe)(words[:3]) == bpe.decode(words[:3], skip_special_tokens=True)  # no SentencePiece file
