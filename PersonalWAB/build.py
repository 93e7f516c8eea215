"""Build the derived artefacts a data directory needs: search index(es), the SASRec
recommender, and the MiniLM embedding caches (target reviews; behaviours and
instructions for relevant/task-specific memory). Each is built once and reused;
`--force` rebuilds.

`python -m PersonalWAB.build --data_dir DIR [--search_backend lucene|bm25s|all]`; the settings of the
last build are recorded beside the artefacts (cache/build_command.json).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

from PersonalWAB.cli import leave
from PersonalWAB.data.loader import BenchmarkData, load_benchmark_data
from PersonalWAB.errors import DataError
from PersonalWAB.paths import default_data_dir
from PersonalWAB.progress import announce_build, prebuild_command
from PersonalWAB.protocol import Protocol, load_protocol
from PersonalWAB.scratch import atomic_write_text, remove_stale
from PersonalWAB.settings import parse, resolved, setting
from PersonalWAB.engines.search import BACKENDS
from PersonalWAB.engines.text_embedding import EXACT, EmbeddingPrecision
from PersonalWAB.schema_types import Task


# build speeds on the 2-core machine of docs/performance.md (`full`): Lucene 35,772 products in
# 9.4 s, bm25s in 4.1 s (2026-11-22), SASRec 208.7 s for 40,600 behaviours (2026-11-26, 400 epochs)
INDEX_PRODUCTS_PER_S = {"lucene": 3800.0, "bm25s": 8700.0}
SASREC_BEHAVIOURS_PER_S = 195.0


def _index_exists(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def review_cache_file(data: BenchmarkData) -> Path:
    """Where MiniLM embeddings of the target reviews are kept between runs."""
    return data.artifacts.cache_dir / "review_targets.npz"


def cache_review_embeddings(data: BenchmarkData, tasks: list[Task]) -> int:
    """Embed the real reviews of these review tasks (from the cache when possible);
    returns how many had to be encoded."""
    from PersonalWAB.engines.text_embedding import shared_embedder

    texts = [t["target"]["review"]["text"] for t in tasks if t["type"] == "review"]
    return shared_embedder().remember(texts, cache_file=review_cache_file(data),
                                      prebuild=prebuild_command(data.data_dir, "--memory_embeddings 0"))


def _record_build_times(data: BenchmarkData, seconds: dict[str, float]) -> None:
    if not seconds:
        return
    path = data.artifacts.cache_dir / "build_times.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    known.update({name: round(value, 2) for name, value in seconds.items()})
    atomic_write_text(path, json.dumps(known, indent=2))


def _index_is_current(index_dir: Path, protocol: Protocol, data: BenchmarkData) -> bool:
    """Present, and holding these products rendered by this protocol's texts; the official
    prebuilt index is used as it is."""
    from PersonalWAB.engines.search.common import index_mismatch

    return _index_exists(index_dir) and \
        index_mismatch(index_dir, protocol.contents_fingerprint, data.products_fingerprint) is None


def _recommender_is_stale(data: BenchmarkData, log: Callable[[str], None]) -> bool:
    """A checkpoint trained here on these files before they were edited is trained again, with a
    warning. One made for other data (another item map) is left for the run to refuse by name."""
    from PersonalWAB.engines.recommender.engine import foreign_recommender, trained_on_other_data

    checkpoint = data.artifacts.checkpoint
    if foreign_recommender(checkpoint, data.artifacts.item_map, data.products) is not None:
        return False
    if not trained_on_other_data(checkpoint, data):
        return False
    log(f"warning: {checkpoint} was trained on the products and histories of {data.data_dir} before they changed; "
        "training it again")
    return True


def _export_recommender(data: BenchmarkData, log: Callable[[str], None]) -> dict[str, float]:
    """The checkpoint exported to ONNX and checked against PyTorch, where none is there yet (and
    the ONNX backend is chosen, and the checkpoint serves these products)."""
    from PersonalWAB.engines.recommender import exported
    from PersonalWAB.engines.recommender.engine import SASRecRecommender, foreign_recommender, load_item_map

    artifacts = data.artifacts
    if exported.backend() != "onnx" or exported.usable_graph(artifacts.checkpoint) is not None \
            or foreign_recommender(artifacts.checkpoint, artifacts.item_map, data.products) is not None:
        return {}
    start = time.perf_counter()
    probes = exported.probe_sequences(data)
    kept = exported.export_checked(SASRecRecommender(artifacts.checkpoint, artifacts.item_map), artifacts.checkpoint,
                                   load_item_map(artifacts.item_map), probes, log)
    if kept is not None:
        log(f"exported SASRec to {exported.graph_path(artifacts.checkpoint)} (its top-{exported.CHECK_K} equal to "
            f"PyTorch's on {len(probes)} probe sequences)")
    return {"sasrec_onnx": time.perf_counter() - start}


def build_artifacts(data: BenchmarkData, search_backends: tuple[str, ...] = ("lucene",), recommender: bool = True,
                    review_embeddings: bool = False, memory_embeddings: bool = False, force: bool = False,
                    log: Callable[[str], None] = print, protocol: Protocol | None = None,
                    puma_embeddings: bool = False, embedding_precision: str = EXACT) -> dict[str, float]:
    """Build what is missing or stale (everything with `force`); return seconds per artefact
    built (also recorded in the cache folder's build_times.json). Search indexes and memory
    embeddings hold text rendered by `protocol` (default: `load_protocol()`); the memory
    embeddings are of `embedding_precision` (PUMA's and the review scores' are always exact)."""
    protocol = protocol or load_protocol()
    artifacts = data.artifacts
    seconds: dict[str, float] = {}
    folders = {artifacts.lucene_indexes, artifacts.bm25s_indexes, artifacts.checkpoint.parent, artifacts.cache_dir}
    for folder in sorted(folders):
        for path in remove_stale(folder):
            log(f"removed {path}, left by a build that was killed")
    for backend in search_backends:
        from PersonalWAB.engines.search import build_index, search_index_dir
        from PersonalWAB.engines.search.common import is_prebuilt

        index_dir = search_index_dir(data, backend, protocol)
        if is_prebuilt(index_dir):
            continue  # the official release's own index, used as it is
        if force or not _index_is_current(index_dir, protocol, data):
            announce_build(f"the {backend} search index in {index_dir} ({protocol.name} product texts)",
                           len(data.products), "products",
                           INDEX_PRODUCTS_PER_S.get(backend, INDEX_PRODUCTS_PER_S["lucene"]),
                           prebuild_command(data.data_dir, f"--search_backend {backend} --memory_embeddings 0"), log)
            start = time.perf_counter()
            build_index(backend, data.products, index_dir, protocol.product_block, protocol.contents_fingerprint,
                        products_fingerprint=data.products_fingerprint)
            seconds[f"{backend}_index"] = time.perf_counter() - start
    if recommender and (force or not artifacts.checkpoint.exists() or _recommender_is_stale(data, log)):
        from PersonalWAB.engines.recommender.train import SASRecTrainConfig, train_sasrec

        if not data.is_synthetic:
            log("warning: no official SASRec checkpoint found; training one on the benchmark histories "
                "(results will differ from runs with the official checkpoint)")
        announce_build(f"training the SASRec recommender into {artifacts.checkpoint}",
                       sum(len(h) for h in data.histories.values()), "behaviours", SASREC_BEHAVIOURS_PER_S,
                       prebuild_command(data.data_dir, "--memory_embeddings 0"), log)
        start = time.perf_counter()
        metrics = train_sasrec(data, artifacts.checkpoint, artifacts.item_map, SASRecTrainConfig())
        seconds["sasrec"] = time.perf_counter() - start
        log(f"SASRec held-out HR@10 {metrics['sasrec']['hr@10']:.4f} NDCG@10 {metrics['sasrec']['ndcg@10']:.4f} "
            f"(popularity {metrics['popularity']['hr@10']:.4f} / {metrics['popularity']['ndcg@10']:.4f}); "
            f"details in {artifacts.checkpoint}.json")
    if recommender and artifacts.checkpoint.exists():
        seconds.update(_export_recommender(data, log))
    if review_embeddings:
        if force and review_cache_file(data).exists():
            review_cache_file(data).unlink()
        start = time.perf_counter()
        encoded = cache_review_embeddings(data, [t for split in data.tasks.values() for t in split])
        if encoded:
            seconds["review_embeddings"] = time.perf_counter() - start
            log(f"embedded {encoded} target reviews into {review_cache_file(data)}")
    if memory_embeddings:
        from PersonalWAB.memory.embeddings import build_behaviour_embeddings

        seconds.update(build_behaviour_embeddings(data, protocol, force=force, log=log, precision=embedding_precision))
    if puma_embeddings:
        from PersonalWAB.memory.embeddings import PUMA_TEMPLATE, build_behaviour_embeddings

        built = build_behaviour_embeddings(data, protocol, force=force, log=log, template=PUMA_TEMPLATE,
                                           precision=EXACT)
        seconds.update({f"puma_{name}": value for name, value in built.items()})
    _record_build_times(data, seconds)
    return seconds


@dataclass
class BuildSettings(EmbeddingPrecision):
    """The flags of `python -m PersonalWAB.build`."""

    data_dir: str | None = setting(None, "data folder whose artefacts to build", metavar="DIR",
                                   default_text="the official data when placed, else data/synthetic/small")
    search_backend: str = setting("lucene", "search index(es) to build: lucene (the release's engine, needs Java), "
                                            "bm25s (pure Python) or all", choices=(*BACKENDS, "all"))
    recommender: bool = setting(True, "train the SASRec recommender when no checkpoint is present; 0 leaves it to "
                                      "the first run with recommendation tasks", aliases=("no_recommender",))
    memory_embeddings: bool = setting(True, "embed behaviours and instructions for the relevant and task-specific "
                                            "memory modes; 0 skips it when no run uses them",
                                      aliases=("no_memory_embeddings",))
    puma_embeddings: bool = setting(False, "also embed behaviours in PUMA's relevance text (PUMA step 1 and its "
                                           "agent read them)")
    force: bool = setting(False, "rebuild every artefact even when present and current (after changing the data "
                                 "in place)")
    protocol_file: str | None = setting(None, "release protocol pack whose texts the index and memory embeddings "
                                              "hold", metavar="FILE",
                                        default_text="the default pack when placed, else the project's texts")


def _record_settings(data: BenchmarkData, settings: BuildSettings, seconds: dict[str, float]) -> None:
    """The last build command's settings and what it built, beside the artefacts (build_command.json)."""
    path = data.artifacts.cache_dir / "build_command.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"settings": resolved(settings), "built": {name: round(value, 2) for name, value in seconds.items()}}
    atomic_write_text(path, json.dumps(record, indent=2))


def main(argv: list[str] | None = None) -> int:
    settings = parse(BuildSettings, argv, description=__doc__)
    backends = BACKENDS if settings.search_backend == "all" else (settings.search_backend,)
    try:
        data = load_benchmark_data(settings.data_dir or default_data_dir())
        seconds = build_artifacts(data, backends, recommender=settings.recommender,
                                  review_embeddings=True, memory_embeddings=settings.memory_embeddings,
                                  force=settings.force, protocol=load_protocol(settings.protocol_file),
                                  puma_embeddings=settings.puma_embeddings,
                                  embedding_precision=settings.embedding_precision)
        _record_settings(data, settings, seconds)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the artefact being built was discarded; the others are kept", file=sys.stderr)
        leave(130)  # the build is stopped and cleaned up: nothing is left to tear down but the data
    print("built: " + (", ".join(f"{name} {s:.1f}s" for name, s in seconds.items()) or "nothing (all present)"))
    return 0


if __name__ == "__main__":
    from PersonalWAB.cli import run_command

    sys.exit(run_command(main))
