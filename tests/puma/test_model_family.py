"""PUMA on a base model that is not Llama-2: what the steps read from the model instead of
assuming it (special tokens around a text, tied embeddings, module names), what a step's record
says about it, `puma model prepare`'s refusals, and step 1's train-task sample. Model-free or
the tiny model; the real model's tests are in test_real_model.py (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


class NoPrefixTokenizer:
    """A tokenizer that adds no special token (as SmolLM2's): one id per character."""

    eos_token_id = 0

    def __call__(self, texts, add_special_tokens: bool = True):
        if isinstance(texts, str):
            return {"input_ids": [ord(c) for c in texts]}
        return {"input_ids": [[ord(c) for c in text] for text in texts]}


def test_a_llama_like_model_keeps_every_step_as_the_release(tiny_model_dir: Path):
    from PUMA.modeling import family_departures, load_tokenizer, model_family_of, special_prefix

    tokenizer = load_tokenizer(tiny_model_dir)
    facts = model_family_of(tiny_model_dir, tokenizer)
    assert special_prefix(tokenizer) == 1
    assert facts["special_tokens_before"] == 1 and facts["model_type"] == "llama" and not facts["tied_embeddings"]
    assert family_departures(facts, "sft") == []


def test_another_family_is_named_where_it_changes_a_step():
    from PUMA.modeling import family_departures

    facts = {"special_tokens_before": 0, "special_tokens_after": 0, "model_type": "llama", "tied_embeddings": True}
    lines = family_departures(facts, "sft")
    assert len(lines) == 2 and all(line.startswith("sft: ") for line in lines)
    assert "0 special token(s) before a text" in lines[0] and "untied" in lines[1]
    other = family_departures({**facts, "model_type": "gpt2", "special_tokens_after": 1}, "data")
    assert any("type gpt2" in line for line in other) and any("appends 1" in line for line in other)


def test_an_over_long_prompt_keeps_only_the_special_tokens_the_tokenizer_adds(tiny_model_dir: Path):
    from PUMA.modeling import encode_prompts, load_tokenizer

    assert encode_prompts(NoPrefixTokenizer(), ["abcdefgh", "ab"], 3) == [[ord("f"), ord("g"), ord("h")],
                                                                          [ord("a"), ord("b")]]
    tokenizer = load_tokenizer(tiny_model_dir)
    (ids,) = encode_prompts(tokenizer, ["a long prompt about kettles and toasters and more kettles"], 4)
    full = tokenizer("a long prompt about kettles and toasters and more kettles")["input_ids"]
    assert ids == [full[0], *full[-3:]] and full[0] == tokenizer.bos_token_id


def test_a_record_lists_the_base_models_departures(tmp_path: Path):
    from PUMA.recipe import get_recipe, write_record

    facts = {"special_tokens_before": 0, "special_tokens_after": 0, "model_type": "llama", "tied_embeddings": True}
    path = write_record(tmp_path / "out.json", "sft", get_recipe("release"), {"model_path": "m"}, base_model=facts)
    record = json.loads(path.read_text())
    assert record["base_model"] == facts and len(record["departures_from_release"]) == 2
    plain = write_record(tmp_path / "plain.json", "sft", get_recipe("release"), {"model_path": "m"},
                         base_model={**facts, "special_tokens_before": 1, "tied_embeddings": False})
    assert json.loads(plain.read_text())["departures_from_release"] == []


def test_lora_on_module_names_the_model_lacks_is_refused(tiny_model_dir: Path):
    from transformers import AutoModelForCausalLM

    from PUMA.lora import with_lora
    from PUMA.sft import SFTConfig

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with pytest.raises(ValueError, match=r"^--lora_target_modules: the model \(LlamaForCausalLM\) has no module "
                                         r"named c_attn"):
        with_lora(model, SFTConfig(lora_target_modules="q_proj,c_attn"))
    with pytest.raises(ValueError, match="^--modules_to_save: .* wte"):
        with_lora(model, SFTConfig(modules_to_save="wte,lm_head"))


def test_prepare_refuses_a_folder_it_did_not_make(tmp_path: Path):
    from PersonalWAB.errors import DataError
    from PUMA.pretrained import PrepareConfig, prepare

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(DataError, match="holds files this command did not write .* pass --overwrite"):
        prepare(PrepareConfig(name="smollm2-135m", out=str(tmp_path / "mine")), log=lambda _: None)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError, match="a file is in the way"):
        prepare(PrepareConfig(name="smollm2-135m", out=str(tmp_path / "file")), log=lambda _: None)


def test_prepare_without_the_package_says_how_to_install_it(tmp_path: Path, monkeypatch):
    from PersonalWAB.errors import DataError
    from PUMA import pretrained

    missing = pretrained.PackagedModel("no-such-model-package", "no_such_model_package", "m.gguf", "none", "none")
    monkeypatch.setitem(pretrained.PACKAGED, "smollm2-135m", missing)
    with pytest.raises(DataError, match=r"no-such-model-package .* not installed: bash scripts/setup.sh installs it "
                                        r"\(requirements-model.txt\)"):
        pretrained.prepare(pretrained.PrepareConfig(name="smollm2-135m", out=str(tmp_path / "m")), log=lambda _: None)
    assert not (tmp_path / "m").exists()


def test_train_tasks_is_a_seeded_sample_in_split_order(tiny_puma_data, tiny_model_dir: Path, tmp_path: Path):
    from PUMA.data import DataConfig, prepare_function_data

    config = DataConfig(data_dir=str(tiny_puma_data.data_dir), out_dir=str(tmp_path), train_tasks=12,
                        model_path=str(tiny_model_dir))
    prepare_function_data(config, log=lambda _: None)
    train = json.loads((tmp_path / "function_train.json").read_text())
    test = json.loads((tmp_path / "function_test.json").read_text())
    instructions = [task["task"] for task in tiny_puma_data.split("train")]
    assert len(train) == 12 and len(test) == len(tiny_puma_data.split("test"))
    positions = [instructions.index(e["instruction"]) for e in train]
    assert positions == sorted(positions)
    prepare_function_data(config, log=lambda _: None)
    assert json.loads((tmp_path / "function_train.json").read_text()) == train
    record = json.loads((tmp_path / "function_train.puma_run.json").read_text())
    assert record["settings"]["train_tasks"] == 12
    with pytest.raises(ValueError, match="^--train_tasks 0: "):
        prepare_function_data(DataConfig(data_dir=str(tiny_puma_data.data_dir), out_dir=str(tmp_path),
                                         train_tasks=0), log=lambda _: None)
