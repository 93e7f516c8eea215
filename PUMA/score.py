"""Step 4: score every parameter candidate with the environment's scoring.

Each candidate is parsed like the PUMA agent parses a generated parameter, turned into
what the web function returns (result texts, a review) and scored with `score_attempt`
under the function of the function file (or the gold function when none is given, as
the DPO data needs): searches run in one batch through the engine's `batch_search`,
recommendations through `recommend_batch`, and reviews are encoded with MiniLM in one
batch. Score = Result Acc (0 for a wrong function or a failed call). `--recipe release`
sends every candidate as the parameter, as the release's `test.py` does; `--recipe
improved` reads candidates as the improved agent does, so a `Say:` message or a `stop`
scores 0.

Output: JSON object instruction -> {candidate: score}, and its record (`*.puma_run.json`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


@dataclass
class ScoreConfig:
    candidates_file: str = "PUMA/output/param_candidates_train.json"
    output_file: str = "PUMA/output/param_candidates_train_scores.json"
    data_dir: str | None = None
    task_split: str = "train"
    function_file: str | None = None
    search_backend: str = "lucene"
    recipe: str = "release"
    protocol_file: str | None = None  # release protocol pack (default: the default pack when placed)


def _search_values(engines: Any, protocol: Any, queries: list[str]) -> list[Any]:
    """What search_product_by_query returns for each query (None where it fails), searched in one batch."""
    from PersonalWAB.envs.pwab.functions.search_product_by_query import TOP_K
    from PersonalWAB.errors import ToolArgumentError

    search = engines.search
    try:
        hits: list[Any] = search.batch_search(queries, k=TOP_K) if queries else []
    except ToolArgumentError:  # one query too long for Lucene: search one by one
        hits = []
        for query in queries:
            try:
                hits.append(search.search(query, k=TOP_K))
            except ToolArgumentError:
                hits.append(None)
    return [None if found is None else
            [protocol.search_result(rank, text) for rank, text in enumerate(search.contents(found))]
            for found in hits]


def _recommend_values(engines: Any, protocol: Any, sequences: list[Any]) -> list[Any]:
    """What get_recommendations_by_history returns for each sequence (None where it fails)."""
    from PersonalWAB.envs.pwab.functions.get_recommendations_by_history import TOP_K

    values: list[Any] = []
    for asins in engines.recommender.recommend_batch(sequences, k=TOP_K):
        products = [engines.data.products.get(asin) for asin in asins]
        values.append(None if None in products else
                      [protocol.recommendation_block(product, rank) for rank, product in enumerate(products)])
    return values


def score_candidates(engines: Any, tasks: list[dict[str, Any]], candidates: dict[str, list[str]],
                     functions: dict[str, str] | None = None, recipe: str = "release") -> dict[str, dict[str, float]]:
    """instruction -> {candidate: Result Acc} for the instructions of `tasks` in `candidates`."""
    from PersonalWAB.agents.puma import OutputRules, parse_parameters
    from PersonalWAB.build import review_cache_file
    from PUMA.recipe import get_recipe
    from PersonalWAB.envs.pwab.functions import FUNCTION_FOR_TASK_TYPE
    from PersonalWAB.envs.pwab.scoring import score_attempt
    from PersonalWAB.memory import RECOMMEND, REVIEW, SEARCH

    protocol = engines.protocol
    by_instruction: dict[str, dict[str, Any]] = {}
    for task in tasks:
        by_instruction.setdefault(task["task"], task)
    jobs = []  # (instruction, candidate, task, function, action)
    rules = None if get_recipe(recipe).strict_release_parsing else OutputRules.of(protocol, release=False)
    for instruction, outputs in candidates.items():
        task = by_instruction.get(instruction)
        if task is None:
            continue
        function = (functions or {}).get(instruction, FUNCTION_FOR_TASK_TYPE[task["type"]])
        for candidate in dict.fromkeys(outputs):
            jobs.append((instruction, candidate, task, function, parse_parameters(function, candidate, rules)))
    values: list[Any] = [None] * len(jobs)
    searches = [i for i, job in enumerate(jobs) if job[4].name == SEARCH]
    for i, value in zip(searches, _search_values(engines, protocol, [jobs[i][4].arguments["query"] for i in searches])):
        values[i] = value
    recommends = [i for i, job in enumerate(jobs) if job[4].name == RECOMMEND]
    for i, value in zip(recommends, _recommend_values(
            engines, protocol, [jobs[i][4].arguments["product_sequence"] for i in recommends])):
        values[i] = value
    reviews = [i for i, job in enumerate(jobs) if job[4].name == REVIEW]
    texts = [jobs[i][4].arguments["review"] or protocol.text("review.empty") for i in reviews]
    # the real reviews come from (and go to) the data dir's review-embedding cache, which runs share
    engines.embedder.remember([jobs[i][2]["target"]["review"]["text"] for i in reviews],
                              cache_file=review_cache_file(engines.data))
    engines.embedder.remember(texts)
    for i, text in zip(reviews, texts):
        values[i] = {"review": text}
    scores: dict[str, dict[str, float]] = {}
    for (instruction, candidate, task, _, action), value in zip(jobs, values):
        attempt = score_attempt(task, action.name, value, False, engines.embedder) if value is not None else None
        scores.setdefault(instruction, {})[candidate] = attempt.result_acc if attempt and attempt.function_acc else 0.0
    return scores


def score_file(config: ScoreConfig, log: Callable[[str], None] = print) -> Path:
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.envs.pwab.engines import shared_engines
    from PersonalWAB.memory import load_function_file
    from PersonalWAB.paths import default_data_dir
    from PersonalWAB.protocol import load_protocol
    from PUMA.modeling import read_json, write_json
    from PUMA.recipe import check_inputs, get_recipe, write_record

    recipe = get_recipe(config.recipe)
    inputs = {"--candidates_file": config.candidates_file, "--function_file": config.function_file}
    check_inputs(recipe, inputs)
    protocol = load_protocol(config.protocol_file)
    data = load_benchmark_data(config.data_dir or default_data_dir())
    build_artifacts(data, (config.search_backend,), recommender=True, log=log, protocol=protocol)
    engines = shared_engines(data, config.search_backend, protocol)
    raw = read_json(config.candidates_file)
    candidates = {k: v if isinstance(v, list) else [v] for k, v in raw.items()}
    functions = load_function_file(config.function_file) if config.function_file else None
    scores = score_candidates(engines, data.split(config.task_split), candidates, functions, recipe.name)
    path = write_json(config.output_file, scores)
    total = sum(len(v) for v in scores.values())
    mean = sum(s for v in scores.values() for s in v.values()) / max(total, 1)
    write_record(path, "score", recipe, config, inputs, candidates=total, instructions=len(scores),
                 mean_result_acc=mean)
    log(f"{path}: {total} candidates of {len(scores)} instructions scored (mean Result Acc {mean:.4f})")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    score_file(parse_config(ScoreConfig, argv, "python -m PUMA.score", __doc__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
