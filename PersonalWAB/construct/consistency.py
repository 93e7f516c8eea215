"""Profile-consistency evaluation (the paper's §4.2) for any data directory.

Two checks with an LLM judge, both asking whether a profile points to its own user:

- **profile -> behaviour matching**: the judge sees a user's profile and the purchase
  histories (a sample of behaviours each) of K users, the user's own among them at a
  random position, and picks the one the profile describes. Accuracy; chance is 1/K.
- **profile -> product ranking**: the judge ranks P products the user bought (from the
  train/test targets, which profiles written by the pipeline never saw) among N products
  of the catalogue the user never bought. Recall@P, MRR and NDCG over the whole list,
  next to their expected values under a random ranking.

Every judge call goes through the construction tools' request cache
(`<data dir>/cache/llm` by default), so re-running the evaluation is free.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.construct import prompts
from PersonalWAB.construct.llm_cache import CachedLLM, Estimate, LLMSettings, request
from PersonalWAB.data.loader import BenchmarkData, load_benchmark_data
from PersonalWAB.data.schema import BEHAVIOUR_SPLITS
from PersonalWAB.errors import DataError
from PersonalWAB.schema_types import Behaviour, Product

Log = Callable[[str], None]
JUDGE_MAX_TOKENS = 64
RANK_MAX_TOKENS = 200


@dataclass(frozen=True)
class ConsistencyConfig:
    """What is evaluated and by which judge (`judge`: the model, its temperature, concurrency)."""

    data_dir: Path
    judge: LLMSettings = LLMSettings("gpt-4o-mini")
    users: int = 200
    options: int = 4
    behaviours: int = 10
    match_splits: tuple[str, ...] = BEHAVIOUR_SPLITS
    positives: int = 1
    negatives: int = 9
    seed: int = 0
    cache_dir: Path | None = None

    def check(self, data: BenchmarkData) -> None:
        problems = []
        if self.users < 0:
            problems.append(f"--users must not be negative (0 = every user), got {self.users}")
        if not 2 <= self.options <= 26:
            problems.append(f"--options must be between 2 and 26, got {self.options}")
        if len(data.profiles) < self.options:
            problems.append(f"--options {self.options}: the data has only {len(data.profiles)} users")
        if self.behaviours < 1 or self.positives < 1 or self.negatives < 1:
            problems.append("--behaviours, --positives and --negatives must be at least 1")
        if not self.match_splits or any(s not in BEHAVIOUR_SPLITS for s in self.match_splits):
            problems.append(f"--match_splits: expected some of {', '.join(BEHAVIOUR_SPLITS)}")
        if problems:
            raise DataError("; ".join(problems))


@dataclass(frozen=True)
class _RankCase:
    user_id: str
    products: list[Product]
    positive: set[int]


def _evaluated_users(config: ConsistencyConfig, data: BenchmarkData) -> list[str]:
    users = sorted(u for u in data.profiles if data.histories.get(u))
    if config.users and config.users < len(users):
        users = sorted(random.Random(f"{config.seed}:users").sample(users, config.users))
    return users


def _sample(rng: random.Random, behaviours: list[Behaviour], k: int) -> list[Behaviour]:
    """k behaviours (all when fewer), kept in time order."""
    chosen = sorted(rng.sample(range(len(behaviours)), min(k, len(behaviours))))
    return [behaviours[i] for i in chosen]


def match_cases(config: ConsistencyConfig, data: BenchmarkData, users: list[str]) -> list[tuple[str, list[Any], int]]:
    """(user, K behaviour samples, position of the user's own) per evaluated user."""
    rng = random.Random(f"{config.seed}:match")
    pool = sorted(u for u in data.profiles
                  if any(b["split"] in config.match_splits for b in data.histories.get(u, [])))
    cases = []
    for user_id in users:
        own = [b for b in data.histories[user_id] if b["split"] in config.match_splits]
        if not own:
            continue
        others = rng.sample([u for u in pool if u != user_id], config.options - 1)
        options = [[b for b in data.histories[u] if b["split"] in config.match_splits] for u in others]
        position = rng.randrange(config.options)
        options.insert(position, own)
        cases.append((user_id, [_sample(rng, o, config.behaviours) for o in options], position))
    return cases


def rank_cases(config: ConsistencyConfig, data: BenchmarkData, users: list[str]) -> list[_RankCase]:
    """P bought target products and N never-bought catalogue products per user, shuffled."""
    rng = random.Random(f"{config.seed}:rank")
    catalogue = sorted(data.products)
    cases = []
    for user_id in users:
        bought = {b["product_info"]["parent_asin"] for b in data.histories[user_id]}
        targets = sorted({b["product_info"]["parent_asin"] for b in data.histories[user_id] if b["split"] != "history"})
        if not targets or len(catalogue) - len(bought) < config.negatives:
            continue
        positives = rng.sample(targets, min(config.positives, len(targets)))
        negatives: list[str] = []
        while len(negatives) < config.negatives:
            asin = rng.choice(catalogue)
            if asin not in bought and asin not in negatives:
                negatives.append(asin)
        shown = positives + negatives
        rng.shuffle(shown)
        cases.append(_RankCase(user_id, [data.products[a] for a in shown],
                               {i for i, a in enumerate(shown) if a in positives}))
    return cases


def ranking_scores(order: list[int], positive: set[int]) -> dict[str, float]:
    """Recall@P, MRR (first positive) and NDCG over the whole ranked list."""
    ranks = [r for r, item in enumerate(order, start=1) if item in positive]
    ideal = sum(1 / math.log2(r + 1) for r in range(1, len(positive) + 1))
    return {"recall@P": sum(r <= len(positive) for r in ranks) / len(positive),
            "mrr": 1 / ranks[0],
            "ndcg": sum(1 / math.log2(r + 1) for r in ranks) / ideal}


def random_baseline(cases: list[_RankCase]) -> dict[str, float]:
    """The metrics' expected values under a uniformly random ranking, exactly: a positive
    sits at each rank with probability P/M, and the first positive at rank r with
    probability C(M-r, P-1) / C(M, P)."""
    totals = dict.fromkeys(("recall@P", "mrr", "ndcg"), 0.0)
    for case in cases:
        m, p = len(case.products), len(case.positive)
        ideal = sum(1 / math.log2(r + 1) for r in range(1, p + 1))
        totals["recall@P"] += p / m
        totals["ndcg"] += sum(p / m / math.log2(r + 1) for r in range(1, m + 1)) / ideal
        totals["mrr"] += sum(math.comb(m - r, p - 1) / math.comb(m, p) / r for r in range(1, m - p + 2))
    return {name: value / max(1, len(cases)) for name, value in totals.items()}


def _requests(data: BenchmarkData, matches: list[Any], ranks: list[_RankCase]) -> tuple[list[Any], list[Any]]:
    match_requests = [request(prompts.MATCH_SYSTEM, prompts.match_prompt(data.profiles[u], options), JUDGE_MAX_TOKENS)
                      for u, options, _ in matches]
    rank_requests = [request(prompts.RANK_SYSTEM, prompts.rank_prompt(data.profiles[c.user_id], c.products),
                             RANK_MAX_TOKENS) for c in ranks]
    return match_requests, rank_requests


def _cached_llm(config: ConsistencyConfig, data: BenchmarkData) -> CachedLLM:
    return CachedLLM(config.judge, config.cache_dir or data.artifacts.cache_dir / "llm")


def estimate_consistency(config: ConsistencyConfig) -> dict[str, Estimate]:
    """What the judge calls not yet cached would cost (no call is made)."""
    data = load_benchmark_data(config.data_dir)
    config.check(data)
    users = _evaluated_users(config, data)
    match_requests, rank_requests = _requests(data, match_cases(config, data, users), rank_cases(config, data, users))
    llm = _cached_llm(config, data)
    return {"matching": llm.estimate(match_requests, 2), "ranking": llm.estimate(rank_requests, 40)}


def evaluate_consistency(config: ConsistencyConfig, log: Log = print) -> dict[str, Any]:
    """Run both checks and return the report."""
    data = load_benchmark_data(config.data_dir)
    config.check(data)
    users = _evaluated_users(config, data)
    matches, ranks = match_cases(config, data, users), rank_cases(config, data, users)
    match_requests, rank_requests = _requests(data, matches, ranks)
    llm = _cached_llm(config, data)
    log(f"consistency: {len(matches)} matching and {len(ranks)} ranking cases on {data.source} ({config.data_dir})")
    answers = llm.ask_all(match_requests + rank_requests, "judging profiles")
    choices = [prompts.parse_choice(a.content, config.options) for a in answers[: len(matches)]]
    correct = sum(choice == position for choice, (_, _, position) in zip(choices, matches))
    scores = {"recall@P": 0.0, "mrr": 0.0, "ndcg": 0.0}
    incomplete = 0
    for case, answer in zip(ranks, answers[len(matches):]):
        order, complete = prompts.parse_ranking(answer.content, len(case.products))
        incomplete += not complete
        for name, value in ranking_scores(order, case.positive).items():
            scores[name] += value / len(ranks)
    return {
        "data_dir": str(config.data_dir),
        "data_source": data.source,
        "judge": config.judge.describe(),
        "users_evaluated": len(users),
        "seed": config.seed,
        "matching": {"cases": len(matches), "options": config.options, "behaviours_shown": config.behaviours,
                     "splits": list(config.match_splits), "accuracy": correct / max(1, len(matches)),
                     "chance": 1 / config.options, "unparsed": sum(c is None for c in choices)},
        "ranking": {"cases": len(ranks), "positives": config.positives, "negatives": config.negatives,
                    **scores, "random": random_baseline(ranks), "incomplete_answers": incomplete},
        "llm": llm.stats.as_dict(),
    }


def format_report(report: dict[str, Any]) -> str:
    m, r = report["matching"], report["ranking"]
    rand = r["random"]
    return "\n".join([
        f"profile consistency of {report['data_source']} ({report['users_evaluated']} users, judge "
        f"{report['judge']['model']})",
        f"  profile -> behaviour matching: accuracy {m['accuracy']:.3f} (chance {m['chance']:.3f}; {m['options']} "
        f"histories of {m['behaviours_shown']} behaviours; {m['unparsed']} unreadable answers)",
        f"  profile -> product ranking ({r['positives']} bought + {r['negatives']} other products): "
        f"Recall@P {r['recall@P']:.3f} (random {rand['recall@P']:.3f}), MRR {r['mrr']:.3f} (random {rand['mrr']:.3f}), "
        f"NDCG {r['ndcg']:.3f} (random {rand['ndcg']:.3f}); {r['incomplete_answers']} incomplete rankings",
        f"  judge calls: {report['llm']['calls']} made, {report['llm']['cached']} from the cache",
    ])
