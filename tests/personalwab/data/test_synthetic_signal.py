"""The synthetic histories carry sequential structure (product lines bought in order) that a
next-item recommender can learn, so recommendation tasks reward reading recent history."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from PersonalWAB.agents.heuristic import recommendation_sequence
from PersonalWAB.data.loader import BenchmarkData, load_benchmark_data
from PersonalWAB.data.synthetic import generate_synthetic
from PersonalWAB.engines.recommender.engine import SASRecRecommender
from PersonalWAB.engines.recommender.train import (
    TOP_K,
    SASRecTrainConfig,
    split_sequences,
    train_sasrec,
    user_sequences,
)
from PersonalWAB.envs.pwab.scoring import rank_score
from PersonalWAB.memory import retrieve_memory


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> BenchmarkData:
    out = tmp_path_factory.mktemp("synthetic_small")
    generate_synthetic(out, scale="small", seed=0)
    return load_benchmark_data(out)


def _hit_rate(ranked: list[list[str]], targets: list[str]) -> float:
    return sum(target in top for top, target in zip(ranked, targets)) / len(targets)


def test_the_next_purchase_follows_from_the_last_one(small: BenchmarkData) -> None:
    """Model-free: "what others bought right after your last purchase" finds the held-out
    item of the recommender's protocol far more often than the most popular items do."""
    item_map = {asin: i for i, asin in enumerate(small.products)}
    split = split_sequences(user_sequences(small, item_map))
    followers: dict[str, Counter[str]] = {}
    for sequence in split.train:
        for before, after in zip(sequence, sequence[1:]):
            followers.setdefault(before, Counter())[after] += 1
    popular = [asin for asin, _ in Counter(a for s in split.test.inputs for a in s).most_common(TOP_K)]
    by_transition = [[a for a, _ in followers.get(inputs[-1], Counter()).most_common(TOP_K)]
                     for inputs in split.test.inputs]
    transition, popularity = (_hit_rate(by_transition, split.test.targets),
                              _hit_rate([popular] * len(split.test.targets), split.test.targets))
    assert transition >= 0.1 and transition >= 2 * popularity


@pytest.mark.slow
def test_sasrec_beats_popularity_and_history_helps_recommendation(small: BenchmarkData, tmp_path: Path) -> None:
    """The trained recommender beats popularity at least twofold on held-out items, and the
    offline agent's recommendation from the last 10 behaviours (memory `last`) scores above
    the one with no memory (which sends an empty sequence and gets nothing)."""
    report = train_sasrec(small, tmp_path / "pwab.pth", tmp_path / "ids.json", SASRecTrainConfig(num_threads=1))
    assert report["warning"] is None
    assert report["sasrec"]["hr@10"] >= 2 * report["popularity"]["hr@10"]
    recommender = SASRecRecommender(tmp_path / "pwab.pth", tmp_path / "ids.json")
    tasks = [task for task in small.tasks["test"] if task["type"] == "recommend"]

    def result_acc(mode: str) -> float:
        sequences = [recommendation_sequence(retrieve_memory(small, task, mode, 10)) for task in tasks]
        ranked = recommender.recommend_batch(sequences, k=TOP_K)
        return sum(rank_score(task["target"]["product_info"]["parent_asin"], top)
                   for task, top in zip(tasks, ranked)) / len(tasks)

    assert result_acc("last") > result_acc("none") == 0.0
