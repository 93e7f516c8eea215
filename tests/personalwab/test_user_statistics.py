"""Statistics that respect users, McNemar's test and the ranking metrics (PersonalWAB.metrics)."""

from __future__ import annotations

import math

import pytest

from PersonalWAB.metrics import (clustered_interval, mcnemar_test, ndcg_at, per_user_means, reciprocal_rank,
                                 t_quantile, target_rank, user_distribution)


def test_one_task_per_user_gives_the_naive_interval_and_a_design_effect_near_one():
    values = [0.0, 1.0, 0.5, 0.25, 0.75, 1.0]
    result = clustered_interval(values, ["a", "b", "c", "d", "e", "f"])
    mean = sum(values) / 6
    naive_se = math.sqrt(sum((v - mean) ** 2 for v in values) / 5) / math.sqrt(6)
    assert result["naive_se"] == pytest.approx(naive_se)
    assert result["clustered_se"] == pytest.approx(naive_se)  # CR1 with singletons is the naive estimator
    assert result["design_effect"] == pytest.approx(1.0)
    half = t_quantile(0.95, 5) * naive_se
    assert result["naive"] == pytest.approx([mean - half, mean + half])


def test_users_whose_tasks_agree_widen_the_interval():
    # every user solves all or none of their 4 tasks: the tasks of a user carry one observation's worth
    values = [1.0] * 4 + [0.0] * 4 + [1.0] * 4 + [0.0] * 4 + [1.0] * 4
    users = [u for u in "abcde" for _ in range(4)]
    result = clustered_interval(values, users)
    sums = [4 * (v - 0.6) for v in (1, 0, 1, 0, 1)]
    expected = math.sqrt(5 / 4 * sum(s * s for s in sums)) / 20
    assert result["clustered_se"] == pytest.approx(expected)
    assert result["clusters"] == 5 and result["design_effect"] > 3
    low, high = result["clustered"]
    assert high - low > result["naive"][1] - result["naive"][0]


def test_mcnemar_is_the_exact_binomial_tail_of_the_discordant_pairs():
    assert mcnemar_test(0, 0) == 1.0
    assert mcnemar_test(0, 5) == pytest.approx(2 / 32)
    assert mcnemar_test(2, 8) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert mcnemar_test(5, 5) == 1.0


def test_per_user_distribution_and_worst_decile():
    means = per_user_means([1, 0, 0.5, 0.5, 0, 1, 1], ["a", "a", "b", "b", "c", "d", "e"])
    assert means == {"a": 0.5, "b": 0.5, "c": 0.0, "d": 1.0, "e": 1.0}
    view = user_distribution(means)
    assert view["quantiles"]["median"] == 0.5 and view["quantiles"]["min"] == 0.0
    assert view["worst_decile"] == {"users": ["c"], "mean": 0.0}


def test_ranking_metrics_of_one_relevant_item():
    results = ["1. X (B1)", "2. Y (B2)", "3. Z (TARGET)"]
    assert target_rank("TARGET", results) == 3
    assert ndcg_at(3) == pytest.approx(1 / math.log2(4)) and reciprocal_rank(3) == pytest.approx(1 / 3)
    assert ndcg_at(None) == 0.0 and reciprocal_rank(None) == 0.0 and ndcg_at(11) == 0.0
