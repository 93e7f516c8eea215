"""The SFT collator's pad-to-length mode and the PUMA training-throughput benchmark
(scripts/benchmark_puma_training.py), end to end on tiny data with a tiny model."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import zlib
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
STEPS, BATCH, MAX_LENGTH, DPO_MAX_LENGTH = 2, 2, 768, 512


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark_puma_training",
                                                  REPO_ROOT / "scripts" / "benchmark_puma_training.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tokenizer(tiny_data_dir: Path):
    from PUMA.tiny_model import corpus, train_tokenizer

    return train_tokenizer(corpus(tiny_data_dir), 400)


class HashEncoder:
    """Deterministic unit vectors in place of MiniLM: step 1 needs the embedding caches, not their quality."""

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(384) for t in texts])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture()
def data_dir_with_caches(tiny_data_dir: Path, tmp_path: Path) -> Path:
    """A copy of the tiny data with embedding caches from `HashEncoder` (the shared copy keeps real ones)."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory_embeddings import BehaviourEmbeddings
    from PersonalWAB.protocol import load_protocol

    copy = shutil.copytree(tiny_data_dir, tmp_path / "data")
    BehaviourEmbeddings(load_benchmark_data(copy), load_protocol(), HashEncoder()).ensure(log=None)
    return copy


def test_pad_to_length_collator(tokenizer):
    from PUMA.sft import IGNORE_INDEX, PaddingCollator, encode_example

    examples = [encode_example(tokenizer, "Instruction: find a kettle\nFunction: ", "search_product_by_query", 64),
                encode_example(tokenizer, "Instruction: review the mug\nParameter: ", "ok", 64)]
    batch = PaddingCollator(tokenizer.pad_token_id, pad_to_length=48)(examples)
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape == (2, 48)
    for row, example in enumerate(examples):
        n = len(example["input_ids"])
        assert batch["input_ids"][row, :n].tolist() == example["input_ids"]
        assert batch["labels"][row, :n].tolist() == example["labels"]
        assert batch["attention_mask"][row, :n].tolist() == [1] * n
        assert (batch["input_ids"][row, n:] == tokenizer.pad_token_id).all()
        assert (batch["labels"][row, n:] == IGNORE_INDEX).all()
        assert (batch["attention_mask"][row, n:] == 0).all()
    longest = max(len(e["input_ids"]) for e in examples)
    assert PaddingCollator(tokenizer.pad_token_id)(examples)["input_ids"].shape == (2, longest)
    with pytest.raises(ValueError, match="more than pad_to_length"):
        PaddingCollator(tokenizer.pad_token_id, pad_to_length=longest - 1)(examples)


def test_throughput_pairs_and_exact_example_counts(bench):
    examples = [{"function": f, "prompt": f"p{i}", "label": f"{f}{i}"} for i, f in enumerate("aabbbc")]
    pairs = bench.throughput_pairs(examples)
    assert len(pairs) == 5  # "c" has no other example of its function
    assert all(p["chosen"][0] == p["rejected"][0] and p["chosen"] != p["rejected"] for p in pairs)
    chosen = bench.exactly(examples, 14, seed=0)
    assert len(chosen) == 14 and chosen[:6] == chosen[6:12] and sorted(chosen[:6], key=id) == sorted(examples, key=id)


def test_given_step1_files_are_used_as_they_are(bench, tmp_path: Path):
    config = bench.BenchmarkConfig(function_data="f.json", param_data="p.json")
    assert bench.step1_files(config, None, tmp_path) == ("f.json", "p.json", None)


def test_benchmark_end_to_end(bench, data_dir_with_caches: Path, tmp_path: Path):
    out = tmp_path / "bench.json"
    argv = ["--data_dir", str(data_dir_with_caches), "--output", str(out), "--vocab_size", "400",
            "--hidden_size", "32", "--intermediate_size", "64", "--layers", "1", "--heads", "2",
            "--mem_token_length", "96", "--max_length", str(MAX_LENGTH), "--dpo_max_length", str(DPO_MAX_LENGTH),
            "--dpo_max_prompt_length", "384", "--sft_steps", str(STEPS), "--dpo_steps", str(STEPS),
            "--per_device_train_batch_size", str(BATCH), "--gradient_accumulation_steps", "1"]
    assert bench.main(argv) == 0
    result = json.loads(out.read_text())
    settings, dynamic, grouped, padded, dpo = (
        result["settings"], result["sft"]["dynamic_padding"], result["sft"]["dynamic_padding_group_by_length"],
        result["sft"]["pad_to_max_length"], result["dpo"])
    assert settings["max_length"] == MAX_LENGTH and settings["device"] == "cpu" and settings["base_params"] > 0
    assert settings["step1_seconds"] is not None and settings["sft_examples"]["used"] == STEPS * BATCH
    for run in (dynamic, grouped, padded, dpo):
        assert run["steps"] == run["batches"] == STEPS
        assert 0 < run["real_tokens"] <= run["computed_tokens"]
        assert run["seconds"] > 0 and run["trainable_params"] > 0
    assert padded["computed_tokens"] == STEPS * BATCH * MAX_LENGTH
    assert dynamic["real_tokens"] == grouped["real_tokens"] == padded["real_tokens"]
    assert dynamic["computed_tokens"] < padded["computed_tokens"]
    assert grouped["computed_tokens"] < padded["computed_tokens"]
    assert dpo["computed_tokens"] <= STEPS * 2 * BATCH * DPO_MAX_LENGTH
    assert result["sft"]["dynamic_padding_speedup"] > 0 and result["sft"]["group_by_length_speedup"] > 0
