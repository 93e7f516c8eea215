"""SASRec through ONNX Runtime (`PersonalWAB.engines.recommender.exported`): the build exports the
checkpoint and keeps the graph only where it recommends as PyTorch does; runs then use it, and
fall back to PyTorch for a damaged graph, another checkpoint or `$PERSONALWAB_RECOMMENDER_BACKEND=torch`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from PersonalWAB.engines.recommender import exported
from PersonalWAB.engines.recommender.engine import SASRecRecommender, load_item_map


@pytest.fixture()
def built(tiny_engines, tiny_data_dir: Path, tmp_path: Path):
    """A copy of the tiny data with its recommender, rebuilt so its graph is exported."""
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data

    data = load_benchmark_data(shutil.copytree(tiny_data_dir, tmp_path / "data"))
    build_artifacts(data, search_backends=(), log=lambda _: None)
    return data


def recommenders(data):
    from PersonalWAB.engines.shared import Engines

    return Engines(data, "bm25s").recommender, SASRecRecommender(data.artifacts.checkpoint, data.artifacts.item_map)


def test_the_exported_recommender_answers_as_pytorch(built, monkeypatch):
    checkpoint = built.artifacts.checkpoint
    assert exported.usable_graph(checkpoint) is not None
    onnx, torch = recommenders(built)
    assert isinstance(onnx, exported.OnnxSASRec)
    probes = exported.probe_sequences(built)
    assert probes and onnx.recommend_batch(probes, 10) == torch.recommend_batch(probes, 10)
    assert onnx.recommend(probes[0], 3) == torch.recommend(probes[0], 3) and onnx.recommend(["unknown"], 3) == []
    assert (onnx.candidate_asins, onnx.maxlen) == (torch.candidate_asins, torch.maxlen)
    monkeypatch.setenv(exported.BACKEND_ENV, "torch")
    assert isinstance(recommenders(built)[0], SASRecRecommender)
    monkeypatch.setenv(exported.BACKEND_ENV, "gpu")
    with pytest.raises(ValueError, match="PERSONALWAB_RECOMMENDER_BACKEND=gpu: expected one of onnx, torch"):
        exported.backend()


def test_a_damaged_graph_or_another_checkpoint_falls_back_to_pytorch(built, capsys):
    from PersonalWAB.build import build_artifacts

    checkpoint = built.artifacts.checkpoint
    graph = exported.graph_path(checkpoint)
    content = bytearray(graph.read_bytes())
    content[len(content) // 2] ^= 0xFF
    graph.write_bytes(bytes(content))  # same size, other weights: the digest tells
    assert exported.usable_graph(checkpoint) is None and isinstance(recommenders(built)[0], SASRecRecommender)
    assert f"note: SASRec answers on PyTorch: {checkpoint} has no export checked against it" in capsys.readouterr().err
    build_artifacts(built, search_backends=(), log=lambda _: None)  # the next build exports it again
    assert exported.usable_graph(checkpoint) is not None
    record = graph.with_name(graph.name + ".json")
    record.write_text(record.read_text().replace('"checkpoint_sha256": "', '"checkpoint_sha256": "0'))
    assert exported.usable_graph(checkpoint) is None  # made from another checkpoint


def test_an_export_that_would_recommend_otherwise_is_not_kept(built, monkeypatch, tmp_path: Path):
    checkpoint = built.artifacts.checkpoint
    exported.graph_path(checkpoint).unlink()
    real = exported.OnnxSASRec.recommend_batch
    monkeypatch.setattr(exported.OnnxSASRec, "recommend_batch",
                        lambda self, sequences, k=10: [list(reversed(r)) for r in real(self, sequences, k)])
    said: list[str] = []
    torch = SASRecRecommender(checkpoint, built.artifacts.item_map)
    assert exported.export_checked(torch, checkpoint, load_item_map(built.artifacts.item_map),
                                   exported.probe_sequences(built), said.append) is None
    assert not exported.graph_path(checkpoint).exists() and "stays on PyTorch" in said[0]


def test_the_top_k_columns_are_those_of_a_stable_full_sort():
    """Ties go to the lower column, as `argsort(kind="stable")` orders them, at every cut."""
    import numpy as np

    rng = np.random.default_rng(7)
    for trial in range(500):
        size = int(rng.integers(1, 40))
        scores = (rng.integers(0, 4, size) if trial % 2 else rng.standard_normal(size)).astype(np.float32)
        for k in (1, 3, 10, size, size + 5):
            assert exported.stable_top_k(scores, k) == np.argsort(-scores, kind="stable")[:k].tolist()
    assert exported.stable_top_k(np.array([1.0, 2.0, 2.0, 0.5, 2.0], dtype=np.float32), 2) == [1, 2]
