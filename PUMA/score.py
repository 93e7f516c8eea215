"""Step 4: score every parameter candidate with the environment's scoring.

Each candidate is parsed like the PUMA agent parses a generated parameter and scored
with `score_attempt` under the function of the function file (or the gold function
when none is given, as the DPO data needs): searches run in one batch through the
engine's `batch_search`, recommendations through `recommend_batch`, and reviews are
encoded with MiniLM in one batch. Score = Result Acc (0 for a wrong function, a
failed call, `Say:` or `stop`).

Output: JSON object instruction -> {candidate: score}.
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


def _search_outputs(engines: Any, queries: list[str]) -> list[Any]:
    from PersonalWAB.envs.pwab.functions import FunctionOutput
    from PersonalWAB.envs.pwab.functions.search_product_by_query import TOP_K
    from PersonalWAB.errors import ToolArgumentError

    valid = [i for i, q in enumerate(queries) if q.strip()]
    outputs: list[Any] = [None] * len(queries)
    try:
        results = engines.search.batch_search([queries[i] for i in valid], k=TOP_K) if valid else []
    except ToolArgumentError:  # one query too long for Lucene: search one by one
        results = []
        for i in valid:
            try:
                results.append(engines.search.search(queries[i], k=TOP_K))
            except ToolArgumentError:
                results.append(None)
    for i, asins in zip(valid, results):
        if asins is not None:
            outputs[i] = FunctionOutput(text="", asins=[a for a in asins if a in engines.data.products])
    return outputs


def score_candidates(engines: Any, tasks: list[dict[str, Any]], candidates: dict[str, list[str]],
                     functions: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    """instruction -> {candidate: Result Acc} for the instructions of `tasks` in `candidates`."""
    from PersonalWAB.agents.puma import parse_parameters
    from PersonalWAB.envs.pwab.functions import FUNCTION_FOR_TASK_TYPE, FunctionOutput
    from PersonalWAB.envs.pwab.functions.add_product_review import NO_REVIEW
    from PersonalWAB.envs.pwab.functions.get_recommendations_by_history import TOP_K
    from PersonalWAB.envs.pwab.scoring import score_attempt
    from PersonalWAB.memory import RECOMMEND, REVIEW, SEARCH

    by_instruction: dict[str, dict[str, Any]] = {}
    for task in tasks:
        by_instruction.setdefault(task["task"], task)
    jobs = []  # (instruction, candidate, task, function, action)
    for instruction, outputs in candidates.items():
        task = by_instruction.get(instruction)
        if task is None:
            continue
        function = (functions or {}).get(instruction, FUNCTION_FOR_TASK_TYPE[task["type"]])
        for candidate in dict.fromkeys(outputs):
            jobs.append((instruction, candidate, task, function, parse_parameters(function, candidate)))
    outputs: list[Any] = [None] * len(jobs)
    searches = [i for i, job in enumerate(jobs) if job[4].name == SEARCH]
    for i, output in zip(searches, _search_outputs(engines, [jobs[i][4].arguments["query"] for i in searches])):
        outputs[i] = output
    recommends = [i for i, job in enumerate(jobs) if job[4].name == RECOMMEND]
    if recommends:
        ranked = engines.recommender.recommend_batch([jobs[i][4].arguments["product_sequence"] for i in recommends],
                                                     k=TOP_K)
        for i, asins in zip(recommends, ranked):
            outputs[i] = FunctionOutput(text="", asins=[a for a in asins if a in engines.data.products])
    reviews = [i for i, job in enumerate(jobs) if job[4].name == REVIEW]
    texts = [jobs[i][4].arguments["review"].strip() or NO_REVIEW for i in reviews]
    engines.embedder.remember(texts + [jobs[i][2]["target"]["review"]["text"] for i in reviews])
    for i, text in zip(reviews, texts):
        outputs[i] = FunctionOutput(text="", review=text)
    scores: dict[str, dict[str, float]] = {}
    for (instruction, candidate, task, _, action), output in zip(jobs, outputs):
        attempt = score_attempt(task, action.name, output, engines.embedder) if output is not None else None
        scores.setdefault(instruction, {})[candidate] = attempt.result_acc if attempt else 0.0
    return scores


def score_file(config: ScoreConfig, log: Callable[[str], None] = print) -> Path:
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.envs.pwab.engines import shared_engines
    from PersonalWAB.memory import load_function_file
    from PersonalWAB.paths import default_data_dir
    from PUMA.modeling import read_json, write_json

    data = load_benchmark_data(config.data_dir or default_data_dir())
    build_artifacts(data, (config.search_backend,), recommender=True, log=log)
    engines = shared_engines(data, config.search_backend)
    raw = read_json(config.candidates_file)
    candidates = {k: v if isinstance(v, list) else [v] for k, v in raw.items()}
    functions = load_function_file(config.function_file) if config.function_file else None
    scores = score_candidates(engines, data.split(config.task_split), candidates, functions)
    path = write_json(config.output_file, scores)
    total = sum(len(v) for v in scores.values())
    mean = sum(s for v in scores.values() for s in v.values()) / max(total, 1)
    log(f"{path}: {total} candidates of {len(scores)} instructions scored (mean Result Acc {mean:.4f})")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_config

    score_file(parse_config(ScoreConfig, argv, "python -m PUMA.score", __doc__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
