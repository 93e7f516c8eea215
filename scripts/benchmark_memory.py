"""Measure the memory mechanisms on a data directory and save the figures as JSON.

    python scripts/benchmark_memory.py --data_dir data/synthetic/full --out data/benchmark_memory.json

Figures: the one-time MiniLM cache build (every behaviour and every instruction,
rebuilt from scratch unless `--keep_cache`), the time a new process needs to open
the cache, and per-task latency (p50/p95/max) of `memory_text` for every mode
over a task split, which covers everything an agent calls to get its memory.
The machine's load average is recorded beside the figures: the build is CPU-bound,
so a busy machine makes it slower.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.memory.interec import InterecMemoryStore, initial_memory, write_memory_file
from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
from PersonalWAB.memory import MEMORY_MODES, memory_text
from PersonalWAB.protocol import load_protocol
from PersonalWAB.memory.embeddings import BehaviourEmbeddings
from PersonalWAB.cli import run_command
from PersonalWAB.settings import parse, setting

REPO_ROOT = Path(__file__).resolve().parent.parent
RECMIND_LENGTH = 400  # the paper's RecMind setting


class CountingEncoder:
    """Wraps an encoder to prove that opening a built cache encodes nothing."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.texts = 0

    def encode(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return self.inner.encode(texts)


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {"p50": round(statistics.median(ordered), 3),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
            "max": round(ordered[-1], 3), "n": len(ordered)}


def load_averages() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def build(data: Any, keep_cache: bool, threads: int) -> dict[str, Any]:
    from PersonalWAB.engines.text_embedding import TextEmbedder

    behaviours = sum(len(h) for h in data.histories.values())
    start = time.perf_counter()
    encoder = TextEmbedder(threads=threads)
    seconds = BehaviourEmbeddings(data, load_protocol(), encoder).ensure(force=not keep_cache, log=print)
    total = time.perf_counter() - start
    result: dict[str, Any] = {"behaviours": behaviours, "threads": threads, "backend": encoder.backend,
                              "total_seconds": round(total, 1),
                              "seconds": {name: round(s, 1) for name, s in seconds.items()}}
    built = [s for name, s in seconds.items() if name.startswith("behaviour_embeddings")]
    if built:
        result["behaviours_per_second"] = round(behaviours / built[0], 1)
    return result


def cache_open(data: Any) -> dict[str, Any]:
    """A fresh instance over the built cache, as a new run process would open it."""
    from PersonalWAB.engines.text_embedding import shared_embedder

    encoder = CountingEncoder(shared_embedder(bulk=True))
    start = time.perf_counter()
    BehaviourEmbeddings(data, load_protocol(), encoder).ensure()
    return {"seconds": round(time.perf_counter() - start, 3), "texts_encoded": encoder.texts}


def latencies(data: Any, split: str, length: int, store: InterecMemoryStore) -> dict[str, Any]:
    tasks = data.split(split)
    results: dict[str, Any] = {}
    for mode in MEMORY_MODES:
        mode_length = RECMIND_LENGTH if mode == "recmind" else length
        samples, characters = [], []
        for task in tasks:
            start = time.perf_counter()
            text = memory_text(load_protocol(), data, task, mode, mode_length,
                               tool_name=FUNCTION_FOR_TASK_TYPE[task["type"]],
                               preferences=store.get(task["user_id"])) or ""
            samples.append((time.perf_counter() - start) * 1000)
            characters.append(len(text))
        results[mode] = {"length": mode_length, "ms": percentiles(samples),
                         "mean_chars": round(statistics.mean(characters))}
        print(f"  {mode:<13} length {mode_length:<4} p50 {results[mode]['ms']['p50']:.3f} ms  "
              f"p95 {results[mode]['ms']['p95']:.3f} ms  ~{results[mode]['mean_chars']} chars")
    return results


@dataclass
class MemoryBenchmarkSettings:
    """The data measured, the memory length and the cores the cache build may use."""

    data_dir: str = setting(str(REPO_ROOT / "data" / "synthetic" / "full"), "data directory to measure")
    out: str = setting(str(REPO_ROOT / "data" / "benchmark_memory.json"), "JSON file for the figures")
    split: str = setting("test", "task split whose memory latency is measured", choices=("train", "test"))
    length: int = setting(50, "memory length of the latency runs (RecMind always uses 400)")
    threads: int = setting(2, "CPU cores while encoding; match the machine's free cores")
    keep_cache: bool = setting(False, "reuse a matching cache instead of rebuilding it (measures opening, not "
                                      "building)")


def main(argv: list[str] | None = None) -> int:
    args = parse(MemoryBenchmarkSettings, argv, prog="scripts/benchmark_memory.py", description=__doc__)

    report: dict[str, Any] = {"data_dir": args.data_dir, "cpu_count": os.cpu_count(),
                              "load_average_start": load_averages()}
    start = time.perf_counter()
    data = load_benchmark_data(args.data_dir)
    report["data_source"] = data.source
    report["data_load_seconds"] = round(time.perf_counter() - start, 2)

    print(f"building the memory cache of {args.data_dir} ({'reuse' if args.keep_cache else 'from scratch'})")
    report["cache_build"] = build(data, args.keep_cache, args.threads)
    report["cache_open"] = cache_open(data)
    print(f"cache build {report['cache_build']['total_seconds']} s; a fresh instance opens it in "
          f"{report['cache_open']['seconds']} s encoding {report['cache_open']['texts_encoded']} texts")

    with tempfile.TemporaryDirectory() as tmp:
        memory_file = Path(tmp) / "interec.json"
        write_memory_file(memory_file, initial_memory(data))
        print(f"per-task memory_text latency over the {args.split} split:")
        report["per_task_latency"] = latencies(data, args.split, args.length, InterecMemoryStore(memory_file))
    report["load_average_end"] = load_averages()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
