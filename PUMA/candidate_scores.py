"""Scoring parameter candidates in the benchmark: step 4's work, GRPO's reward, the fast test's
scores, and the counts a sharded scoring's parts are joined by.

Each candidate is turned into what the web function returns (result texts, a review) and
scored under the function of the function file (or the gold function when none is given,
as the DPO data needs): each function's candidates run through its batch form (its row in
the table of web functions: searches in one `batch_search`, recommendations in one
`recommend_batch`), and reviews are encoded with MiniLM in one batch. Score = Result Acc
(0 for a wrong function or a failed call): `1 - i/len(results)` for the first result
whose text contains the target ASIN, or the review's MiniLM cosine.

How candidates are read and reviews scored follows two settings of step 4 (`--parsing`,
`--review_score`). The release's (`strict`, `raw_cosine`) score as the release's `test.py
--evaluate_dpo True`:
- every candidate is the parameter, sent as it is, not stripped (no `Say:`/`stop` reading);
- a review scores the raw cosine (`review_similarity`: not clipped, can be negative, and
  it decides the "last minimum" of a DPO pair); an empty candidate is the review "";
- an instruction that several tasks of the split share gets the scores against the LAST
  such task (the release overwrites its per-instruction entry task by task); the output
  keeps the instructions in the order of their first task;
- recommend candidates: split on ",", stripped, each ASIN once (empty items kept, as the
  release sends them; the recommender skips them). The release's
  `list(set(...))` orders them by string hash, which changes with PYTHONHASHSEED; here they
  keep their first-occurrence order (`bug_fixes` in PUMA/configs/release.yaml).
`--parsing lenient` reads candidates as the improved agent does (a `Say:` message or a `stop`
scores 0); `--review_score environment` scores reviews as the environment does (an empty review
is the protocol's placeholder text, the cosine is clipped to [0, 1]). GRPO's reward reads every
candidate as the parameter, stripped, and scores it as the environment does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from PersonalWAB.schema_types import Task
from PUMA.prompting import Parsing

ReviewScore = Literal["raw_cosine", "environment"]


def score_jobs(engines: Any, jobs: list[tuple[Task, str, str]], parsing: Parsing | None = None,
               review_score: ReviewScore = "environment") -> list[float]:
    """The score of each (task, function, candidate), searches, recommendations and reviews
    each in one batch. `parsing`: strict = every candidate is the parameter, as written;
    lenient = read as the improved agent reads it; None = every candidate the parameter,
    stripped (GRPO's reward). `review_score`: module docstring."""
    from PUMA.prompting import OutputRules, parse_parameters
    from PersonalWAB.build import review_cache_file
    from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE, REVIEW
    from PersonalWAB.envs.pwab.functions import ToolContext, call_many
    from PersonalWAB.envs.pwab.scoring import review_similarity, score_attempt

    raw_review = review_score == "raw_cosine"
    protocol = engines.protocol
    rules = OutputRules.of(protocol, "lenient") if parsing == "lenient" else None
    actions = [parse_parameters(function, candidate, rules, parsing or "lenient") for _, function, candidate in jobs]
    values = call_many(ToolContext(engines, protocol), actions)  # each function's batch form (its table row)
    reviews = [i for i, action in enumerate(actions) if action.name == REVIEW]
    # raw_cosine: "" is the review ""; otherwise as the environment posts it (its placeholder text)
    texts = [actions[i].arguments["review"] if raw_review else actions[i].arguments["review"] or
             protocol.text("review.empty") for i in reviews]
    # the real reviews come from (and go to) the data dir's review-embedding cache, which runs share
    engines.embedder.remember([jobs[i][0]["target"]["review"]["text"] for i in reviews],
                              cache_file=review_cache_file(engines.data))
    engines.embedder.remember(texts)
    for i, text in zip(reviews, texts):
        values[i] = {"review": text}
    scores = []
    for (task, _, _), action, value in zip(jobs, actions, values):
        if value is None:
            scores.append(0.0)
        elif raw_review and action.name == REVIEW:
            right = FUNCTION_FOR_TASK_TYPE[task["type"]] == REVIEW
            scores.append(review_similarity(engines.embedder, value["review"], task["target"]["review"]["text"])
                          if right else 0.0)
        else:
            attempt = score_attempt(task, action.name, value, False, engines.embedder)
            scores.append(attempt.result_acc if attempt.function_acc else 0.0)
    return scores


def tasks_by_instruction(tasks: list[Task]) -> dict[str, Task]:
    """instruction -> the LAST task with it, in the order of each instruction's first task
    (what the release's `all_res[instruction] = cur_res` leaves after its loop over tasks)."""
    by_instruction: dict[str, Task] = {}
    for task in tasks:
        by_instruction[task["task"]] = task
    return by_instruction


def score_candidates(engines: Any, tasks: list[Task], candidates: dict[str, list[str]],
                     functions: dict[str, str] | None = None, parsing: Parsing | None = None,
                     review_score: ReviewScore = "environment") -> dict[str, dict[str, float]]:
    """instruction -> {candidate: score} for the instructions of `tasks` in `candidates`, in
    task order; a repeated instruction is scored against its last task (`score_jobs` reads and
    scores them)."""
    from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE

    jobs = []  # (task, function, candidate)
    for instruction, task in tasks_by_instruction(tasks).items():
        if instruction not in candidates:
            continue
        function = (functions or {}).get(instruction, FUNCTION_FOR_TASK_TYPE[task["type"]])
        jobs += [(task, function, candidate) for candidate in dict.fromkeys(candidates[instruction])]
    scores: dict[str, dict[str, float]] = {}
    for (task, _, candidate), score in zip(jobs, score_jobs(engines, jobs, parsing, review_score)):
        scores.setdefault(task["task"], {})[candidate] = score
    return scores


def scoring_facts(parsing: Parsing, review_score: ReviewScore, tasks: list[Task] | None = None) -> dict[str, Any]:
    """How candidates were read and scored, for the step's record."""
    raw = review_score == "raw_cosine"
    facts: dict[str, Any] = {
        "candidates_read": "every candidate is the parameter, sent as it is" if parsing == "strict"
        else "as the improved agent reads them (a `Say:` message or a `stop` scores 0)",
        "review_score": "raw MiniLM cosine (not clipped; can be negative)" if raw
        else "MiniLM cosine clipped to [0, 1], as the environment",
        "empty_review": 'scored as ""' if raw
        else "scored as the protocol's `review.empty` placeholder",
        "recommend_order": "ASINs each once in first-occurrence order (the release: list(set(...)), hash order)",
        "repeated_instructions": "scored against the last task with the instruction (as the release)",
    }
    if tasks is not None:
        counts: dict[str, int] = {}
        for task in tasks:
            counts[task["task"]] = counts.get(task["task"], 0) + 1
        facts["repeated_instruction_count"] = sum(1 for n in counts.values() if n > 1)
    return facts


def load_engines(data_dir: str | None, search_backend: str, protocol_file: str | None, task_split: str,
                 log: Callable[[str], None] = print,
                 check: Callable[[Any], None] | None = None) -> tuple[Any, Any, list[Task]]:
    """The benchmark data, its engines (search index and recommender built if missing) and the
    tasks of `task_split`, which is checked to hold tasks before anything is built, as `check`
    checks the data (the step's inputs against it)."""
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.shared import shared_engines
    from PersonalWAB.paths import default_data_dir
    from PersonalWAB.protocol import load_protocol
    from PUMA.cli import nonempty_split

    protocol = load_protocol(protocol_file)
    data = load_benchmark_data(data_dir or default_data_dir())
    tasks = nonempty_split(data, task_split, "--task_split")
    if check is not None:
        check(data)
    build_artifacts(data, (search_backend,), recommender=True, log=log, protocol=protocol)
    return data, shared_engines(data, search_backend, protocol), tasks


def score_summary(scores: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The record's counts of a scores file: candidates, instructions and their mean Result Acc."""
    total = sum(len(v) for v in scores.values())
    mean = sum(s for v in scores.values() for s in v.values()) / max(total, 1)
    return {"candidates": total, "instructions": len(scores), "mean_result_acc": mean}
