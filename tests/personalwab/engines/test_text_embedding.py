"""The MiniLM backends: ONNX Runtime (the CPU default) and OpenVINO in fp32 (the CPU default for
memory caches) compute what PyTorch computes; a damaged review cache or ONNX export is named and
made again."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from PersonalWAB.engines import text_embedding
from PersonalWAB.engines.text_embedding import BACKEND_ENV, TextEmbedder, default_backend, export_onnx
from tests.conftest import HashEncoder

TEXTS = [
    "",
    "   ",
    "  leading and trailing spaces  ",
    "Héllo wörld ☃ 😀 中文字符",
    "tab\tand\nnewline",
    "UPPER lower MiXeD, punctuation!?",
    "The battery lasts two days and charges quickly. " * 3,
    "word " * 700,  # past the 512-token limit: truncated the same way
]


@pytest.fixture(scope="module")
def torch_vectors():
    return TextEmbedder(backend="torch").encode(TEXTS)


@pytest.mark.parametrize("backend", ["openvino", "onnx"])
def test_the_cpu_backends_equal_pytorch_batched_and_alone(torch_vectors, backend):
    encoder = TextEmbedder(backend=backend, batch_size=3)  # several batches of different lengths
    batched = encoder.encode(TEXTS)
    alone = np.stack([encoder.encode([text])[0] for text in TEXTS])
    assert encoder.backend == backend
    if backend == "openvino":  # its check against ONNX Runtime is kept beside the graph
        graph = text_embedding.onnx_model_file(text_embedding.default_model_path(), encoder.weights_id)
        assert list(graph.parent.glob(f"{graph.name}.openvino-f32-*.json"))
    assert batched.shape == (len(TEXTS), text_embedding.DIMENSION) and batched.dtype == np.float32
    assert np.abs(batched - torch_vectors).max() <= 1e-6
    assert np.abs(alone - torch_vectors).max() <= 1e-6
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("backend", ["openvino", "onnx"])
def test_threads_encoding_at_once_get_their_own_vectors(torch_vectors, backend):
    encoder = TextEmbedder(backend=backend)
    results: dict[int, np.ndarray] = {}

    def encode(i: int) -> None:
        results[i] = np.stack([encoder.encode([text])[0] for text in TEXTS[i % 4:] + TEXTS[:i % 4]])

    workers = [threading.Thread(target=encode, args=(i,)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for i, vectors in results.items():
        expected = np.concatenate([torch_vectors[i % 4:], torch_vectors[:i % 4]])
        assert np.abs(vectors - expected).max() <= 1e-6
    assert len(results) == 4


def test_backend_choice(monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "torch")
    assert default_backend() == "torch"
    monkeypatch.setenv(BACKEND_ENV, "tensorflow")
    with pytest.raises(ValueError, match=BACKEND_ENV):
        default_backend()
    monkeypatch.delenv(BACKEND_ENV)
    monkeypatch.setattr(text_embedding, "_gpu_present", lambda: False)
    assert default_backend() == "onnx"  # reviews scored one by one, from several threads at once
    assert default_backend(bulk=True) == text_embedding.memory_backend("fp32") == "openvino"  # memory caches
    assert text_embedding.shared_embedder(bulk=True) is not text_embedding.shared_embedder()
    assert text_embedding.shared_embedder(bulk=True).backend == "openvino"
    monkeypatch.setattr(text_embedding, "_gpu_present", lambda: True)
    assert default_backend() == default_backend(bulk=True) == "torch"
    with pytest.raises(ValueError, match="embedding backend"):
        TextEmbedder(backend="tensorflow")


def test_an_export_that_differs_from_pytorch_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(text_embedding, "EXPORT_TOLERANCE", -1.0)  # any difference at all is too much
    target = tmp_path / "onnx" / "minilm.onnx"
    with pytest.raises(RuntimeError, match="differs from PyTorch"):
        export_onnx(text_embedding.default_model_path(), target)
    assert list(target.parent.iterdir()) == []


def test_openvino_fp32_that_differs_from_onnx_runtime_is_not_used(torch_vectors, monkeypatch, capsys):
    """Checked once per graph, OpenVINO version and CPU: on another CPU whose OpenVINO computes
    other vectors (any difference, here), ONNX Runtime answers instead, with a warning."""
    monkeypatch.setattr(text_embedding, "_cpu_description", lambda: "another CPU")
    monkeypatch.setattr(text_embedding, "FP32_TOLERANCE", -1.0)
    encoder = TextEmbedder()
    monkeypatch.setattr(encoder, "backend", "openvino")
    assert np.abs(encoder.encode(TEXTS) - torch_vectors).max() <= 1e-6
    assert encoder.backend == "onnx"
    err = capsys.readouterr().err
    assert "warning: OpenVINO" in err and "in fp32 differs from ONNX Runtime by" in err
    assert "MiniLM runs on ONNX Runtime" in err


bf16_cpu = pytest.mark.skipif(not text_embedding.cpu_has_bf16(), reason="this CPU has no bf16 instructions")


@bf16_cpu
def test_bf16_on_openvino_is_near_fp32_from_threads_at_once_and_named_apart(torch_vectors):
    """A fresh bf16 encoder spreading batches over two threads at once (its first calls set up
    OpenVINO's numpy interface, which deadlocked when two threads did it together)."""
    bf16 = TextEmbedder(precision="bf16", batch_size=2, threads=2)
    vectors = bf16.encode(TEXTS)
    assert bf16.backend == "openvino" and vectors.dtype == np.float32
    assert 0 < np.abs(vectors - torch_vectors).max() <= 1e-2  # not exact, close
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert bf16.model_id != TextEmbedder().model_id and "bf16-openvino" in bf16.model_id  # its own store


def test_bf16_needs_a_cpu_with_bf16_instructions(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    monkeypatch.setattr(text_embedding, "_gpu_present", lambda: False)
    monkeypatch.setattr(text_embedding, "cpu_has_bf16", lambda: False)
    with pytest.raises(ValueError, match="--embedding_precision bf16 needs a CPU with bf16 instructions"):
        text_embedding.memory_backend("bf16")
    assert text_embedding.memory_backend("fp32") == "openvino"  # fp32 needs no bf16 instructions
    monkeypatch.setenv(BACKEND_ENV, "onnx")  # ONNX Runtime computes fp32 only
    with pytest.raises(ValueError, match="for bf16 embeddings expected one of openvino, torch"):
        text_embedding.memory_backend("bf16")
    with pytest.raises(ValueError, match="embedding precision 'fp16'"):
        TextEmbedder(precision="fp16")


def test_the_arithmetic_of_an_encoding_counts_tokens_and_token_pairs():
    per_token = 2 * (4 * 384 * 384 + 2 * 384 * 1536)
    assert text_embedding.minilm_flops([10]) == 6 * (per_token * 10 + 4 * 100 * 384)
    sentence = "The battery lasts two days and charges quickly."
    assert text_embedding.token_counts([sentence] * 3) == [11] * 3  # 9 words and a full stop, with [CLS] and [SEP]
    assert text_embedding.token_counts(["word " * 700]) == [text_embedding.MAX_TOKENS]  # truncated as encoded


def test_a_garbage_review_cache_is_named_and_rewritten(tmp_path, capsys):
    cache_file = tmp_path / "review_targets.npz"
    cache_file.write_bytes(b"garbage")
    embedder = TextEmbedder()
    embedder.encode = lambda texts, progress=False: HashEncoder().encode(texts)  # no model needed
    assert embedder.remember(["a review", "another"], cache_file=cache_file) == 2
    assert f"warning: {cache_file}:" in capsys.readouterr().err
    again = TextEmbedder()
    again.encode = lambda texts, progress=False: np.zeros((0, 384), dtype=np.float32) if not texts else \
        pytest.fail("the rewritten cache should hold them")
    assert again.remember(["a review", "another"], cache_file=cache_file) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_truncated_onnx_export_is_removed_and_exported_again(tmp_path, monkeypatch, capsys):
    import onnx
    from onnx import TensorProto, helper

    from PersonalWAB.digests import record_digest

    graph = tmp_path / "onnx" / "minilm.onnx"
    graph.parent.mkdir()
    graph.write_bytes(b"\x08\x07\x12\x0bpartial")  # the first bytes of a graph, cut off
    record_digest(graph)  # cut off as it was written: only loading it shows the damage
    exports = []

    def export(model_path: Path, target: Path) -> None:  # a stand-in graph: the real export takes ~15 s
        exports.append(target)
        value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
        model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [value],
                                                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]),
                                  opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, str(target))

    monkeypatch.setattr(text_embedding, "onnx_model_file", lambda model_path, model_id: graph)
    monkeypatch.setattr(text_embedding, "export_onnx", export)
    encoder = text_embedding.OnnxMiniLM(text_embedding.default_model_path(), "test", 1)
    assert exports == [graph] and encoder.session.get_inputs()[0].name == "x"
    err = capsys.readouterr().err
    assert f"warning: {graph}: not a usable ONNX graph" in err and "exporting it again" in err


class _Exported(Exception):
    """Raised by the stand-in exporter: the damaged graph was sent to be exported again."""
def _scramble_npz(path: Path) -> None:
    """Rewrite an .npz cache with random vectors of the same shape (it still loads)."""

    with np.load(path) as stored:
        keys, vectors = stored["keys"], stored["vectors"]
    np.savez(path, keys=keys, vectors=np.random.default_rng(0).standard_normal(vectors.shape).astype(np.float32))


def test_a_review_cache_rewritten_with_other_vectors_is_rebuilt(tmp_path: Path, capsys, monkeypatch) -> None:
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


def test_an_onnx_graph_damaged_at_the_same_size_is_exported_again(tmp_path: Path, capsys, monkeypatch) -> None:
    from PersonalWAB.digests import record_digest

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
