"""Measure PersonalWAB's speed on a data directory and save the figures as JSON.

    python scripts/benchmark.py --data_dir data/synthetic/full --out data/benchmark.json

Figures: one-time build costs (search index, SASRec training, review-embedding
cache; built now if missing, else read from the cache folder's record),
start-up time to the first finished task (fresh process), per-function latency
(p50/p95), and whole-test-split throughput of the offline agent with and without
history (whose per-type scores show the personalization signal), and with
`--llm_agent` the function-calling agent with relevant memory against a scripted
local model server.

The memory-embedding cache at each `--precisions` is measured against the fp32 compute bound
of this machine: the cache's arithmetic (`minilm_flops` of its texts) over the fastest fp32
matrix product the cores give at MiniLM's feed-forward shape (the faster of ONNX Runtime's and
OpenVINO's, on every core at once, measured now); a bf16 cache also against OpenVINO's bf16
product (its bf16 bound). `--memory_build 1` builds the caches that are missing (`full` at fp32:
~15-45 min on 2 cores); by default the pace is measured on a sample of the cache's texts and
the build time projected from it.

The headline (`headline` in the JSON, printed last) gives each figure a user waits for with
the load average beside it, since the machine is shared: the cache's ratio to the bound per
precision, the start-up to the first scored task and the whole test split from a fresh
`run.py` process.
`--agreement_data_dir DIR` also rebuilds DIR's memory cache with the exact CPU path and
checks that the `relevant` memory of every task of DIR equals PyTorch encoding each text
alone (top-10 lists and scores).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # devtools/ (the scripted model server) lives at the root, outside the packages

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.engines.search import BACKENDS  # noqa: E402
from PersonalWAB.outputs import FILE, parse_command, write_output  # noqa: E402
from PersonalWAB.settings import setting  # noqa: E402


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
        "n": len(ordered),
    }


def time_calls(call: Callable[[Any], Any], arguments: list[Any]) -> dict[str, float]:
    samples = []
    for argument in arguments:
        start = time.perf_counter()
        call(argument)
        samples.append((time.perf_counter() - start) * 1000)
    return percentiles(samples)


def run_py_seconds(*flags: str) -> float:
    """Wall time of a fresh `run.py` process with these flags, as a user's: Python keeps its
    bytecode (a `PYTHONDONTWRITEBYTECODE` of this shell would make every start compile the
    project's modules again, ~0.1-0.4 s), which a first, untimed run has written."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "run.py", *flags, "--quiet", "1", "--out", str(Path(tmp) / "run.json"),
                   "--overwrite", "1"]
        start = time.perf_counter()
        subprocess.run(command, cwd=REPO_ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - start


def startup_seconds(data_dir: Path, backend: str) -> float:
    """A fresh `run.py` process from its start until its first task is scored: the best of
    three after an untimed one (the machine is shared; the best is the least disturbed)."""
    flags = ("--data_dir", str(data_dir), "--search_backend", backend, "--end_index", "1")
    run_py_seconds(*flags)
    return min(run_py_seconds(*flags) for _ in range(3))


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


PEAK_ROWS = 16 * 313  # 16 texts of 313 tokens, by MiniLM's 384 x 1536 feed-forward weight


def fp32_peak_flops(seconds: float = 3.0) -> float:
    """The fastest fp32 matrix product these cores give at MiniLM's feed-forward shape: the
    faster of ONNX Runtime's and OpenVINO's (the fp32 encoders' libraries), one single-threaded
    product per core at once, as the encoders run (FLOP/s)."""
    import numpy as np
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    from PersonalWAB.engines.text_embedding import FEED_FORWARD, HIDDEN

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((HIDDEN, FEED_FORWARD)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"])], "peak",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [PEAK_ROWS, HIDDEN])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [PEAK_ROWS, FEED_FORWARD])],
                              [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    inputs = {"a": rng.standard_normal((PEAK_ROWS, HIDDEN)).astype(np.float32)}

    def product() -> Callable[[], Any]:
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        return lambda: session.run(None, inputs)

    return max(products_per_core(product, seconds), openvino_peak_flops("f32", seconds))


def bf16_peak_flops(seconds: float = 3.0) -> float | None:
    """The same product through OpenVINO in bf16 (the bf16 encoder's library and settings);
    None where the bf16 path cannot run here."""
    from PersonalWAB.engines.text_embedding import memory_backend

    try:
        if memory_backend("bf16") != "openvino":
            return None
    except ValueError:
        return None
    return openvino_peak_flops("bf16", seconds)


def openvino_peak_flops(precision: str, seconds: float) -> float:
    """The product through OpenVINO at inference precision `precision` (f32 or bf16), one stream
    per core."""
    import numpy as np
    import openvino
    from openvino import opset13

    from PersonalWAB.engines.text_embedding import FEED_FORWARD, HIDDEN

    rng = np.random.default_rng(0)
    rows = opset13.parameter([PEAK_ROWS, HIDDEN], np.float32)
    weight = opset13.constant(rng.standard_normal((HIDDEN, FEED_FORWARD)).astype(np.float32))
    cores = os.cpu_count() or 1
    compiled = openvino.Core().compile_model(
        openvino.Model([opset13.matmul(rows, weight, False, False)], [rows]), "CPU",
        {"INFERENCE_PRECISION_HINT": precision, "NUM_STREAMS": str(cores), "INFERENCE_NUM_THREADS": str(cores)})
    inputs = [rng.standard_normal((PEAK_ROWS, HIDDEN)).astype(np.float32)]

    def product() -> Callable[[], Any]:
        request = compiled.create_infer_request()
        return lambda: request.infer(inputs)

    return products_per_core(product, seconds)


def products_per_core(product: Callable[[], Callable[[], Any]], seconds: float) -> float:
    """FLOP/s of `PEAK_ROWS` x 384 x 1536 products run for `seconds` on every core at once, each
    core calling its own `product()` (warmed up first)."""
    from concurrent.futures import ThreadPoolExecutor

    from PersonalWAB.engines.text_embedding import FEED_FORWARD, HIDDEN

    cores = os.cpu_count() or 1
    calls = [product() for _ in range(cores)]
    for call in calls:
        call()

    def repeat(call: Callable[[], Any]) -> int:
        done, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            call()
            done += 1
        return done

    start = time.perf_counter()
    with ThreadPoolExecutor(cores) as pool:
        total = sum(pool.map(repeat, calls))
    return total * 2.0 * PEAK_ROWS * HIDDEN * FEED_FORWARD / (time.perf_counter() - start)


def memory_cache_texts(data: Any) -> list[str]:
    """Every text the `relevant` memory cache embeds: the behaviours, then the instructions."""
    from PersonalWAB.memory.embeddings import behaviour_texts, instruction_texts
    from PersonalWAB.protocol import load_protocol

    protocol = load_protocol()
    return [text for user_id in sorted(data.histories) for text in behaviour_texts(protocol, data.histories[user_id])
            ] + instruction_texts(data)


def cache_names(times: dict[str, float], precision: str) -> list[str]:
    """The memory caches of `precision` among a build_times.json's names (not PUMA's)."""
    from PersonalWAB.engines.text_embedding import EXACT, PRECISIONS
    from PersonalWAB.memory.embeddings import BEHAVIOURS, INSTRUCTIONS, precision_suffix

    others = tuple(precision_suffix(p) for p in PRECISIONS if p not in (precision, EXACT))
    return [name for name in times if name.startswith((BEHAVIOURS, INSTRUCTIONS))
            and name.endswith(precision_suffix(precision)) and not (others and name.endswith(others))]


def memory_cache(data: Any, precision: str, build: bool, sample: int, flops: float) -> dict[str, Any]:
    """The memory cache at one precision: its build time (measured now when `build` and it was
    missing; the recorded one when built before; else projected from the pace on `sample`
    texts spread over the cache), and its ratio to the fp32 bound at the cores' peak measured
    just before and just after it (on a shared machine it changes from minute to minute), with
    the load average."""
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.engines.text_embedding import TextEmbedder, memory_backend, minilm_flops, token_counts
    before = load_average()
    peak_before = fp32_peak_flops()
    if build:
        built = build_artifacts(data, (), recommender=False, memory_embeddings=True, embedding_precision=precision)
        how = "measured now" if built else "recorded when built"
        times = json.loads((data.artifacts.cache_dir / "build_times.json").read_text())
        seconds_of = {name: times[name] for name in cache_names(times, precision)}
        seconds = sum(seconds_of.values())
    else:
        texts = memory_cache_texts(data)
        chosen = texts[::max(1, len(texts) // sample)][:sample]
        encoder = TextEmbedder(precision=precision, backend=memory_backend(precision))  # as the build encodes
        encoder.encode(["warm up"])
        start = time.perf_counter()
        encoder.encode(chosen)
        pace = minilm_flops(token_counts(chosen)) / (time.perf_counter() - start)
        seconds, how = flops / pace, f"projected from the pace on {len(chosen)} of its texts"
    peak = (peak_before + fp32_peak_flops()) / 2
    bound_s = flops / peak
    figures = {"seconds": round(seconds, 1), "how": how, "ratio_to_fp32_bound": round(seconds / bound_s, 3),
               "fp32_bound_s": round(bound_s, 1), "fp32_peak_gflop_s": round(peak / 1e9, 1)}
    bf16_peak = bf16_peak_flops() if precision != "fp32" else None
    if bf16_peak:  # how near the bf16 path is to its own library's product (what bounds it)
        figures.update({"bf16_peak_gflop_s": round(bf16_peak / 1e9, 1),
                        "ratio_to_bf16_bound": round(seconds * bf16_peak / flops, 3)})
    return {**figures, "load_average_before_after": [before, load_average()]}


def fresh_split_seconds(data_dir: Path, backend: str, concurrency: int) -> float:
    """A fresh `run.py` process running the whole test split (offline agent, last memory)."""
    return run_py_seconds("--data_dir", str(data_dir), "--search_backend", backend,
                          "--max_concurrency", str(concurrency))


def puma_scoring_seconds(data: Any, backend: str) -> dict[str, Any]:
    """PUMA step 4 over ~10 candidates for every train instruction (benchmark_puma_scoring's set)."""
    import random

    from benchmark_puma_scoring import candidate_variants
    from PersonalWAB.engines.shared import Engines
    from PersonalWAB.engines.text_embedding import TextEmbedder
    from PUMA.candidate_scores import score_candidates

    tasks = data.tasks["train"]
    rng = random.Random(0)
    candidates = {task["task"]: candidate_variants(data, task, rng) for task in tasks}
    engines = Engines(data, backend, embedder=TextEmbedder())  # an empty embedding memo
    engines.search.search("warm up")
    engines.embedder.encode(["warm up"])
    start = time.perf_counter()
    score_candidates(engines, tasks, candidates)
    return {"seconds": round(time.perf_counter() - start, 1), "candidates": sum(map(len, candidates.values()))}


def function_latencies(data: Any, engines: Any, samples: int) -> dict[str, dict[str, float]]:
    from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS
    from PersonalWAB.envs.pwab.functions.base import ToolContext
    from PersonalWAB.envs.pwab.scoring import score_attempt

    engines = ToolContext(engines, engines.protocol)

    tasks = data.tasks["test"]
    by_type = {kind: [t for t in tasks if t["type"] == kind][:samples] for kind in ("search", "recommend", "review")}
    search = WEB_FUNCTIONS["search_product_by_query"]
    recommend = WEB_FUNCTIONS["get_recommendations_by_history"]
    review = WEB_FUNCTIONS["add_product_review"]
    details = WEB_FUNCTIONS["get_product_details_by_asin"]

    def history(task: dict[str, Any]) -> list[str]:
        return [b["product_info"]["parent_asin"] for b in data.behaviours_before(task["user_id"], task["timestamp"])]

    def review_and_score(task: dict) -> None:
        output = review(engines, {"review": f"I bought the {task['target']['product_info']['title']}."})
        score_attempt(task, "add_product_review", output, False, engines.engines.embedder)

    search(engines, {"query": "warm up"})
    recommend(engines, {"product_sequence": history(by_type["recommend"][0])})
    return {
        "search_product_by_query": time_calls(lambda t: search(engines, {"query": t["task"]}), by_type["search"]),
        "get_recommendations_by_history": time_calls(
            lambda t: recommend(engines, {"product_sequence": history(t)}), by_type["recommend"]),
        "add_product_review+scoring": time_calls(review_and_score, by_type["review"]),
        "get_product_details_by_asin": time_calls(
            lambda a: details(engines, {"product_asin": a}), list(data.products)[:samples]),
    }


def whole_split(data_dir: Path, backend: str, memory: str, concurrency: int, out_dir: Path) -> dict[str, Any]:
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    config = RunConfig(data_dir=str(data_dir), search_backend=backend, agent_memory=memory,
                       max_concurrency=concurrency, out=str(out_dir / f"test_split_{memory}.json"))
    header, _, wall = run(config, log=lambda _: None)
    return {"wall_s": round(wall, 2), "tasks": header["results"]["overall"]["total_count"],
            "tasks_per_s": round(header["results"]["overall"]["total_count"] / wall, 1),
            "results": header["results"]}


def scripted_llm_split(data_dir: Path, backend: str, out_dir: Path, concurrency: int = 8) -> dict[str, Any]:
    """Whole test split with the function-calling agent and relevant memory against a
    scripted OpenAI-compatible server on 127.0.0.1 (zero model latency): the cost of
    everything around the model (litellm, memory retrieval, engines, checkpointing)."""
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run
    from devtools.doubles.responders import tool_caller
    from devtools.doubles.scripted_server import ScriptedLLMServer

    with ScriptedLLMServer(tool_caller) as server:
        config = RunConfig(data_dir=str(data_dir), search_backend=backend, agent_strategy="function_calling",
                           model="openai/scripted", api_base=server.url, agent_memory="relevant",
                           memory_length=50, max_concurrency=concurrency,
                           out=str(out_dir / "test_split_function_calling_relevant.json"))
        header, _, wall = run(config, log=lambda _: None)
    return {"wall_s": round(wall, 2), "tasks": header["results"]["overall"]["total_count"],
            "max_concurrency": concurrency}


@dataclass
class BenchmarkSettings:
    """What `scripts/benchmark.py` measures, and where the figures go."""

    data_dir: str = setting("data/synthetic/full", "data directory to measure (make `full` with `python -m "
                                                   "PersonalWAB.data synthetic --scale full`)")
    out: str = setting("data/benchmark.json", "JSON file for the figures")
    search_backend: str = setting("lucene", "search engine the runs and latencies use", choices=BACKENDS)
    max_concurrency: int = setting(2, "tasks run at once in the whole-split runs; match the machine's cores")
    samples: int = setting(200, "calls per web function for its latency percentiles; fewer is quicker, "
                                "noisier")
    llm_agent: bool = setting(False, "also run the whole split with the function-calling agent (relevant memory, "
                                     "concurrency 8) against a scripted local model server")
    precisions: str = setting("fp32,bf16", "comma-separated precisions whose memory cache is measured")
    memory_build: bool = setting(False, "build the memory caches that are missing and report their build time (the "
                                        "fp32 cache of `full` takes ~15-45 min on 2 cores); 0: project it from the "
                                        "pace on a sample of the cache's texts")
    memory_sample: int = setting(600, "texts of the memory cache timed for the projection")
    headline_only: bool = setting(False, "measure the headline figures only (memory cache, start-up, whole split "
                                         "from a fresh process), not the latencies, in-process runs and PUMA step 4")
    agreement_data_dir: str | None = setting(None, "check the cached relevant memory of every task of this data "
                                                   "directory against a one-text-at-a-time reference encoding (e.g. "
                                                   "data/synthetic/small)")


def main(argv: list[str] | None = None) -> int:
    [args] = parse_command([BenchmarkSettings], argv, {"out": FILE}, prog="scripts/benchmark.py", description=__doc__)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO_ROOT / "scripts"))

    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.shared import shared_engines

    data_dir = Path(args.data_dir).resolve()
    start = time.perf_counter()
    data = load_benchmark_data(data_dir)
    load_s = time.perf_counter() - start
    load_before_builds = load_average()
    build_artifacts(data, (args.search_backend,), recommender=True, review_embeddings=True)
    build_times_file = data.artifacts.cache_dir / "build_times.json"
    build_s = json.loads(build_times_file.read_text()) if build_times_file.exists() else {}

    from PersonalWAB.engines.text_embedding import minilm_flops, token_counts

    flops = minilm_flops(token_counts(memory_cache_texts(data)))
    figures: dict[str, Any] = {
        "data_dir": str(data_dir),
        "data_source": data.source,
        "search_backend": args.search_backend,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "build_s": build_s,
        "load_average_around_builds": [load_before_builds, load_average()],
        "data_load_s": round(load_s, 2),
        "memory_cache_tflop": round(flops / 1e12, 1),
        "memory_cache": {precision: memory_cache(data, precision, args.memory_build, args.memory_sample, flops)
                         for precision in args.precisions.split(",")},
        "startup_s": round(startup_seconds(data_dir, args.search_backend), 2),
        "load_average_after_startup": load_average(),
        "test_split_fresh_process_s": round(fresh_split_seconds(data_dir, args.search_backend,
                                                                args.max_concurrency), 2),
        "load_average_after_fresh_split": load_average(),
    }
    figures["headline"] = headline(figures)
    if args.headline_only:
        return save(figures, Path(args.out))
    engines = shared_engines(data, args.search_backend)
    figures["function_latency_ms"] = function_latencies(data, engines, args.samples)
    with tempfile.TemporaryDirectory() as tmp:
        with_history = whole_split(data_dir, args.search_backend, "last", args.max_concurrency, Path(tmp))
        without_history = whole_split(data_dir, args.search_backend, "none", args.max_concurrency, Path(tmp))
    figures["test_split_tasks"] = with_history["tasks"]
    figures["test_split_wall_s"] = with_history["wall_s"]
    figures["test_split_tasks_per_s"] = with_history["tasks_per_s"]
    figures["max_concurrency"] = args.max_concurrency
    figures["heuristic_memory_last"] = with_history["results"]
    figures["heuristic_memory_none"] = without_history["results"]
    figures["heuristic_memory_none_wall_s"] = without_history["wall_s"]
    figures["load_average_after_test_split"] = load_average()
    figures["puma_scoring"] = puma_scoring_seconds(data, args.search_backend)
    figures["puma_scoring_s"] = figures["puma_scoring"]["seconds"]
    figures["load_average_after_puma_scoring"] = load_average()
    if args.agreement_data_dir:
        from PersonalWAB.engines.text_embedding import TextEmbedder, shared_embedder
        from PersonalWAB.memory.embeddings import build_behaviour_embeddings, reference_agreement
        from PersonalWAB.protocol import load_protocol

        small = load_benchmark_data(args.agreement_data_dir)
        protocol = load_protocol()
        build_behaviour_embeddings(small, protocol, force=True, log=None)  # by the exact path of this machine
        agreement = reference_agreement(small, protocol, small.tasks["train"] + small.tasks["test"], 10,
                                        TextEmbedder(backend="torch"))
        figures["relevant_memory_reference_agreement"] = {
            "cache_backend": shared_embedder(bulk=True).backend, "reference": "torch, one text at a time", **agreement}
    if args.llm_agent:
        with tempfile.TemporaryDirectory() as tmp:
            figures["scripted_llm_function_calling_relevant"] = scripted_llm_split(
                data_dir, args.search_backend, Path(tmp))

    return save(figures, Path(args.out))


def headline(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures a user waits for, each with the load average when it was taken."""
    lines: dict[str, Any] = {
        f"memory_cache_{precision}": {key: cache[key] for key in (
            "ratio_to_fp32_bound", "ratio_to_bf16_bound", "seconds", "how", "fp32_bound_s", "bf16_peak_gflop_s")
            if key in cache} | {"load_average": cache["load_average_before_after"]}
        for precision, cache in figures["memory_cache"].items()}
    lines["startup_s"] = {"seconds": figures["startup_s"], "load_average": figures["load_average_after_startup"]}
    lines["test_split_fresh_process_s"] = {"seconds": figures["test_split_fresh_process_s"],
                                           "load_average": figures["load_average_after_fresh_split"]}
    return lines


def save(figures: dict[str, Any], out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    write_output(out, json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    print("headline (load average: 1, 5, 15 min):")
    for name, line in figures["headline"].items():
        print(f"  {name}: {json.dumps(line)}")
    print(f"saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
