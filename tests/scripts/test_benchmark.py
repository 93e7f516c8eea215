"""scripts/benchmark.py's memory-cache figures: the cache against the fp32 product of this
machine's cores, and the bf16 cache also against its own library's bf16 product."""

from __future__ import annotations

from types import ModuleType

import pytest
from tests.conftest import REPO_ROOT, load_script

from PersonalWAB.engines.text_embedding import cpu_has_bf16, minilm_flops, token_counts


@pytest.fixture(scope="module")
def benchmark() -> ModuleType:
    return load_script(REPO_ROOT / "scripts" / "benchmark.py")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_cache_is_timed_against_the_products_of_its_precision(benchmark, tiny_data, monkeypatch, precision):
    if precision == "bf16" and not cpu_has_bf16():
        pytest.skip("this CPU has no bf16 instructions")
    measured = {"fp32": benchmark.fp32_peak_flops, "bf16": benchmark.bf16_peak_flops}
    monkeypatch.setattr(benchmark, "fp32_peak_flops", lambda: measured["fp32"](0.2))
    monkeypatch.setattr(benchmark, "bf16_peak_flops", lambda: measured["bf16"](0.2))
    flops = minilm_flops(token_counts(benchmark.memory_cache_texts(tiny_data)))
    figures = benchmark.memory_cache(tiny_data, precision, False, 8, flops)
    assert figures["seconds"] > 0 and figures["fp32_peak_gflop_s"] > 0
    assert figures["ratio_to_fp32_bound"] == pytest.approx(figures["seconds"] / figures["fp32_bound_s"], rel=0.01)
    if precision == "fp32":
        assert "ratio_to_bf16_bound" not in figures
    else:
        bf16_bound_s = flops / (figures["bf16_peak_gflop_s"] * 1e9)
        assert figures["ratio_to_bf16_bound"] == pytest.approx(figures["seconds"] / bf16_bound_s, rel=0.01)
    headline = benchmark.headline({"memory_cache": {precision: figures}, "startup_s": 1.0,
                                   "load_average_after_startup": [0, 0, 0], "test_split_fresh_process_s": 2.0,
                                   "load_average_after_fresh_split": [0, 0, 0]})
    assert headline[f"memory_cache_{precision}"]["ratio_to_fp32_bound"] == figures["ratio_to_fp32_bound"]
    assert headline[f"memory_cache_{precision}"].get("ratio_to_bf16_bound") == figures.get("ratio_to_bf16_bound")
