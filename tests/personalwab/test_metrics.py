"""The statistics of `PersonalWAB.metrics`, on hand-made score lists whose answers are known: those
`leaderboard compare` rests on, statistics that respect users, McNemar's test, the ranking metrics,
Student's t quantiles, and pass^k (tau's estimator, over solved trials)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from PersonalWAB.metrics import (bootstrap_interval, clustered_interval, mcnemar_test, ndcg_at,
                                 paired_bootstrap_interval, paired_test, pass_hat, per_user_means, reciprocal_rank,
                                 t_quantile, target_rank, trial_statistics, user_distribution)


def test_degenerate_lists_give_their_value():
    assert bootstrap_interval([0.25]) == (0.25, 0.25)
    assert bootstrap_interval([0.1] * 7) == (0.1, 0.1)  # not 0.09999999999999999 from averaging
    with pytest.raises(ValueError):
        bootstrap_interval([])
    with pytest.raises(ValueError):
        paired_bootstrap_interval([1.0, 0.0], [1.0])


def test_identical_runs_differ_by_zero():
    scores = [0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    assert paired_bootstrap_interval(scores, scores) == (0.0, 0.0)
    assert paired_test(scores, scores) == 1.0


def test_a_constant_shift_is_the_interval_and_as_significant_as_it_can_be():
    a = [0.0, 0.25, 0.5, 0.125, 0.375]
    b = [x + 0.5 for x in a]  # exact in binary: every difference is 0.5
    assert paired_bootstrap_interval(a, b) == (0.5, 0.5)
    assert paired_bootstrap_interval(b, a) == (-0.5, -0.5)
    # 5 differences of one sign: only the observed pattern and its mirror reach |sum| = 2.5
    assert paired_test(a, b) == 2 / 2 ** 5
    shifted = [x + 0.1 for x in a]  # not exact in binary: the interval is the shift up to rounding
    low, high = paired_bootstrap_interval(a, shifted)
    assert low == pytest.approx(0.1, abs=1e-12) and high == pytest.approx(0.1, abs=1e-12)


@pytest.mark.parametrize("differences, p", [
    # the 8 sign patterns of (1, 2, 3) sum to ±6, ±4, ±2, 0, 0: |sum| >= 6 in 2 of 8
    ([1, 2, 3], 2 / 8),
    # (3, 1, 1): sums ±5, ±3, ±3, ±1: |sum| >= 5 in 2 of 8
    ([3, 1, 1], 2 / 8),
    # (1, 1, 1, -1): the sum is 2k - 4 for k positive signs: |sum| >= 2 unless k = 2 (6 of 16)
    ([1, 1, 1, -1], 10 / 16),
    # zero differences cannot flip and are left out: the same as (1, 2, 3)
    ([0, 1, 0, 2, 3, 0], 2 / 8),
    # an observed sum of 0 is reached by every pattern
    ([1, 2, -3], 1.0),
])
def test_exact_sign_flip_p_values_computed_by_hand(differences, p):
    a = [0.5] * len(differences)
    b = [0.5 + d for d in differences]
    assert paired_test(a, b) == pytest.approx(p, abs=1e-12)
    assert paired_test(b, a) == pytest.approx(p, abs=1e-12)  # two-sided: the direction does not matter


def test_random_sign_flips_approach_the_exact_p():
    """20 differences (past exact enumeration): 14 of +1, 6 of -1, sum 8. Exactly, |2K - 20| >= 8 for
    K ~ Binomial(20, 1/2), i.e. K >= 14 or K <= 6."""
    exact = 2 * sum(math.comb(20, k) for k in range(14, 21)) / 2 ** 20
    a = [0.0] * 20
    b = [1.0] * 14 + [-1.0] * 6
    p = paired_test(a, b, resamples=10000, seed=3)
    assert p == pytest.approx(exact, abs=0.01)  # Monte Carlo standard error ~0.003
    assert p == paired_test(a, b, resamples=10000, seed=3)  # deterministic given the seed
    assert paired_test(a, [1.0] * 20, resamples=999) == 1 / 1000  # never 0: (1 + hits) / (1 + resamples)


def test_bootstrap_is_deterministic_and_widens_with_the_level():
    values = np.random.default_rng(7).random(300)
    assert bootstrap_interval(values, seed=1) == bootstrap_interval(values, seed=1)
    assert bootstrap_interval(values, seed=1) != bootstrap_interval(values, seed=2)
    low90, high90 = bootstrap_interval(values, level=0.90)
    low99, high99 = bootstrap_interval(values, level=0.99)
    assert low99 < low90 < values.mean() < high90 < high99


def test_bootstrap_interval_covers_the_true_mean_about_95_percent_of_the_time():
    """200 samples of 100 task scores drawn from Bernoulli(0.3), fixed seeds: the interval holds the
    true mean in about 95% of them (binomial spread ~3 samples), and is as wide as the normal theory says."""
    rng = np.random.default_rng(2024)
    samples = rng.random((200, 100)) < 0.3
    intervals = [bootstrap_interval(sample.astype(float), seed=i) for i, sample in enumerate(samples)]
    covered = sum(low <= 0.3 <= high for low, high in intervals)
    assert 180 <= covered <= 198
    width = np.mean([high - low for low, high in intervals])
    assert width == pytest.approx(2 * 1.96 * math.sqrt(0.3 * 0.7 / 100), rel=0.1)


def test_paired_test_rejects_at_its_level_under_the_null():
    """Two runs drawn from the same scores distribution: p < 0.05 in about 5% of 300 comparisons;
    a real shift of 0.2 on 50 tasks is found almost always."""
    rng = np.random.default_rng(11)
    null = [paired_test(rng.random(50), rng.random(50), resamples=2000, seed=i) for i in range(300)]
    assert 0.02 <= np.mean(np.array(null) < 0.05) <= 0.09
    shifted = [paired_test(a, a + 0.2 + rng.normal(0, 0.2, 50), resamples=2000) for a in rng.random((20, 50))]
    assert max(shifted) < 0.01


# -- statistics that respect users, McNemar's test and the ranking metrics ---------------------------------

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


def _records(scores: list[list[float]]) -> list[dict]:
    """One search task per row, one trial per score (the right function each time)."""
    return [{"task_id": task, "trial": trial, "action_acc": [1.0], "res_acc": [score],
             "info": {"task": {"type": "search"}, "usage": {"completion_tokens": [1]}}}
            for task, row in enumerate(scores) for trial, score in enumerate(row)]


def test_pass_k_counts_solved_trials_not_the_right_function():
    records = _records([[0.9, 0.8], [0.9, 0.1], [0.0, 0.0]])
    trials = trial_statistics(records, 2, solved_threshold=0.5)
    overall = trials["results"]["overall"]
    assert overall["function_pass^k"]["pass^2"] == 1.0  # the right function every time: says nothing
    assert overall["solved_pass^k"] == {"pass^1": pytest.approx(0.5), "pass^2": pytest.approx(1 / 3)}
    assert trials["solved_threshold"] == 0.5
    assert "solved_pass^k" not in trial_statistics(records, 2)["results"]["overall"]  # files without a threshold


def test_t_quantiles_match_the_tables():
    # Student t 0.975 quantiles (two-sided 95%) from standard tables
    for df, expected in ((1, 12.7062047), (2, 4.30265273), (3, 3.18244631), (4, 2.77644511), (9, 2.26215716),
                         (29, 2.04522964)):
        assert math.isclose(t_quantile(0.95, df), expected, rel_tol=1e-7)


def test_pass_hat_is_taus_estimator():
    # a task right in 2 of 3 trials: pass^1 = 2/3, pass^2 = C(2,2)/C(3,2) = 1/3, pass^3 = 0
    assert pass_hat([2], 3) == pytest.approx({"pass^1": 2 / 3, "pass^2": 1 / 3, "pass^3": 0.0})
    assert pass_hat([3, 0], 3) == {"pass^1": 0.5, "pass^2": 0.5, "pass^3": 0.5}
