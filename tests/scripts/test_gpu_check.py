"""scripts/gpu_check.py: its settings, token counting, failure isolation, and the CPU dry run of
the whole check (both recipes' SFT and DPO, HF generation, the MiniLM memory cache) end to end,
with one phase in a child process as the GPU run starts vLLM and DeepSpeed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tests.conftest import REPO_ROOT, load_script

TRAINING = ("sft_release", "sft_improved", "dpo_release", "dpo_improved")


@pytest.fixture(scope="module")
def check() -> ModuleType:
    return load_script(REPO_ROOT / "scripts" / "gpu_check.py")


def positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def test_settings_by_device_and_round_trip(check, tmp_path: Path):
    gpu = check.parse_args([str(tmp_path)]).resolved(gpu=True)
    assert (gpu.preset, gpu.vocab_size, gpu.hidden_size, gpu.layers) == ("llama-2-7b", 32000, 4096, 32)
    assert (gpu.sft_steps, gpu.dpo_steps, gpu.sft_accumulation, gpu.memory_scale, gpu.gen_new_tokens) == \
        (4, 3, 0, "full", 256)
    cpu = check.parse_args([str(tmp_path), "--sft_steps", "1"]).resolved(gpu=False)
    assert (cpu.preset, cpu.hidden_size, cpu.sft_steps, cpu.sft_accumulation, cpu.data_users) == ("custom", 64, 1, 2, 4)
    assert check.parse_args(check.config_argv(cpu)) == cpu
    assert check.parse_args([str(tmp_path), "--phases", "generate_hf"]).phase_list() == ["data", "generate_hf"]
    assert check.parse_args([str(tmp_path), "--phases", "memory_cache"]).phase_list() == ["memory_cache"]
    with pytest.raises(ValueError, match="--phases"):
        check.parse_args([str(tmp_path), "--phases", "sft,fast"]).check()
    with pytest.raises(ValueError, match="--data_users"):
        check.parse_args([str(tmp_path), "--data_dir", "d", "--data_users", "3"]).check()
    assert check.main(["--phases", "data"]) == 2  # no output folder


def test_generated_tokens_are_counted_up_to_eos(check):
    import torch

    eos = 2
    new = torch.tensor([[5, 6, 2, 3, 3], [5, 2, 3, 3, 3], [5, 6, 7, 8, 9]])
    assert check.generated_token_count(new, eos) == 3 + 2 + 5
    assert check.generated_token_count(torch.tensor([[5, 2, 2, 2]]), eos) == 2  # pad = EOS (Llama-2)

    class Model:
        def parameters(self):
            return iter([torch.zeros(1)])

        def generate(self, input_ids, **settings):
            return torch.cat([input_ids, new[: len(input_ids)]], dim=1)

    counted = check.CountingModel(Model(), eos)
    counted.generate(input_ids=torch.ones(2, 4, dtype=torch.long))
    assert counted.tokens == 5 and next(counted.parameters()).shape == (1,)

    class LLM:
        def generate(self, requests, params, **options):
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1] * 4), SimpleNamespace(token_ids=[1, 2])])
                    for _ in requests]

        def beam_search(self, requests, params, **options):
            return [SimpleNamespace(sequences=[SimpleNamespace(tokens=r["prompt_token_ids"] + [7, 8, 2])])
                    for r in requests]

    llm = check.CountingLLM(LLM())
    requests = [{"prompt_token_ids": [1, 2, 3]}, {"prompt_token_ids": [4]}]
    llm.generate(requests, None)
    llm.beam_search(requests, None)
    assert (llm.tokens, llm.calls) == (2 * 6 + 2 * 3, 2)


@pytest.mark.slow
def test_a_failing_phase_is_recorded_and_the_others_still_run(check, monkeypatch, tmp_path: Path):
    def fail(ctx):
        raise MemoryError("out of memory (test)")

    fakes = {name: (lambda ctx, name=name: {"seconds": 1.0, "real_tokens_per_s": 10.0}) for name in check.PHASES}
    fakes["sft_release"] = fail
    monkeypatch.setattr(check, "PHASE_FUNCTIONS", fakes)
    assert check.main([str(tmp_path), "--phases", "data,sft_release,sft_improved,generate_vllm"]) == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["phases"]["sft_release"]["error"] == "MemoryError: out of memory (test)"
    assert report["phases"]["sft_improved"]["real_tokens_per_s"] == 10.0
    assert "skipped" in report["phases"]["generate_vllm"]  # no GPU here: optional, not a failure
    assert report["failed"] == ["sft_release"] and report["ok"] is False


@pytest.mark.slow
def test_cpu_dry_run_end_to_end(check, tiny_puma_data, tmp_path: Path):
    """The dry run at its smallest on the tiny data (its relevance caches prebuilt), with
    `sft_improved` in a child process; structure and positive, finite figures (no timing)."""
    out = tmp_path / "out"
    argv = [str(out), "--data_dir", str(tiny_puma_data.data_dir), "--vocab_size", "400", "--hidden_size", "32",
            "--intermediate_size", "64", "--layers", "1", "--heads", "2", "--mem_token_length", "64",
            "--max_length", "512", "--dpo_max_length", "512", "--dpo_max_prompt_length", "384", "--sft_steps", "1",
            "--dpo_steps", "1", "--sft_accumulation", "1", "--dpo_accumulation", "1", "--gen_prompts", "2",
            "--gen_new_tokens", "4", "--gen_beams", "2", "--max_prompt_tokens", "512", "--memory_users", "1",
            "--peak_tflops", "1", "--isolate", "sft_improved", "--work_dir", str(tmp_path / "work")]
    assert check.main(argv) == 0
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["device"] == "cpu" and report["dry_run"] is True and report["ok"] is True
    assert list(report["phases"]) == list(check.PHASES)
    assert "6*N*T" in report["mfu"]["derivation"] and report["mfu"]["peak_flops_per_s"] == 1e12
    assert report["mfu"]["peak_table_flops_per_s"]["H100"] == 989.4e12
    phases = report["phases"]
    for name in TRAINING:
        run = phases[name]
        assert run["steps"] == run["batches"] == 1
        for key in ("real_tokens_per_s", "computed_tokens_per_s", "mfu", "peak_memory_gib", "model_tflops",
                    "seconds", "trainable_params"):
            assert positive(run[key]), (name, key, run[key])
        assert run["real_tokens"] <= run["computed_tokens"] and run["precision"] == "fp32-cpu"
    assert phases["sft_release"]["computed_tokens"] == 512  # padded to max length, batch 1
    assert phases["sft_improved"]["pad_share"] == 0 and phases["sft_improved"]["child_process"] is True
    assert phases["sft_release"]["per_device_train_batch_size"] == 1 and phases["sft_improved"]["packed"] is True
    hf = phases["generate_hf"]
    assert hf["sequences"] == 4 and 0 < hf["generated_tokens"] <= 4 * 4
    assert positive(hf["generated_tokens_per_s"]) and positive(hf["peak_memory_gib"])
    memory = phases["memory_cache"]
    assert memory["users"] == 1 and positive(memory["build_seconds"]) and positive(memory["behaviours"])
    assert phases["generate_vllm"] == {"skipped": "no GPU (vLLM needs CUDA)"}
    assert "no GPU" in phases["sft_release_deepspeed"]["skipped"]
    assert report["summary"]["sft_release"]["real_tokens_per_s"] == phases["sft_release"]["real_tokens_per_s"]
