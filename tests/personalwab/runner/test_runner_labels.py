"""What a run says about itself (`PersonalWAB.runner.labels`): the departures from the release its
settings make, such as bf16 embeddings where memory ranks by them or the ablation's controls and
token budget, recorded in its header."""

from __future__ import annotations

import pytest

from PersonalWAB.engines.text_embedding import cpu_has_bf16
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.labels import protocol_departures


@pytest.mark.parametrize(("memory", "departs"), [("relevant", True), ("taskspe", True), ("last", False)])
def test_bf16_embeddings_depart_from_the_release_where_memory_ranks_by_them(memory, departs):
    from PersonalWAB.runner.labels import setting_departures

    settings = {"agent_strategy": "function_calling", "agent_memory": memory, "memory_length": 10}
    line = "embedding_precision bf16: memory ranked by bf16 MiniLM vectors, not the release's fp32"
    departures = setting_departures({**settings, "embedding_precision": "bf16"})
    assert any(d.startswith(line) for d in departures) == departs
    assert setting_departures({**settings, "embedding_precision": "fp32"}) == setting_departures(settings) == []


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no bf16 instructions")
def test_a_bf16_run_records_its_departure_and_what_computed_its_vectors(tiny_engines, tiny_data_dir, tmp_path):
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    config = RunConfig(data_dir=str(tiny_data_dir), agent_memory="relevant", embedding_precision="bf16", end_index=2,
                       out=str(tmp_path / "bf16.json"), quiet=True)
    header, _, _ = run(config, log=lambda _: None)
    run_args = header["run_args"]
    assert run_args["embedding_precision"] == "bf16" and run_args["memory_embedding_backend"] == "openvino"
    assert not run_args["protocol"]["standard"]
    assert any(d.startswith("embedding_precision bf16:") for d in run_args["protocol"]["departures"])


def test_the_controls_and_the_budget_are_departures(tiny_data_dir):
    config = RunConfig(data_dir=str(tiny_data_dir), agent_memory="other_user", memory_tokens=800)
    departures = protocol_departures(config)
    assert any(line.startswith("agent_memory other_user: the project's memory mode") for line in departures)
    assert any(line.startswith("memory_tokens 800") for line in departures)


@pytest.mark.parametrize("asked", ["onnx", "torch"])
def test_a_run_records_the_recommender_backend_asked_for(tiny_engines, tiny_data_dir, tmp_path, monkeypatch, asked):
    """Every run and every shard records it, decided before any engine opens (so shards agree)."""
    from PersonalWAB.engines.recommender.exported import BACKEND_ENV
    from PersonalWAB.runner.execute import run

    monkeypatch.setenv(BACKEND_ENV, asked)
    config = RunConfig(data_dir=str(tiny_data_dir), end_index=2, shard="1/2", out=str(tmp_path / "run.json"),
                       quiet=True)
    header, _, _ = run(config, log=lambda _: None)
    assert header["run_args"]["recommender_backend"] == asked


@pytest.mark.parametrize(("memory", "recorded"), [("relevant", True), ("last", False)])
def test_a_run_records_what_computes_its_memory_vectors_where_memory_ranks_by_them(
        tiny_engines, tiny_data_dir, tmp_path, memory, recorded):
    from PersonalWAB.engines.text_embedding import memory_backend
    from PersonalWAB.runner.execute import run

    config = RunConfig(data_dir=str(tiny_data_dir), agent_memory=memory, end_index=2, out=str(tmp_path / "run.json"),
                       quiet=True)
    header, _, _ = run(config, log=lambda _: None)
    assert header["run_args"].get("memory_embedding_backend") == (memory_backend("fp32") if recorded else None)
