"""How closely the bm25s backend reproduces Lucene's top-k, and how fast each answers.

Every instruction of a split is used as a query (agents often search with text close to the
instruction). For each query both engines return their top k; the script reports

* mean overlap@k: shared ASINs / the longer list's length (1.0 when both lists are empty),
* identical top-1: the fraction of queries whose first result is the same,
* rank correlation: Kendall's tau of the shared ASINs' ranks, over queries sharing >= 2,
* hit@k on search tasks: how often the task's target is in each backend's top k,
* latency p50/p95 of single-query calls (as the environment makes them), after a warm-up
  query that also covers JVM start and index opening (reported separately).

    python scripts/tools/compare_search_backends.py --data_dir data/synthetic/full --split test \
        [--k 10] [--limit N] [--out OUT.json]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PersonalWAB.data.loader import load_benchmark_data  # noqa: E402
from PersonalWAB.engines.search import SearchEngine, open_search_engine, search_index_dir  # noqa: E402
from PersonalWAB.protocol import load_protocol  # noqa: E402
from PersonalWAB.paths import default_data_dir  # noqa: E402
from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.errors import DataError  # noqa: E402
from PersonalWAB.settings import parse, setting  # noqa: E402


@dataclass
class CompareSettings:
    """The queries, the indexes compared and where the report goes."""

    data_dir: str | None = setting(None, "data directory whose instructions are the queries",
                                   default_text="the official data when present, else synthetic")
    split: str = setting("test", "task split whose instructions are the queries")
    k: int = setting(10, "results compared per query")
    limit: int | None = setting(None, "use only the first N instructions (a quicker look)")
    lucene_index: str | None = setting(None, "Lucene index folder", default_text="the data's index for the protocol")
    bm25s_index: str | None = setting(None, "bm25s index folder", default_text="the data's index for the protocol")
    out: str | None = setting(None, "also write the report here (JSON)", aliases=("json",))
    protocol_file: str | None = setting(None, "the protocol pack the indexes were built with",
                                        default_text="the default pack")


def overlap(a: list[str], b: list[str]) -> float:
    """Shared results relative to the longer list, so short result lists are not flattered."""
    longest = max(len(a), len(b))
    return 1.0 if longest == 0 else len(set(a) & set(b)) / longest


def kendall_tau(a: list[str], b: list[str]) -> float | None:
    """Kendall's tau between the two orders of the items both lists contain (None below two)."""
    shared = [item for item in a if item in set(b)]
    if len(shared) < 2:
        return None
    rank_b = {item: rank for rank, item in enumerate(b)}
    pairs = concordant = 0
    for i in range(len(shared)):
        for j in range(i + 1, len(shared)):
            pairs += 1
            concordant += rank_b[shared[i]] < rank_b[shared[j]]
    return (2 * concordant - pairs) / pairs


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def timed_searches(engine: SearchEngine, queries: list[str], k: int) -> tuple[list[list[str]], dict[str, float]]:
    """Results of one call per query, with the warm-up (first) call timed on its own."""
    started = time.perf_counter()
    engine.search(queries[0], k)
    warm_up = time.perf_counter() - started
    results, latencies = [], []
    for query in queries:
        started = time.perf_counter()
        results.append(engine.search(query, k))
        latencies.append(time.perf_counter() - started)
    return results, {
        "first_call_s": round(warm_up, 3),
        "p50_ms": round(1000 * percentile(latencies, 0.50), 3),
        "p95_ms": round(1000 * percentile(latencies, 0.95), 3),
        "mean_ms": round(1000 * statistics.fmean(latencies), 3),
    }


def compare(lucene: list[list[str]], bm25s: list[list[str]]) -> dict[str, Any]:
    taus = [tau for a, b in zip(lucene, bm25s) if (tau := kendall_tau(a, b)) is not None]
    with_results = [(a, b) for a, b in zip(lucene, bm25s) if a or b]
    return {
        "mean_overlap": round(statistics.fmean(overlap(a, b) for a, b in zip(lucene, bm25s)), 4),
        "identical_top1": round(sum(bool(a and b and a[0] == b[0]) for a, b in with_results)
                                / max(1, len(with_results)), 4),
        "mean_kendall_tau": round(statistics.fmean(taus), 4) if taus else None,
        "queries_with_tau": len(taus),
        "identical_lists": round(sum(a == b for a, b in zip(lucene, bm25s)) / len(lucene), 4),
    }


def hit_rate(results: list[list[str]], tasks: list[dict[str, Any]]) -> float | None:
    hits = [task["target"]["product_info"]["parent_asin"] in found
            for found, task in zip(results, tasks) if task["type"] == "search"]
    return round(sum(hits) / len(hits), 4) if hits else None


def main(argv: list[str] | None = None) -> int:
    args = parse(CompareSettings, argv, prog="scripts/tools/compare_search_backends.py", description=__doc__)
    protocol = load_protocol(args.protocol_file)

    data = load_benchmark_data(args.data_dir or default_data_dir())
    tasks = data.split(args.split)[: args.limit]
    queries = [task["task"] for task in tasks]
    if not queries:
        raise DataError(f"--split {args.split!r}: no instructions in {data.data_dir}")

    results, latency = {}, {}
    for backend, index_dir in (("lucene", Path(args.lucene_index or search_index_dir(data, "lucene", protocol))),
                               ("bm25s", Path(args.bm25s_index or search_index_dir(data, "bm25s", protocol)))):
        started = time.perf_counter()
        engine = open_search_engine(backend, index_dir, lambda asin: protocol.product_block(data.products[asin]))
        opened = time.perf_counter() - started
        results[backend], latency[backend] = timed_searches(engine, queries, args.k)
        latency[backend]["open_s"] = round(opened, 3)
        latency[backend]["search_hit_rate"] = hit_rate(results[backend], tasks)

    report = {
        "data_dir": str(data.data_dir),
        "data_source": data.source,
        "split": args.split,
        "queries": len(queries),
        "products": len(data.products),
        "k": args.k,
        "agreement": compare(results["lucene"], results["bm25s"]),
        "backends": latency,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
