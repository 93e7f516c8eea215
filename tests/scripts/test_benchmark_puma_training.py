"""The PUMA training-throughput benchmark (scripts/benchmark_puma_training.py): its token and
FLOP counting, and a run end to end (both recipes, SFT and DPO) on tiny data with a tiny model."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from tests.conftest import REPO_ROOT, load_script

STEPS, BATCH, MAX_LENGTH, DPO_MAX_LENGTH = 2, 2, 768, 512


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(REPO_ROOT / "scripts" / "benchmark_puma_training.py")


@pytest.fixture(scope="module")
def tokenizer(tiny_data_dir: Path):
    from PUMA.tiny_model import corpus, train_tokenizer

    return train_tokenizer(corpus(tiny_data_dir), 400)


def test_throughput_pairs_and_exact_example_counts(bench):
    examples = [{"function": f, "prompt": f"p{i}", "label": f"{f}{i}", "instruction": f"i{i}"}
                for i, f in enumerate("aabbbc")]
    pairs = bench.throughput_pairs(examples)
    assert len(pairs) == 5  # "c" has no other example of its function
    assert all(p["chosen"][0] == p["rejected"][0] and p["chosen"] != p["rejected"] for p in pairs)
    chosen = bench.exactly(examples, 14, seed=0)
    assert len(chosen) == 14 and chosen[:6] == chosen[6:12] and sorted(chosen[:6], key=id) == sorted(examples, key=id)


def test_given_step1_files_are_used_as_they_are(bench, tmp_path: Path):
    config = bench.BenchmarkConfig(function_data="f.json", param_data="p.json")
    assert bench.step1_files(config, None, tmp_path) == ("f.json", "p.json")


def test_token_and_flop_counting(bench, tokenizer):
    from PUMA.sft import PackingCollator, ReleasePaddingCollator, encode_example, encode_release

    texts = [("Instruction: find a kettle\nFunction: ", "search_product_by_query"), ("Instruction: hi\n", "ok")]
    packed = PackingCollator()([encode_example(tokenizer, p, label, 64) for p, label in texts])
    lengths = [len(encode_example(tokenizer, p, label, 64)["input_ids"]) for p, label in texts]
    assert bench.batch_tokens(packed) == (sum(lengths), sum(lengths), sum(n * n for n in lengths))
    padded = ReleasePaddingCollator(tokenizer.eos_token_id, 48)([encode_release(tokenizer, p, label, 48)
                                                                 for p, label in texts])
    real = sum(len(encode_release(tokenizer, p, label, 48)["input_ids"]) for p, label in texts)
    assert bench.batch_tokens(padded) == (real, 96, 2 * 48 * 48)
    assert bench.model_flops("sft", 100, 10, 2, 8, 50, 400) == (400 + 20) * 50 + 8 * 2 * 8 * 400
    assert bench.model_flops("dpo", 100, 10, 2, 8, 50, 400) == (600 + 20) * 50 + 12 * 2 * 8 * 400
    assert bench.BenchmarkConfig(preset="llama-2-7b").architecture() == {
        "hidden_size": 4096, "intermediate_size": 11008, "layers": 32, "heads": 32, "vocab_size": 32000}
    with pytest.raises(ValueError, match="--recipes"):
        bench.BenchmarkConfig(recipes="release,fast").check()


@pytest.mark.slow
def test_benchmark_end_to_end(bench, tiny_puma_data, tmp_path: Path):
    out = tmp_path / "bench.json"
    argv = ["--data_dir", str(tiny_puma_data.data_dir), "--out", str(out), "--vocab_size", "400",
            "--hidden_size", "32", "--intermediate_size", "64", "--layers", "1", "--heads", "2",
            "--mem_token_length", "96", "--max_length", str(MAX_LENGTH), "--dpo_max_length", str(DPO_MAX_LENGTH),
            "--dpo_max_prompt_length", "384", "--sft_steps", str(STEPS), "--dpo_steps", str(STEPS),
            "--per_device_train_batch_size", str(BATCH), "--gradient_accumulation_steps", "1", "--peak_tflops", "1"]
    assert bench.main(argv) == 0
    result = json.loads(out.read_text())
    runs = result["runs"]
    assert set(runs) == {"SFT release", "SFT improved", "DPO release", "DPO improved"}
    assert result["settings"]["device"] == "cpu" and result["settings"]["sft_examples"]["used"] == STEPS * BATCH
    for run in runs.values():
        assert run["steps"] == run["batches"] == STEPS
        assert 0 < run["real_tokens"] <= run["computed_tokens"]
        assert run["seconds"] > 0 and run["trainable_params"] > 0 and run["peak_memory_gib"] > 0
        assert run["mfu"] > 0 and run["model_tflops"] > 0
        assert 0 < run["trainable_matmul_weights_Nt"] < run["matmul_weights_N"]
    # TRL's extra `ref` adapter is not part of the forward pass: DPO runs the same weights as SFT
    assert len({run["matmul_weights_N"] for run in runs.values()}) == 1
    release, improved = runs["SFT release"], runs["SFT improved"]
    assert release["computed_tokens"] == STEPS * BATCH * MAX_LENGTH  # every example padded to max length
    assert improved["computed_tokens"] == improved["real_tokens"] < release["computed_tokens"]  # packed: no padding
    assert runs["DPO release"]["computed_tokens"] <= STEPS * 2 * BATCH * DPO_MAX_LENGTH
