"""PUMA under `--recipe release`: one test (or more) per row of DESIGN §10, and what the
improved recipe changes. Tiny random Llama and locally trained tokenizer (CPU, no hub)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH
from PersonalWAB.errors import DataError
from PersonalWAB.protocol import project_protocol
from tests.conftest import REPO_ROOT



# --- step 1: memory order, k, relevance text, the BOS-inclusive cut ----------------------------------------------
def test_release_memory_defaults_and_bos_inclusive_cut(tiny_model_dir: Path):
    from PUMA.prompting import PUMA_TEMPLATE, cut_to_tokens, puma_behaviours
    from PUMA.data import DataConfig
    from PUMA.modeling import load_tokenizer

    assert DataConfig().memory_length == 100 and DataConfig().mem_token_length == 768
    assert PUMA_TEMPLATE == "puma.behaviour"
    assert puma_behaviours.__defaults__ == (PUMA_TEMPLATE,)
    tokenizer = load_tokenizer(tiny_model_dir)
    text = " | ".join(f"item {i} kettle mug tea" for i in range(400))
    cut = cut_to_tokens(text, tokenizer, 64)
    assert len(tokenizer(cut, add_special_tokens=True)["input_ids"]) == 64  # BOS + 63 memory tokens
    assert len(tokenizer(cut, add_special_tokens=False)["input_ids"]) == 63
    assert cut_to_tokens("short", tokenizer, 64) == "short"


def test_recommend_memory_newest_first_keeps_the_latest_purchase(tiny_puma_data, tiny_model_dir: Path):
    from PUMA.prompting import puma_behaviours
    from PUMA.data import latest_purchase_kept, param_examples
    from PUMA.modeling import load_tokenizer

    protocol = project_protocol()
    tasks = [t for t in tiny_puma_data.split("train") if t["type"] == "recommend"]
    for task in tasks[:5]:
        times = [b["review"]["timestamp"] for b in puma_behaviours(protocol, tiny_puma_data, task, "recommend", 100)]
        assert times == sorted(times, reverse=True)
    examples = param_examples(protocol, tiny_puma_data, tasks, "train", load_tokenizer(tiny_model_dir), 96, 100)
    kept, of = latest_purchase_kept(tiny_puma_data, tasks, examples)
    assert of > 0 and kept / of >= 0.95
    # the audit's order (oldest first, then cut) loses it: the same memory, reversed before the cut
    from PUMA.prompting import cut_to_tokens

    tokenizer = load_tokenizer(tiny_model_dir)
    oldest = [dict(e, prompt=cut_to_tokens(protocol.puma_memory(
        puma_behaviours(protocol, tiny_puma_data, t, "recommend", 100)[::-1], "recommend"), tokenizer, 96))
        for t, e in zip(tasks, examples)]
    assert latest_purchase_kept(tiny_puma_data, tasks, oldest)[0] < kept


# --- step 2: the release's loss over EOS padding, modules_to_save, warmup -----------------------------------------
def test_release_loss_counts_eos_padding_as_the_release_formula(tiny_model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM

    from PUMA.modeling import load_tokenizer
    from PUMA.sft import IGNORE_INDEX, ReleasePaddingCollator, encode_release

    tokenizer = load_tokenizer(tiny_model_dir)
    eos = tokenizer.eos_token_id
    prompt, label, width = "Instruction: find a kettle\nFunction: ", "search_product_by_query", 40
    example = encode_release(tokenizer, prompt, label, width)
    ids = tokenizer(prompt + label + tokenizer.eos_token)["input_ids"]
    n_prompt = len(tokenizer(prompt)["input_ids"])
    assert example["input_ids"] == ids and example["labels"] == [IGNORE_INDEX] * n_prompt + ids[n_prompt:]
    batch = ReleasePaddingCollator(eos, width)([example])
    pad = width - len(ids)
    assert pad > 0 and batch["input_ids"].shape == (1, width)
    assert batch["input_ids"][0, -pad:].tolist() == [eos] * pad == batch["labels"][0, -pad:].tolist()
    assert batch["attention_mask"][0].tolist() == [1] * len(ids) + [0] * pad

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        out = model(**batch)
        # the release's formula by hand: next-token cross-entropy averaged over every position
        # from the label's first token to max_length, the EOS padding included
        logits = out.logits[0]
        positions = range(n_prompt - 1, width - 1)
        manual = torch.stack([torch.nn.functional.cross_entropy(logits[p], batch["input_ids"][0, p + 1])
                              for p in positions]).mean()
    assert len(positions) == len(ids) - n_prompt + pad
    assert torch.isclose(out.loss, manual, atol=1e-5)


def _sft_examples(tiny_data) -> list[dict[str, str]]:
    from PUMA.data import function_examples

    return function_examples(project_protocol(), tiny_data.split("train")[:8], "train")


@pytest.mark.slow
def test_modules_to_save_are_trained_saved_and_merged(tiny_data, tiny_model_dir: Path, tmp_path: Path):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from PUMA.merging import MergeConfig, merge_adapter
    from PUMA.modeling import write_json
    from PUMA.sft import SFTConfig, train_sft

    write_json(tmp_path / "f.json", _sft_examples(tiny_data))
    config = SFTConfig(model_path=str(tiny_model_dir), train_on="function", function_data=str(tmp_path / "f.json"),
                       output_dir=str(tmp_path / "sft"), max_steps=2, per_device_train_batch_size=2,
                       gradient_accumulation_steps=1, max_length=96, save_strategy="no", learning_rate=1e-2)
    out = train_sft(config)
    record = json.loads((out / "puma_run.json").read_text())
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    lora = sum(p.numel() for n, p in base.named_parameters() if any(t in n for t in ("_proj",)))
    whole = sum(p.numel() for n, p in base.named_parameters() if "embed_tokens" in n or "lm_head" in n or "norm" in n)
    # a CPU test run: only the settings given for it depart from the release
    assert record["recipe"] == "release" and record["recipe_departures"] == []
    assert record["departures_from_release"] and all(line.endswith("(given for this run)")
                                                     for line in record["departures_from_release"])
    assert record["trainable_parameters"] > whole  # the saved-whole modules plus the LoRA matrices
    saved = load_file(out / "adapter_model.safetensors")
    for module in ("embed_tokens", "lm_head", "input_layernorm", "post_attention_layernorm", "model.norm"):
        assert any(module in key for key in saved), module
    assert lora > 0 and any("lora_A" in key for key in saved)
    merged = AutoModelForCausalLM.from_pretrained(merge_adapter(MergeConfig(adapter_path=str(out),
                                                                            output_dir=str(tmp_path / "m"))))
    trained_head = next(v for k, v in saved.items() if "lm_head" in k)
    assert torch.equal(merged.lm_head.weight, trained_head)
    assert not torch.equal(merged.lm_head.weight, base.lm_head.weight)


def test_warmup_ratio_schedule(tiny_data, tiny_model_dir: Path, tmp_path: Path):
    from PUMA.sft import SFTConfig, build_sft_trainer

    steps = 20
    config = SFTConfig(model_path=str(tiny_model_dir), output_dir=str(tmp_path), max_steps=steps, max_length=64)
    assert config.warmup_ratio == 0.1
    trainer, _ = build_sft_trainer(config, examples=_sft_examples(tiny_data))
    trainer.create_optimizer_and_scheduler(num_training_steps=steps)
    scheduler, peak = trainer.lr_scheduler, config.learning_rate
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        scheduler.step()
    warmup = math.ceil(0.1 * steps)
    expected = [peak * s / warmup if s < warmup else peak * (steps - s) / (steps - warmup) for s in range(steps)]
    assert rates == pytest.approx(expected)


def test_schedule_decay_and_clipping_are_settings_the_trainer_gets(tiny_data, tiny_model_dir: Path, tmp_path: Path):
    from PersonalWAB.settings import parse
    from PUMA.sft import SFTConfig, build_sft_trainer

    default = SFTConfig()
    assert (default.lr_scheduler_type, default.weight_decay, default.max_grad_norm) == ("linear", 0.0, 1.0)
    config = parse(SFTConfig, ["--lr_scheduler_type", "cosine", "--weight_decay", "0.01", "--max_grad_norm", "0.5",
                               "--model_path", str(tiny_model_dir), "--max_steps", "4", "--max_length", "64"])
    config.output_dir = str(tmp_path)
    trainer, _ = build_sft_trainer(config, examples=_sft_examples(tiny_data))
    assert (str(trainer.args.lr_scheduler_type.value), trainer.args.weight_decay, trainer.args.max_grad_norm) == (
        "cosine", 0.01, 0.5)
    trainer.create_optimizer_and_scheduler(num_training_steps=4)
    assert {group["weight_decay"] for group in trainer.optimizer.param_groups} == {0.0, 0.01}  # biases, norms: none
    with pytest.raises(SystemExit):
        parse(SFTConfig, ["--lr_scheduler_type", "bogus"])
    with pytest.raises(ValueError, match="--weight_decay -1.0"):
        SFTConfig(weight_decay=-1.0).check()


def test_any_argument_of_the_trainers_config_is_reachable(tiny_data, tiny_model_dir: Path, tmp_path: Path):
    """`--trainer_args NAME=VALUE` passes any argument of the trainer's own config (transformers'
    TrainingArguments for SFT, TRL's DPOConfig for DPO), converted by that config's parser; a name
    it lacks, a value it refuses and one the step sets itself are refused before any model loads."""
    from PersonalWAB.settings import parse
    from PUMA.dpo import DPOStepConfig
    from PUMA.sft import SFTConfig, build_sft_trainer

    config = parse(SFTConfig, ["--trainer_args", "adam_beta2=0.95", "lr_scheduler_kwargs={\"power\": 2.0}",
                               "--model_path", str(tiny_model_dir), "--max_steps", "2", "--max_length", "64"])
    config.output_dir = str(tmp_path)
    trainer, _ = build_sft_trainer(config, examples=_sft_examples(tiny_data))
    assert (trainer.args.adam_beta2, trainer.args.lr_scheduler_kwargs) == (0.95, {"power": 2.0})
    dpo = DPOStepConfig(trainer_args=["label_smoothing=0.1"])
    assert dpo.trainer_overrides(dpo.trainer_config_class()) == {"label_smoothing": 0.1}  # a DPO-only argument
    for args, fault in ((["adam_beta2"], "expected NAME=VALUE"), (["adam_beta3=1"], "has no argument adam_beta3"),
                        (["adam_beta2=high"], "invalid float value: 'high'"),
                        (["seed=1"], "this step sets seed itself")):
        with pytest.raises(ValueError, match=f"--trainer_args.*{fault}"):
            SFTConfig(trainer_args=args).check()
    with pytest.raises(ValueError, match="this step sets learning_rate itself"):
        build_sft_trainer(SFTConfig(model_path=str(tiny_model_dir), output_dir=str(tmp_path),
                                    trainer_args=["learning_rate=1"]), examples=_sft_examples(tiny_data))


def test_improved_recipe_packs_and_masks_all_but_the_labels(tiny_model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM

    from PUMA.modeling import load_tokenizer
    from PUMA.sft import IGNORE_INDEX, PackingCollator, encode_example, per_example_loss

    tokenizer = load_tokenizer(tiny_model_dir)
    pairs = [("Instruction: find a kettle\nFunction: ", "search_product_by_query"),
             ("Instruction: review the mug please\nParameter: ", "ok fine")]
    examples = [encode_example(tokenizer, p, label, 64) for p, label in pairs]
    batch = PackingCollator()(examples)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.config.use_cache = False
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits
        alone = [model(input_ids=torch.tensor([e["input_ids"]])).logits for e in examples]
    assert torch.allclose(packed, torch.cat(alone, dim=1), atol=1e-4)  # block-diagonal: each as if alone
    assert (batch["labels"] != IGNORE_INDEX).sum() == sum(
        sum(1 for x in e["labels"] if x != IGNORE_INDEX) for e in examples)
    means = [torch.nn.functional.cross_entropy(a[0, :-1], torch.tensor(e["labels"][1:]), ignore_index=IGNORE_INDEX)
             for a, e in zip(alone, examples)]
    assert torch.isclose(per_example_loss(packed, batch["labels"], batch["example_index"]),
                         torch.stack(means).mean(), atol=1e-4)


# --- step 3: generation settings ---------------------------------------------------------------------------------
def test_generation_settings_and_gpu_batch_size():
    from transformers import LlamaConfig

    from PUMA.generate import GenerateConfig, auto_batch_size, decoding_settings

    assert decoding_settings(GenerateConfig(mode="function")) == dict(
        max_new_tokens=32, num_return_sequences=1, num_beams=1, do_sample=False, temperature=0.0)
    candidates = decoding_settings(GenerateConfig(mode="param"))
    assert candidates == dict(max_new_tokens=256, num_return_sequences=10, num_beams=10, do_sample=True,
                              temperature=1.5, top_p=1.0, early_stopping=True)

    class Bf16:
        itemsize = 2

    llama7b = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                          vocab_size=32000)
    size = auto_batch_size(type("M", (), {"config": llama7b})(), Bf16, 1024, candidates, free_bytes=60 * 2**30)
    assert 1 <= size < 16  # 10 beams x 1280 tokens of KV cache: a few prompts per call on an 80 GB card
    with pytest.raises(ValueError, match="lower --num_beams"):
        auto_batch_size(type("M", (), {"config": llama7b})(), Bf16, 1024, candidates, free_bytes=2**30)


def test_live_generation_precision():
    import torch

    from PUMA.modeling import resolve_dtype

    assert resolve_dtype("auto", "cpu", "float16") == torch.float32
    assert resolve_dtype("auto", "cuda", "float16") == torch.float16  # the release's fp16 on a GPU
    assert resolve_dtype("float16", "cpu") == torch.float16
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype("half", "cpu")


# --- step 5: the release's pair rule ------------------------------------------------------------------------------
SCORES = {"a": {"x": 0.2, "y": 0.9, "z": 0.0, "w": 0.9, "v": 0.0}, "tie": {"p": 0.5, "q": 0.5, "r": 0.5},
          "one": {"s": 1.0}, "unscored": {}, "no_example": {"t": 0.1, "u": 0.3}}
EXAMPLES = [{"instruction": i, "prompt": f"P-{i}"} for i in ("a", "tie", "one", "unscored", "missing")]


def test_release_pair_rule_first_best_last_worst_ties_and_singles():
    from PUMA.dpo_data import make_pairs

    pairs = make_pairs(SCORES, EXAMPLES, skip_uninformative=False)
    assert [(p["instruction"], p["chosen"], p["rejected"]) for p in pairs] == [
        ("a", "y", "v"), ("tie", "p", "r"), ("one", "s", "s")]
    assert pairs[0]["prompt"] == "P-a" and pairs[0]["chosen_score"] == 0.9 and pairs[0]["rejected_score"] == 0.0
    assert len(pairs) == sum(1 for e in EXAMPLES if SCORES.get(e["instruction"]))  # one pair per scored example
    assert [p["instruction"] for p in make_pairs(SCORES, EXAMPLES, skip_uninformative=True)] == ["a"]


def test_pair_count_and_records_through_the_step(tmp_path: Path):
    from PUMA.dpo_data import DPODataConfig, build_dpo_data
    from PUMA.modeling import write_json

    # every scored instruction has its example (step 5 refuses scores of other instructions before any work)
    write_json(tmp_path / "scores.json", {i: scored for i, scored in SCORES.items() if i != "no_example"})
    write_json(tmp_path / "param.json", EXAMPLES)
    out = build_dpo_data(DPODataConfig(scores_file=str(tmp_path / "scores.json"),
                                       param_data=str(tmp_path / "param.json"),
                                       output_file=str(tmp_path / "dpo.json")), log=lambda _: None)
    record = json.loads((tmp_path / "dpo.puma_run.json").read_text())
    assert len(json.loads(out.read_text())) == record["pairs"] == record["scored_examples"] == 3
    with pytest.raises(ValueError, match="made with --recipe release .* whose settings differ"):
        build_dpo_data(DPODataConfig(scores_file=str(tmp_path / "scores.json"), param_data=str(out),
                                     output_file=str(tmp_path / "x.json"), recipe="improved"))


# --- step 6: DPO prompt truncation ---------------------------------------------------------------------------------
def test_release_dpo_cut_only_when_the_pair_does_not_fit():
    from PUMA.dpo import release_cut, whole_prompt_cut

    prompt, chosen, rejected = list(range(100)), [1] * 10, [2] * 20
    assert release_cut(prompt, chosen, rejected, 120, 64) == (prompt, chosen, rejected)  # fits: kept whole
    cut = release_cut(prompt, chosen, rejected, 110, 64)
    assert cut == (prompt[-64:], chosen, rejected)  # the start (header, instruction) is lost
    assert release_cut(prompt, chosen, [3] * 80, 110, 64) == (prompt[-64:], chosen, [3] * 46)
    assert whole_prompt_cut(prompt, chosen, [3] * 80, 110) == (prompt, chosen, [3] * 10)
    with pytest.raises(ValueError, match="no room for a response"):
        whole_prompt_cut(prompt, chosen, rejected, 100)


def test_dpo_prompts_keep_their_instruction(tiny_puma_data, tiny_model_dir: Path, tmp_path: Path):
    """Release: every pair that fits in max_length keeps its prompt, instruction included;
    improved: every prompt keeps its instruction (the memory is shortened instead)."""
    from PUMA.data import param_examples
    from PUMA.dpo import DPOStepConfig, encode_pairs, tokenize_pair
    from PUMA.dpo_data import DPODataConfig, fit_prompts
    from PUMA.modeling import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    protocol = project_protocol()
    tasks = tiny_puma_data.split("train")[:12]
    examples = param_examples(protocol, tiny_puma_data, tasks, "train", tokenizer, 256, 100)
    pairs = [{"prompt": e["prompt"], "chosen": e["label"], "rejected": "B000", "instruction": e["instruction"]}
             for e in examples]
    lengths = sorted(len(tokenizer(p["prompt"] + p["chosen"])["input_ids"]) + 1 for p in pairs)
    max_length = lengths[len(lengths) // 2]  # about half the pairs fit
    release = encode_pairs(DPOStepConfig(max_length=max_length, max_prompt_length=max_length - 40), tokenizer, pairs)
    fitting = 0
    for pair, row in zip(pairs, release):
        prompt_ids, chosen_ids, rejected_ids = tokenize_pair(tokenizer, pair["prompt"], pair["chosen"],
                                                             pair["rejected"])
        if len(prompt_ids) + max(len(chosen_ids), len(rejected_ids)) <= max_length:
            fitting += 1
            assert row == {"prompt_ids": prompt_ids, "chosen_ids": chosen_ids, "rejected_ids": rejected_ids}
            assert pair["instruction"] in tokenizer.decode(row["prompt_ids"], skip_special_tokens=True)
        else:
            assert row["prompt_ids"] == prompt_ids[-(max_length - 40):]
    assert 0 < fitting < len(pairs)
    fitted = [dict(p) for p in pairs]
    fit_prompts(fitted, examples, DPODataConfig(model_path=str(tiny_model_dir), max_length=max_length))
    improved = encode_pairs(DPOStepConfig(prompt_cut="memory", max_length=max_length), tokenizer, fitted)
    for pair, row in zip(pairs, improved):
        assert pair["instruction"] in tokenizer.decode(row["prompt_ids"], skip_special_tokens=True)
        assert len(row["prompt_ids"]) + max(len(row["chosen_ids"]), len(row["rejected_ids"])) <= max_length


# --- step 7: the release agent's reading rules ---------------------------------------------------------------------
def test_release_agent_output_rules(fake_protocol):
    from PUMA.prompting import OutputRules, parse_parameters

    release, improved = OutputRules.of(fake_protocol, "strict"), OutputRules.of(fake_protocol, "lenient")
    assert parse_parameters(SEARCH, "stop watch", release).name == "stop"
    assert parse_parameters(SEARCH, "stop watch", improved).arguments == {"query": "stop watch"}
    assert parse_parameters(SEARCH, "say: hi", release).arguments == {"query": "say: hi"}
    assert parse_parameters(SEARCH, "say: hi", improved).arguments == {"content": "hi"}
    assert parse_parameters(REVIEW, "Say: a Say: b", release).arguments == {"content": "b"}
    assert parse_parameters(RECOMMEND, "B1, B2", release).arguments == {"product_sequence": ["B1", "B2"]}


def test_release_agent_formats_memory_by_the_true_task_type(tiny_puma_data, tiny_model_dir: Path):
    from PUMA.agent import LiveGenerator, PumaAgent
    from PUMA.agent_settings import PumaAgentSettings
    from PUMA.cli import recipe_config

    protocol = project_protocol()
    task = next(t for t in tiny_puma_data.split("test") if t["type"] == "search"
                and tiny_puma_data.behaviours_before(t["user_id"], t["timestamp"]))
    generator = LiveGenerator(str(tiny_model_dir))
    release, improved = (PumaAgent(tiny_puma_data, generator=generator,
                                   settings=recipe_config(PumaAgentSettings, "agent", recipe)).live_prompt(
        protocol, task, RECOMMEND) for recipe in ("release", "improved"))
    assert release != improved
    search_line = protocol.text("puma.taskspe.search").split("<")[0]
    recommend_line = protocol.text("puma.taskspe.recommend").split("<")[0]
    assert search_line in release and recommend_line in improved


# --- GPU path: extras (the launch: tests/puma/test_launch.py) -----------------------------------------------------
def test_gpu_extras_are_pinned_and_configs_parse():
    lines = [line.split("#")[0].strip() for line in (REPO_ROOT / "requirements-gpu.txt").read_text().splitlines()]
    packages = [line for line in lines if line and not line.startswith("-")]
    assert packages and all("==" in line for line in packages)
    assert any(line.startswith("deepspeed==") for line in packages)
    for name in ("deepspeed_zero2.json", "deepspeed_zero3.json"):
        assert json.loads((REPO_ROOT / "PUMA" / "configs" / name).read_text())["zero_optimization"]["stage"] in (2, 3)


# --- step 3 under --recipe release: the release's test_llama.py ------------------------------------------------
def test_release_generation_rebuilds_the_prompt_with_the_predicted_function(tiny_model_dir: Path, tmp_path: Path):
    from PUMA.prompting import cut_to_tokens
    from PUMA.generate import release_cue, release_param_prompts
    from PUMA.modeling import load_tokenizer

    protocol, tokenizer = project_protocol(), load_tokenizer(tiny_model_dir)
    memory = "|".join(f"Rating:{i}\nText:a long review number {i} of many words\n" for i in range(200))
    example = {"instruction": "Write a review of this kettle", "memory": memory,
               "product": {"title": "Kettle", "price": 9.5, "store": None, "main_category": "Home"}}
    (prompt,) = release_param_prompts(protocol, tokenizer, [example], {example["instruction"]: ["my_tool", "x"]}, 64)
    # the bare instruction (no product block), the predicted function's text, the memory cut again to 64 tokens
    assert prompt == protocol.puma_param_prompt(example["instruction"], "my_tool", cut_to_tokens(memory, tokenizer, 64))
    assert "Kettle" not in prompt and len(tokenizer(cut_to_tokens(memory, tokenizer, 64))["input_ids"]) <= 64
    assert prompt.endswith(release_cue(protocol, "param")) and release_cue(protocol, "param").startswith("###")
    with pytest.raises(ValueError, match="no prediction"):
        release_param_prompts(protocol, tokenizer, [example], {}, 64)


def test_release_reading_of_a_generation_keeps_leading_whitespace_after_the_last_cue():
    from types import SimpleNamespace

    from PUMA.modeling import decoding_config, text_after

    assert text_after("### Tool Parameter:\n", "Prompt\n### Tool Parameter:\n  red kettle \n") == "  red kettle"
    assert text_after("### Tool Parameter:\n", "P\n### Tool Parameter:\nA\n### Tool Parameter:\nB") == "B"
    tokens = SimpleNamespace(pad_token_id=2, eos_token_id=2, bos_token_id=1)
    greedy = decoding_config(tokens, max_new_tokens=32, temperature=0.0, decoding="release")
    assert (greedy.num_return_sequences, greedy.early_stopping, greedy.temperature, greedy.do_sample) == \
        (1, False, 0, False)
    sampled = decoding_config(tokens, max_new_tokens=256, num_beams=10, do_sample=True, temperature=1.5,
                              decoding="release")
    assert (sampled.num_return_sequences, sampled.early_stopping, sampled.top_k, sampled.top_p, sampled.temperature,
            sampled.repetition_penalty) == (10, True, 50, 1.0, 1.5, 1.0)


def test_release_param_generation_needs_the_function_file_and_one_sequence_per_beam(tmp_path: Path):
    from PUMA.cli import recipe_config
    from PUMA.generate import GenerateConfig, decoding_settings, generate_file

    with pytest.raises(ValueError, match="needs --function_file"):
        generate_file(GenerateConfig(mode="param", data_file=str(tmp_path / "none.json")), log=lambda _: None)
    with pytest.raises(ValueError, match="one sequence per beam"):
        decoding_settings(GenerateConfig(mode="param", num_beams=10, num_return_sequences=4))
    assert decoding_settings(recipe_config(GenerateConfig, "generate", "improved", mode="param", num_beams=10,
                                           num_return_sequences=4))


def test_release_generation_end_to_end_lists_every_output(tiny_model_dir: Path, tmp_path: Path):
    from PUMA.generate import GenerateConfig, generate_file
    from PUMA.modeling import write_json

    examples = [{"instruction": "find a kettle", "memory": "Title:Kettle\nMain Category:Home\n", "product": None},
                {"instruction": "find a mug", "memory": "", "product": None}]
    write_json(tmp_path / "param.json", examples)
    write_json(tmp_path / "functions.json", {e["instruction"]: ["search_product_by_query"] for e in examples})
    out = generate_file(GenerateConfig(model_path=str(tiny_model_dir), mode="param",
                                       data_file=str(tmp_path / "param.json"),
                                       function_file=str(tmp_path / "functions.json"),
                                       output_file=str(tmp_path / "o.json"),
                                       max_new_tokens=4, num_beams=2, num_return_sequences=2, do_sample=True,
                                       batch_size=2), log=lambda _: None)
    outputs = json.loads(out.read_text())
    assert list(outputs) == [e["instruction"] for e in examples] and all(len(v) == 2 for v in outputs.values())
    record = json.loads((tmp_path / "o.puma_run.json").read_text())
    assert record["prompt_cut"] is None and "load_param_prompt" in record["prompts"]


# --- batch and precision under --recipe release ----------------------------------------------------------
@pytest.mark.parametrize("world, accumulation", [(1, 64), (2, 32), (4, 16), (8, 8)])
def test_release_keeps_64_examples_per_step_on_any_gpu_count(monkeypatch, world: int, accumulation: int):
    from PUMA.cli import recipe_config
    from PUMA.dpo import DPOStepConfig
    from PUMA.sft import SFTConfig

    monkeypatch.setenv("WORLD_SIZE", str(world))
    for config in (SFTConfig(), DPOStepConfig()):
        layout = config.batch_layout()
        assert (layout.world_size, layout.per_device_train_batch_size, layout.gradient_accumulation_steps,
                layout.global_batch_size) == (world, 1, accumulation, 64)
        arguments = config.trainer_arguments()
        assert (arguments["per_device_train_batch_size"], arguments["gradient_accumulation_steps"]) == (1, accumulation)
    # the improved recipe keeps its per-GPU layout (its file's batch settings)
    improved = recipe_config(SFTConfig, "sft", "improved").batch_layout()
    assert (improved.per_device_train_batch_size, improved.gradient_accumulation_steps,
            improved.global_batch_size) == (4, 4, 16 * world)
    assert recipe_config(DPOStepConfig, "dpo", "improved").batch_layout().global_batch_size == 16 * world


def test_global_batch_refusal_and_explicit_overrides(monkeypatch):
    from PUMA.cli import parse_step
    from PUMA.dpo import DPOStepConfig
    from PUMA.sft import SFTConfig

    monkeypatch.setenv("WORLD_SIZE", "3")
    for config in (SFTConfig(), DPOStepConfig()):
        with pytest.raises(ValueError, match="global batch 64 .* not a multiple of 3 process"):
            config.check()
    # an explicit accumulation wins over the recipe's global batch (the smoke's 4 x 1)
    explicit = SFTConfig(per_device_train_batch_size=4, gradient_accumulation_steps=1).batch_layout()
    assert (explicit.gradient_accumulation_steps, explicit.global_batch_size) == (1, 12)
    assert explicit.rule == "--gradient_accumulation_steps"
    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(ValueError, match="not a multiple of 1 process"):
        SFTConfig(per_device_train_batch_size=3).batch_layout()
    monkeypatch.setenv("WORLD_SIZE", "4")
    chosen = parse_step(SFTConfig, ["--global_batch_size", "32"], "sft", None, "sft").batch_layout()
    assert (chosen.gradient_accumulation_steps, chosen.global_batch_size, chosen.rule) == (8, 32, "--global_batch_size")
    assert SFTConfig(global_batch_size=32, gradient_accumulation_steps=8).batch_layout().global_batch_size == 32
    # an accumulation above 0 wins over the global batch, which is then what it makes
    assert SFTConfig(global_batch_size=64, gradient_accumulation_steps=8).batch_layout().global_batch_size == 32
    with pytest.raises(ValueError, match="give one of them"):
        SFTConfig(global_batch_size=0, gradient_accumulation_steps=0).batch_layout()
    with pytest.raises(ValueError, match="must not be negative"):
        SFTConfig(gradient_accumulation_steps=-1).batch_layout()
    with pytest.raises(ValueError, match="must be at least 1"):
        SFTConfig(per_device_train_batch_size=0).batch_layout()


def test_precision_path_and_launch_departures():
    from PUMA.lora import LoRATrainingConfig, launch_departures, precision_path

    release_ds = str(REPO_ROOT / "PUMA" / "configs" / "deepspeed_zero2_release.json")
    assert precision_path(LoRATrainingConfig(fp16=True, deepspeed=release_ds), "cuda") == "deepspeed-zero2-fp16"
    assert precision_path(LoRATrainingConfig(fp16=True), "cuda") == "amp-fp16"
    assert precision_path(LoRATrainingConfig(bf16=True), "cuda") == "amp-bf16"
    assert precision_path(LoRATrainingConfig(), "cpu") == "fp32-cpu"
    zero3 = str(REPO_ROOT / "PUMA" / "configs" / "deepspeed_zero3.json")
    assert precision_path(LoRATrainingConfig(bf16=True, deepspeed=zero3), "cuda") == "deepspeed-zero3-bf16"

    config = LoRATrainingConfig(fp16=True, global_batch_size=64)
    layout = config.batch_layout(4)
    assert launch_departures(config, "sft", layout, "deepspeed-zero2-fp16", "cuda") == []
    (line,) = launch_departures(config, "sft", layout, "amp-fp16", "cuda")  # DEEPSPEED=none
    assert line.startswith("sft: precision amp-fp16") and "DEEPSPEED=none" in line
    small = LoRATrainingConfig(per_device_train_batch_size=4, gradient_accumulation_steps=1)
    lines = launch_departures(small, "dpo", small.batch_layout(2), "deepspeed-zero2-fp16", "cuda")
    assert lines == ["dpo: global batch 8 (the release: 64) (chosen at launch (--gradient_accumulation_steps))"]
    assert launch_departures(small, "sft", small.batch_layout(1), "fp32-cpu", "cpu") == []  # a CPU smoke run
    improved = LoRATrainingConfig(gpu_launch="accelerate", bf16=True)  # the improved recipe's launch
    assert launch_departures(improved, "sft", improved.batch_layout(2), "amp-bf16", "cuda") == []


def test_run_facts_add_a_launch_departure_to_the_record(tmp_path: Path):
    from types import SimpleNamespace

    import torch

    from PUMA.lora import run_facts
    from PUMA.recipe import get_recipe, write_record
    from PUMA.sft import SFTConfig

    config = SFTConfig(fp16=True)
    weight = torch.nn.Parameter(torch.zeros(2, dtype=torch.float32))
    arguments = {"world_size": 2, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 32}
    trainer = SimpleNamespace(args=SimpleNamespace(**arguments, device=SimpleNamespace(type="cuda"),
                                                   to_dict=lambda: dict(arguments)),
                              model=SimpleNamespace(parameters=lambda: [weight]))  # a GPU run with DEEPSPEED=none
    facts = run_facts(trainer, config, "sft")
    assert facts["training_arguments"] == arguments and facts["lora"] is None  # as the trainer holds them
    assert facts["precision"] == "amp-fp16" and facts["global_batch_size"] == 64 and facts["world_size"] == 2
    assert facts["gradient_accumulation_steps"] == 32 and facts["trainable_dtype"] == "float32"
    write_record(tmp_path / "out", "sft", get_recipe("release"), config, **facts)
    record = json.loads((tmp_path / "out" / "puma_run.json").read_text())
    assert record["launch_departures"] and record["departures_from_release"][-1] == record["launch_departures"][0]


@pytest.mark.slow
def test_step_records_state_the_batch_and_precision(tiny_data, tiny_model_dir: Path, tmp_path: Path, monkeypatch):
    from PUMA.dpo import DPOStepConfig, train_dpo
    from PUMA.modeling import write_json
    from PUMA.sft import SFTConfig, build_sft_trainer, train_sft

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    examples = _sft_examples(tiny_data)
    trainer, _ = build_sft_trainer(SFTConfig(model_path=str(tiny_model_dir), output_dir=str(tmp_path / "d"),
                                             max_length=64), examples=examples)
    assert (trainer.args.per_device_train_batch_size, trainer.args.gradient_accumulation_steps) == (1, 64)
    write_json(tmp_path / "f.json", examples)
    out = train_sft(SFTConfig(model_path=str(tiny_model_dir), train_on="function",
                              function_data=str(tmp_path / "f.json"),
                              output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=2,
                              gradient_accumulation_steps=1, max_length=64, save_strategy="no"))
    record = json.loads((out / "puma_run.json").read_text())
    assert {k: record[k] for k in ("world_size", "per_device_train_batch_size", "gradient_accumulation_steps",
                                   "global_batch_size", "precision", "trainable_dtype", "launch_departures")} == {
        "world_size": 1, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, "global_batch_size": 2,
        "precision": "fp32-cpu", "trainable_dtype": "float32", "launch_departures": []}
    assert [line.split(" (")[0] for line in record["departures_from_release"]] == [
        "sft: train_on function", "sft: max_length 64", "sft: per_device_train_batch_size 2",
        "sft: gradient_accumulation_steps 1"]  # the settings given for this run, nothing else
    pairs = [{"prompt": e["prompt"], "chosen": e["label"], "rejected": "nothing"} for e in examples[:4]]
    write_json(tmp_path / "pairs.json", pairs)
    out = train_dpo(DPOStepConfig(model_path=str(tiny_model_dir), data_file=str(tmp_path / "pairs.json"),
                                  output_dir=str(tmp_path / "dpo"), max_steps=1, per_device_train_batch_size=2,
                                  global_batch_size=4, max_length=96, max_prompt_length=64, save_strategy="no"))
    record = json.loads((out / "puma_run.json").read_text())
    assert (record["gradient_accumulation_steps"], record["global_batch_size"], record["batch_rule"],
            record["precision"]) == (2, 4, "--global_batch_size", "fp32-cpu")


def test_deepspeed_path_keeps_the_trained_weights_in_half(tiny_model_dir: Path):
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from PUMA.lora import LoRATrainingConfig, lora_config, trainable_in_float32

    release_ds = str(REPO_ROOT / "PUMA" / "configs" / "deepspeed_zero2_release.json")
    for deepspeed in (release_ds, None):
        config = LoRATrainingConfig(fp16=True, deepspeed=deepspeed)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float16),
                               lora_config(config))
        dtypes = {p.dtype for p in trainable_in_float32(model, config).parameters() if p.requires_grad}
        # DeepSpeed: nothing upcast (the modules saved whole stay fp16; its engine halves the rest)
        assert (torch.float16 in dtypes) if deepspeed else (dtypes == {torch.float32})


def test_release_deepspeed_config_has_the_release_settings():
    config = json.loads((REPO_ROOT / "PUMA" / "configs" / "deepspeed_zero2_release.json").read_text())
    assert config["fp16"] == {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
                              "hysteresis": 2, "min_loss_scale": 1}
    assert config["zero_optimization"] == {"stage": 2, "allgather_partitions": True, "allgather_bucket_size": 2e8,
                                           "overlap_comm": True, "reduce_scatter": True, "reduce_bucket_size": 2e8,
                                           "contiguous_gradients": True}
    assert all(config[k] == "auto" for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                             "gradient_accumulation_steps", "gradient_clipping"))


# --- the recipes as data: PUMA/configs/<recipe>.yaml -------------------------------------------------------------
def test_recipe_files_define_both_recipes():
    from PUMA.recipe import bug_fixes, get_recipe, release_book

    assert release_book().shared_with_release.startswith("memory k = 100")
    release, improved = get_recipe("release"), get_recipe("improved")
    assert release is get_recipe("release")  # read once
    assert (release.value("sft", "gpu_dtype"), improved.value("sft", "gpu_dtype")) == ("float16", "bfloat16")
    assert release.value("agent", "puma_repeat_action") and not improved.value("agent", "puma_repeat_action")
    batch = ("per_device_train_batch_size", "gradient_accumulation_steps", "global_batch_size")
    assert [tuple(r.value(step, key) for key in batch) for step in ("sft", "dpo") for r in (release, improved)] == \
        [(1, 0, 64), (4, 4, 0), (1, 0, 64), (1, 16, 0)]
    # departures are computed: the release recipe has none of its own, the improved one a line per changed setting
    assert release.changes == {} and release.departures() == []
    assert len(improved.departures()) == sum(len(values) for values in improved.changes.values())
    # every recipe keeps the release's bug fixes, which records list first
    assert len(bug_fixes()) == 7
    (score,), (fast_test,) = bug_fixes("score"), bug_fixes("fast_test")
    assert score.removeprefix("score: ") == fast_test.removeprefix("fast_test: ")  # one text (a YAML anchor)
    assert ("sft: bf16 mixed precision on a GPU (the release fp16) (no loss scaling or fp16 overflow; same speed on "
            "Ampere and newer GPUs)") in improved.departures("sft")
    with pytest.raises(ValueError, match="expected release, improved or a recipe file"):
        get_recipe("other")


def test_a_recipe_file_of_ones_own_departs_where_it_changes_a_setting(tmp_path: Path):
    from PUMA.recipe import get_recipe

    path = tmp_path / "mine.yaml"
    path.write_text("steps:\n  sft: {learning_rate: 1.0e-4, lora_r: 16}\n  score: {parsing: lenient}\n")
    mine = get_recipe(str(path))
    assert mine.changes == {"sft": {"learning_rate": 1e-4}, "score": {"parsing": "lenient"}}  # lora_r: the release's
    assert mine.departures() == [
        f"sft: learning_rate 0.0001 (the release: 0.0003) (set by recipe {path})",
        "score: a candidate the agent would read as a message (`Say:`) or a stop scores 0 (the release scores it as "
        "a search query or review, which the agent would never send)"]
    assert mine.value("sft", "num_train_epochs") == 10 and mine.value("sft", "learning_rate") == 1e-4


@pytest.mark.parametrize("text, error", [
    ("steps: []\n", "mine.yaml: steps: expected dict"),
    ("step: {}\n", "mine.yaml: unknown key step"),
    ("{}\n", "mine.yaml: missing key steps"),
    ("steps:\n  scoring: {}\n", "mine.yaml: unknown key steps.scoring"),
    ("steps:\n  sft: {learning_rat: 1}\n",
     "mine.yaml: steps.sft.learning_rat: unknown setting .did you mean learning_rate"),
    ("steps:\n  sft: {loss: label}\n", "mine.yaml: steps.sft.loss"),
    ("steps:\n  agent: {puma_repeat_action: maybe}\n", "mine.yaml: steps.agent.puma_repeat_action"),
    ("steps: {sft: [1]}\n", "mine.yaml: steps.sft: expected dict"),
])
def test_a_bad_recipe_file_names_its_file_and_key(tmp_path: Path, text: str, error: str):
    from PUMA.recipe import get_recipe

    (tmp_path / "mine.yaml").write_text(text)
    with pytest.raises((ValueError, DataError), match=error):
        get_recipe(str(tmp_path / "mine.yaml"))


@pytest.mark.parametrize("edit, error", [
    (("reasons:\n", "reason:\n"), "release.yaml: unknown key reason"),
    (("    paper: [4.0e-3]\n", "    paper: 4.0e-3\n"), r"release.yaml: readings\[0\].paper: expected list"),
    (("  - {step: data, setting: recommend_labels, value: distinct,", "  - {step: data, value: distinct,"),
     r"release.yaml: missing key reasons\[0\].setting"),
    (("  score: {task_split: train, parsing: strict,", "  score: {task_split: train, parsing: loose,"),
     "release.yaml: steps.score.parsing"),
])
def test_a_bad_release_file_names_its_file_and_key(tmp_path: Path, edit: tuple[str, str], error: str):
    from PUMA.recipe import RELEASE_FILE, read_release_book

    text = RELEASE_FILE.read_text()
    assert edit[0] in text
    (tmp_path / "release.yaml").write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises((ValueError, DataError), match=error):
        read_release_book(tmp_path / "release.yaml")


def test_records_say_whether_a_setting_follows_the_release_recipe_or_the_paper(tmp_path: Path):
    """Where the paper and the release's scripts disagree (SFT learning rate, memory length)
    or a script cannot run as shipped (train_on), every record says what its value follows."""
    from PUMA.data import DataConfig
    from PUMA.recipe import get_recipe, write_record
    from PUMA.sft import SFTConfig

    recipe = get_recipe("release")
    default = json.loads(write_record(tmp_path / "a", "sft", recipe, SFTConfig()).read_text())["readings"]
    assert [line.split(":")[0] for line in default] == ["learning_rate 0.0003", "train_on function_param"]
    assert all("the release recipe's reading" in line for line in default)
    paper = json.loads(write_record(tmp_path / "b", "sft", recipe, SFTConfig(learning_rate=4e-3)).read_text())
    assert paper["readings"][0].startswith("learning_rate 0.004: the paper's stated value, not the release recipe's")
    record = write_record(tmp_path / "c", "data", recipe, DataConfig(mem_token_length=512))
    memory = json.loads(record.read_text())
    assert memory["readings"][0].startswith("mem_token_length 512: the paper's stated value")
    odd = json.loads(write_record(tmp_path / "d", "data", recipe, DataConfig(mem_token_length=100)).read_text())
    assert "neither" in odd["readings"][0]


@pytest.mark.slow
def test_a_users_recipe_file_runs_and_its_records_list_exactly_its_two_departures(tiny_puma_data, tiny_model_dir: Path,
                                                                                   tmp_path: Path):
    """`puma run --recipe my.yaml`, a recipe of one's own that changes two settings of the release's,
    steps 1-7 at the smoke's tiny settings: every record names exactly those two departures of the
    recipe, and each in the record of the step it belongs to (the tiny settings, given for the run,
    are named apart)."""
    from PersonalWAB.settings import parse
    from PUMA.pipeline import PipelineSettings, Section, run_pipeline
    from PUMA.recipe import get_recipe

    mine = tmp_path / "my_recipe.yaml"
    mine.write_text("steps:\n  sft: {lora_r: 8}\n  score: {review_score: environment}\n")
    work = tmp_path / "run"
    settings = parse(PipelineSettings, ["--config", str(REPO_ROOT / "scripts" / "puma_smoke.yaml"), "--recipe",
                                        str(mine), "--data_dir", str(tiny_puma_data.data_dir), "--model_path",
                                        str(tiny_model_dir), "--work_dir", str(work)])
    settings.data = Section("data", {**settings.section("data"), "train_tasks": 12})
    assert run_pipeline(settings, log=lambda _: None) == 0
    lora = f"sft: lora_r 8 (the release: 16) (set by recipe {mine})"
    review = next(line for line in get_recipe("improved").departures("score") if "as the environment scores" in line)
    records = {path.relative_to(work).as_posix(): json.loads(path.read_text())
               for path in work.rglob("*puma_run.json")}
    assert {"sft/puma_run.json", "param_candidates_train_scores.puma_run.json", "dpo/puma_run.json"} <= set(records)
    for name, record in records.items():
        assert record["recipe"] == str(mine) and record["recipe_departures"] == [lora, review], name
        assert (lora in record["departures_from_release"]) == (record["step"] == "sft"), name
        assert (review in record["departures_from_release"]) == (record["step"] == "score"), name
    header = json.loads((work / "result_puma_singleturn.json").read_text())[0]
    assert header["run_args"]["recipe"] == str(mine) and header["run_args"]["protocol"]["departures"] == []


def test_the_agents_settings_come_from_the_recipe_under_config_and_flags(tmp_path: Path):
    """`pwab run --agent_strategy puma --recipe R`: the recipe's `agent` section gives the --puma_*
    defaults, a --config file and flags override them, a recipe of one's own works the same."""
    from PersonalWAB.runner.config import parse_config

    def puma(*argv: str):
        return parse_config(["--agent_strategy", "puma", *argv]).options("puma")

    assert (puma().puma_parsing, puma().puma_repeat_action) == ("strict", True)
    improved = puma("--recipe", "improved")
    assert (improved.puma_parsing, improved.puma_prompt, improved.puma_repeat_action) == ("lenient", "training", False)
    assert puma("--recipe", "improved", "--puma_parsing", "strict").puma_parsing == "strict"
    (tmp_path / "run.yaml").write_text("recipe: improved\npuma_gpu_dtype: float16\n")
    from_file = puma("--config", str(tmp_path / "run.yaml"))
    assert (from_file.puma_prompt, from_file.puma_gpu_dtype) == ("training", "float16")
    (tmp_path / "mine.yaml").write_text("steps:\n  agent: {puma_repeat_action: false}\n")
    mine = puma("--recipe", str(tmp_path / "mine.yaml"))
    assert (mine.puma_repeat_action, mine.puma_parsing) == (False, "strict")
