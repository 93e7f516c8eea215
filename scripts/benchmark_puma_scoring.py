"""Time PUMA step 4 (scoring parameter candidates in the benchmark) at full scale.

    python scripts/benchmark_puma_scoring.py --data_dir data/synthetic/full --out data/benchmark_puma_scoring.json

Builds 10 distinct candidates for every train instruction without a model (query,
sequence and review variants derived from the user's history, as sampled outputs
would vary), scores them all with `PUMA.candidate_scores.score_candidates` (batched search,
batched recommendation, one batched MiniLM encode), and compares with scoring a
sample one call at a time through the web functions, extrapolated to all candidates.
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.cli import run_command
from PersonalWAB.settings import parse, setting

REPO_ROOT = Path(__file__).resolve().parent.parent

CANDIDATES_PER_INSTRUCTION = 10


def candidate_variants(data: Any, task: dict[str, Any], rng: random.Random) -> list[str]:
    """Ten distinct parameter strings for one task, in the shape the model would write them."""
    from PersonalWAB.agents.heuristic import recommendation_sequence, search_query, write_review
    from PersonalWAB.memory import retrieve_memory

    memory = retrieve_memory(data, task, "last", 50)
    variants: list[str] = []
    if task["type"] == "search":
        words = task["task"].split()
        base = [task["task"], search_query(task["task"], memory)]
        base += [" ".join(rng.sample(words, max(1, len(words) // 2))) for _ in range(6)]
        base += [b["product_info"]["title"] for b in memory[:4]]
        variants = base
    elif task["type"] == "recommend":
        sequence = recommendation_sequence(memory)
        for cut in (30, 20, 10, 5, 3, 1):
            variants.append(", ".join(sequence[-cut:]))
        for _ in range(6):
            variants.append(", ".join(rng.sample(sequence, min(len(sequence), 10))))
    else:
        product = task["target"]["product_info"]
        variants = [write_review(product, memory), write_review(product, [])]
        variants += [b["review"]["text"] for b in memory[:6]]
        variants += [f"{product['title']} is {word}." for word in ("great", "fine", "disappointing", "ok")]
    return list(dict.fromkeys(v for v in variants if v.strip()))[:CANDIDATES_PER_INSTRUCTION]


def one_by_one_seconds(engines: Any, tasks: list[dict[str, Any]], candidates: dict[str, list[str]],
                       sample: int) -> tuple[float, int]:
    """Seconds to score `sample` candidates one web-function call at a time."""
    from PUMA.prompting import parse_parameters
    from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
    from PersonalWAB.envs.pwab.functions import WEB_FUNCTIONS
    from PersonalWAB.envs.pwab.functions.base import ToolContext
    from PersonalWAB.envs.pwab.scoring import score_attempt

    context = ToolContext(engines, engines.protocol)
    jobs = [(task, c) for task in tasks for c in candidates.get(task["task"], [])]
    jobs = random.Random(0).sample(jobs, min(sample, len(jobs)))
    start = time.perf_counter()
    for task, candidate in jobs:
        name = FUNCTION_FOR_TASK_TYPE[task["type"]]
        action = parse_parameters(name, candidate)
        try:  # as the environment does: a failing call is scored (0, 0)
            output, failed = WEB_FUNCTIONS[name](context, action.arguments), False
        except Exception:
            output, failed = None, True
        score_attempt(task, name, output, failed, engines.embedder)
    return time.perf_counter() - start, len(jobs)


@dataclass
class PumaScoringBenchmarkSettings:
    """The data scored and the size of the one-by-one baseline."""

    data_dir: str = setting("data/synthetic/full", "data directory whose train instructions get candidates")
    out: str = setting("data/benchmark_puma_scoring.json", "JSON file for the figures")
    sample: int = setting(1500, "candidates scored one by one for the baseline (extrapolated to all); more is "
                                "steadier, slower")


def main(argv: list[str] | None = None) -> int:
    args = parse(PumaScoringBenchmarkSettings, argv, prog="scripts/benchmark_puma_scoring.py", description=__doc__)

    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.shared import Engines
    from PersonalWAB.engines.text_embedding import TextEmbedder
    from PUMA.candidate_scores import score_candidates

    data = load_benchmark_data(args.data_dir)
    build_artifacts(data, ("lucene",), recommender=True)
    tasks = data.tasks["train"]
    rng = random.Random(0)
    candidates = {task["task"]: candidate_variants(data, task, rng) for task in tasks}
    total = sum(len(v) for v in candidates.values())

    def warm_engines() -> Engines:
        """Engines with their own (empty) embedding memo, so neither pass reuses the other's work."""
        engines = Engines(data, "lucene", embedder=TextEmbedder())
        engines.search.search("warm up")
        engines.recommender.recommend([])
        engines.embedder.encode(["warm up"])
        return engines

    engines = warm_engines()
    start = time.perf_counter()
    scores = score_candidates(engines, tasks, candidates)
    batched_s = time.perf_counter() - start
    sample_s, sampled = one_by_one_seconds(warm_engines(), tasks, candidates, args.sample)
    one_by_one_s = sample_s / sampled * total
    figures = {
        "data_source": data.source,
        "instructions": len(candidates),
        "candidates": total,
        "scored": sum(len(v) for v in scores.values()),
        "batched_s": round(batched_s, 1),
        "one_by_one_sample": sampled,
        "one_by_one_extrapolated_s": round(one_by_one_s, 1),
        "speedup": round(one_by_one_s / batched_s, 2),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
