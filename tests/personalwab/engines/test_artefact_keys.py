"""Artefacts are keyed to what they were built from: a recommender of another data folder,
or one trained on the files before they changed, is refused or retrained, never used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from PersonalWAB.build import _recommender_is_stale
from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.engines.recommender.engine import checkpoint_record_path
from PersonalWAB.engines.shared import Engines
from PersonalWAB.errors import DataError
from tests.conftest import rewrite


@pytest.fixture()
def other_data(tmp_path: Path) -> Path:
    """Tiny data of another seed: none of its ASINs is in the seed-0 data."""
    from PersonalWAB.data.synthetic import generate_synthetic

    generate_synthetic(tmp_path / "other", scale="tiny", seed=1)
    return tmp_path / "other"


@pytest.fixture()
def built(tiny_engines, tiny_data_dir: Path) -> Path:
    """The recommender folder of the tiny data, trained by this project (with its record)."""
    return tiny_data_dir / "recommender"


def _refusal(data_dir: Path) -> str:
    data = load_benchmark_data(data_dir, reload=True)
    with pytest.raises(DataError) as refused:
        Engines(data, "bm25s").check(search=False, recommender=True)
    return str(refused.value)


def test_training_records_what_the_checkpoint_was_trained_on(built: Path, tiny_data) -> None:
    record = json.loads(checkpoint_record_path(built / "pwab.pth").read_text())
    assert record["behaviours_fingerprint"] == tiny_data.behaviours_fingerprint
    assert len(record["checkpoint_sha256"]) == len(record["item_map_sha256"]) == 64


def test_a_recommender_copied_from_another_data_folder_is_refused(built: Path, other_data: Path) -> None:
    shutil.copytree(built, other_data / "recommender", dirs_exist_ok=True)
    message = _refusal(other_data)
    assert str(other_data / "recommender" / "1000_ids.json") in message
    assert "none of its" in message and "another data folder" in message


def test_a_checkpoint_copied_beside_another_item_map_is_refused(built: Path, other_data: Path) -> None:
    for name in ("pwab.pth", "pwab.pth.json"):  # the item map stays the other folder's own
        shutil.copy(built / name, other_data / "recommender" / name)
    message = _refusal(other_data)
    assert "item_map_sha256 differs" in message


def test_a_checkpoint_replaced_under_its_record_is_refused(built: Path, data_copy: Path) -> None:
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    checkpoint = data_copy / "recommender" / "pwab.pth"
    content = bytearray(checkpoint.read_bytes())
    content[len(content) // 2] ^= 0xFF  # same size, one byte flipped
    checkpoint.write_bytes(bytes(content))
    assert "checkpoint_sha256 differs" in _refusal(data_copy)


def test_a_checkpoint_without_its_item_map_is_refused(built: Path, data_copy: Path) -> None:
    (data_copy / "recommender").mkdir(exist_ok=True)
    shutil.copy(built / "pwab.pth", data_copy / "recommender" / "pwab.pth")
    (data_copy / "recommender" / "1000_ids.json").unlink(missing_ok=True)
    assert "its item map" in _refusal(data_copy) and "is missing" in _refusal(data_copy)


def test_a_checkpoint_of_edited_data_is_refused_by_engines_and_retrained_by_build(built: Path,
                                                                                  data_copy: Path) -> None:
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    record_path = checkpoint_record_path(data_copy / "recommender" / "pwab.pth")
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps({**record, "behaviours_fingerprint": "0" * 64}))
    assert "trained on other products or histories" in _refusal(data_copy)
    logged: list[str] = []
    assert _recommender_is_stale(load_benchmark_data(data_copy), logged.append)
    assert logged and logged[0].startswith("warning:") and "training it again" in logged[0]


def test_edited_tasks_or_profiles_keep_the_recommender(built: Path, data_copy: Path) -> None:
    """SASRec learns from the products and histories alone: a task file cut to a few tasks (what
    a check on a subset does) neither refuses nor retrains it."""
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    rewrite(data_copy / "user_instructions.json", lambda tasks: tasks.update(test=tasks["test"][:3]))
    data = load_benchmark_data(data_copy, reload=True)
    Engines(data, "bm25s").check(search=False, recommender=True)
    assert not _recommender_is_stale(data, lambda _: None)


def test_a_record_that_names_every_data_file_is_still_checked(built: Path, data_copy: Path) -> None:
    """A checkpoint recorded with the fingerprint of all four files (before the record named the
    products and histories alone) is refused when those files changed, kept when they did not."""
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    record_path = checkpoint_record_path(data_copy / "recommender" / "pwab.pth")
    record = {k: v for k, v in json.loads(record_path.read_text()).items() if k != "behaviours_fingerprint"}
    data = load_benchmark_data(data_copy, reload=True)
    record_path.write_text(json.dumps({**record, "data_fingerprint": data.fingerprint}))
    Engines(data, "bm25s").check(search=False, recommender=True)
    record_path.write_text(json.dumps({**record, "data_fingerprint": "0" * 64}))
    assert "trained on other products or histories" in _refusal(data_copy)


def test_a_foreign_recommender_is_not_retrained_over(built: Path, other_data: Path) -> None:
    shutil.copytree(built, other_data / "recommender", dirs_exist_ok=True)
    assert not _recommender_is_stale(load_benchmark_data(other_data), lambda _: None)


class _Exported(Exception):
    """Raised by the stand-in exporter: the damaged graph was sent to be exported again."""


def _scramble_npz(path: Path) -> None:
    """Rewrite an .npz cache with random vectors of the same shape (it still loads)."""
    import numpy as np

    with np.load(path) as stored:
        keys, vectors = stored["keys"], stored["vectors"]
    np.savez(path, keys=keys, vectors=np.random.default_rng(0).standard_normal(vectors.shape).astype(np.float32))


def test_a_review_cache_rewritten_with_other_vectors_is_rebuilt(tmp_path: Path, capsys, monkeypatch) -> None:
    import numpy as np
    from conftest import HashEncoder

    from PersonalWAB.engines.text_embedding import TextEmbedder

    def encode(self: TextEmbedder, texts: list[str], progress: bool = False) -> np.ndarray:
        return HashEncoder().encode(texts) if texts else np.zeros((0, 384), dtype=np.float32)

    monkeypatch.setattr(TextEmbedder, "encode", encode)
    cache = tmp_path / "cache" / "review_targets.npz"
    texts = ["great battery", "broke after a week", "fits well"]
    assert TextEmbedder().remember(texts, cache) == 3
    assert TextEmbedder().remember(texts, cache) == 0, "a whole cache is used as it is"
    _scramble_npz(cache)
    again = TextEmbedder()
    assert again.remember(texts, cache) == 3, "every review is encoded again"
    assert "differs from the digest recorded" in capsys.readouterr().err
    assert float(again.embedding(texts[0]) @ HashEncoder().encode(texts[:1])[0]) > 0.999
    assert TextEmbedder().remember(texts, cache) == 0, "the rebuilt cache carries its digest"


def test_a_memory_matrix_rewritten_with_other_vectors_is_rebuilt(data_copy: Path, capsys) -> None:
    import numpy as np
    from conftest import HashEncoder

    from PersonalWAB.memory.embeddings import BehaviourEmbeddings
    from PersonalWAB.protocol import load_protocol

    data = load_benchmark_data(data_copy)
    assert BehaviourEmbeddings(data, load_protocol(), HashEncoder()).ensure(log=None)
    matrix = next((data_copy / "cache").glob("behaviour_embeddings_*.npy"))
    np.save(matrix, np.random.default_rng(0).standard_normal(np.load(matrix).shape).astype(np.float32))
    rebuilt = BehaviourEmbeddings(data, load_protocol(), HashEncoder()).ensure(log=None)
    assert rebuilt and "differs from the digest recorded" in capsys.readouterr().err
    assert not BehaviourEmbeddings(data, load_protocol(), HashEncoder()).ensure(log=None)


def test_an_onnx_graph_damaged_at_the_same_size_is_exported_again(tmp_path: Path, capsys, monkeypatch) -> None:
    from PersonalWAB.digests import record_digest
    from PersonalWAB.engines import text_embedding

    graph = tmp_path / "minilm.onnx"
    graph.write_bytes(bytes(range(256)) * 400)
    record_digest(graph)
    graph.write_bytes(bytes(reversed(range(256))) * 400)  # same size, other bytes
    monkeypatch.setattr(text_embedding, "onnx_model_file", lambda *_: graph)

    def export(model_path: Path, target: Path) -> None:
        assert not target.exists(), "the damaged graph is removed before exporting"
        raise _Exported

    monkeypatch.setattr(text_embedding, "export_onnx", export)
    with pytest.raises(_Exported):
        text_embedding.OnnxMiniLM(tmp_path, "model", threads=1)
    assert f"warning: {graph}: its content" in capsys.readouterr().err
