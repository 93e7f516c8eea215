"""Step 4: score every parameter candidate with the environment's scoring
(`PUMA/candidate_scores.py`: how `--parsing` reads a candidate and `--review_score` scores a review).

Output: JSON object instruction -> {candidate: score}, and its record (`*.puma_run.json`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.engines.search import BACKENDS as SEARCH_BACKENDS
from PersonalWAB.settings import setting
from PersonalWAB.shards import SHARD_HELP, shard_setting
from PUMA.candidate_scores import (ReviewScore, load_engines, score_candidates, score_summary, scoring_facts,
                                   tasks_by_instruction)
from PUMA.prompting import Parsing
from PUMA.recipe import RECIPE_HELP


@dataclass
class ScoreConfig:
    """Step 4's settings."""

    candidates_file: str = setting("PUMA/output/param_candidates_train.json", "step 3's parameter candidates "
                                   "(instruction -> list)")
    output_file: str = setting("PUMA/output/param_candidates_train_scores.json", "JSON file instruction -> "
                               "{candidate: score} (its record beside it)", flag="out", aliases=("output_file",),
                               metavar="FILE")
    data_dir: str | None = setting(None, "the benchmark data whose tasks, search index and recommender score the "
                                   "candidates", default_text="the official data when placed, else the bundled "
                                   "synthetic data")
    task_split: str = setting("train", "the split whose tasks the candidates' instructions belong to")
    function_file: str | None = setting(None, "function predictions to score each candidate under (a wrong "
                                        "function scores 0); without it the gold function, as the DPO data needs")
    search_backend: str = setting("lucene", "search engine of the search function (bm25s needs no Java)",
                                  choices=SEARCH_BACKENDS)
    recipe: str = setting("release", RECIPE_HELP, metavar="NAME|FILE")
    parsing: Parsing = setting("strict", "strict: every candidate is the parameter, sent as written (the release's "
                               "test.py --evaluate_dpo); lenient: read as the improved agent reads it (a `Say:` "
                               "message or a stop scores 0)")
    review_score: ReviewScore = setting("raw_cosine", "raw_cosine: a review's raw MiniLM cosine, an empty one scored "
                                        "as \"\" (the release's); environment: as the environment scores a posted "
                                        "review (clipped to [0, 1], an empty one as the placeholder text)")
    protocol_file: str | None = setting(None, "protocol pack whose texts render the function results",
                                        default_text="the release pack when placed, else the project's")
    shard: str | None = setting(None, f"{SHARD_HELP} with puma merge_shards (the instructions in task order)",
                                metavar="I/N", kind=shard_setting)


def score_file(config: ScoreConfig, log: Callable[[str], None] = print) -> Path:
    from PersonalWAB.errors import DataError
    from PersonalWAB.memory import load_function_file
    from PersonalWAB.shards import shard_part, shard_plan
    from PUMA.modeling import read_json, write_json
    from PUMA.recipe import check_inputs, get_recipe, write_record
    from PUMA.step_inputs import check_split_file, refuse_part

    recipe = get_recipe(config.recipe)
    inputs = {"--candidates_file": config.candidates_file, "--function_file": config.function_file}
    check_inputs(recipe, inputs)
    refuse_part("--candidates_file", config.candidates_file)
    raw = read_json(config.candidates_file)
    if not isinstance(raw, dict):
        raise DataError(f"{config.candidates_file}: expected a JSON object mapping instruction text to candidates")
    candidates = {k: v if isinstance(v, list) else [v] for k, v in raw.items()}
    functions = load_function_file(config.function_file) if config.function_file else None

    def inputs_belong(data: Any) -> None:
        check_split_file("--candidates_file", config.candidates_file, candidates, data, config.task_split,
                         "--task_split")
        if config.function_file and functions is not None:
            check_split_file("--function_file", config.function_file, functions, data, config.task_split,
                             "--task_split")

    data, engines, tasks = load_engines(config.data_dir, config.search_backend, config.protocol_file,
                                        config.task_split, log, check=inputs_belong)
    unscored = sum(1 for instruction in tasks_by_instruction(tasks) if instruction not in candidates)
    part, places = shard_part([i for i in tasks_by_instruction(tasks) if i in candidates], config.shard)
    scores = score_candidates(engines, tasks, {i: c for i, c in candidates.items() if i in part}, functions,
                              config.parsing, config.review_score)
    path = write_json(config.output_file, scores)
    summary = score_summary(scores)
    write_record(path, "score", recipe, config, inputs, **summary, instructions_without_candidates=unscored,
                 data_fingerprint=data.fingerprint, **scoring_facts(config.parsing, config.review_score, tasks),
                 **({"shard_plan": shard_plan(places, list(scores))} if config.shard else {}))
    shard = f", shard {config.shard}" if config.shard else ""
    log(f"{path}: {summary['candidates']} candidates of {summary['instructions']} instructions scored (mean Result "
        f"Acc {summary['mean_result_acc']:.4f}){shard}")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    score_file(parse_step(ScoreConfig, argv, "python -m PUMA.score", __doc__, "score"))
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
