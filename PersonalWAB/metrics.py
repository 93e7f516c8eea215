"""What a run's records score: the task score, the per-type statistics of a result header,
and the spread across trials that `--num_trials k` adds to it.

Everything here is a pure function of task records (the result file's format is
`PersonalWAB.results`), so `leaderboard validate` recomputes a header's numbers exactly.

Single runs of an agent benchmark differ by several points from run to run (sampling
temperature, provider nondeterminism), so one number cannot tell two methods apart. With
k >= 2 trials of the same tasks the header's `trials` section gives, per task type and
overall, for each statistic of `results` (Function Acc, Result Acc, Avg Steps):

- `per_trial`: the statistic computed over each trial's records alone (the rules of a
  1-trial run, so trial t's value is what a run of that trial alone would report);
- `mean` and `std` (sample standard deviation, k - 1 degrees of freedom) of those values;
- `ci95`: the 95% t-interval of the mean, mean ± t(0.975, k - 1) · std / √k, kept within
  the statistic's range ([0, 1] for the accuracies): where the expected score of rerunning
  this agent on these tasks lies (the tasks are fixed; it measures the agent's run-to-run
  noise, not the sampling of tasks);

and, over the group's tasks:

- `function_pass^j` for j = 1..k: the chance that j trials drawn from the k all call the
  right function (tau-bench's pass^j estimator, the mean over tasks of C(c, j) / C(k, j)
  with c the task's trials with Function Acc 1); `pass^k` is the share of tasks right in
  every trial. Nearly every agent calls the right function, so this says little;
- `solved_pass^j`: the same estimator over *solved* trials, those with Function Acc 1 and a
  best Result Acc at or above `solved_threshold` (the run's `--solved_threshold`, default
  `SOLVED_THRESHOLD` = 0.5: the target in the top half of the results, or a review whose
  MiniLM cosine to the real one is at least 0.5), with the threshold it used; files whose
  run_args record no threshold (older versions, the release) have none;
- `result_identical`: the share of tasks whose best Result Acc is the same (within 1e-9)
  in every trial.

The header's original fields are untouched by the `trials` section.

Two runs of the same tasks are compared task by task (`leaderboard compare`): a percentile
bootstrap interval of the mean difference over tasks (`paired_bootstrap_interval`) and a
paired sign-flip permutation test (`paired_test`); this measures the sampling of tasks,
where `trials` measures the agent's run-to-run noise.
"""

from __future__ import annotations

import functools
import math
from statistics import fmean, stdev
from collections.abc import Sequence
from typing import Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.schema_types import Record, Statistics

LEVEL = 0.95
SAME_RESULT = 1e-9  # best Result Acc values closer than this are the same
SOLVED_THRESHOLD = 0.5  # best Result Acc at or above which a trial with the right function counts as solved
STATISTICS = ("avg_action_acc", "avg_res_acc", "avg_interaction_times")
INTERVAL_NOTE = ("95% t-interval of the mean over trials: mean ± t(0.975, k-1) * std / sqrt(k), "
                 "kept within [0, 1] for the accuracies")


def task_score(action_acc: list[float], res_acc: list[float]) -> tuple[float, float]:
    """Best attempt among those that called the right function; none -> (0, 0)."""
    valid = [res for act, res in zip(action_acc, res_acc) if act == 1]
    return (1.0, max(valid)) if valid else (0.0, 0.0)


def is_errored(record: Record) -> bool:
    """A task run that ended in an error (it is run again on resume)."""
    return "error" in record["info"]


def has_format_error(record: Record) -> bool:
    """A task the agent's model ended with unusable replies (tool arguments that are not a JSON
    object, 10 times in a row): scored as it stands, not an error, but worth a look."""
    return "format_error" in record["info"]


def count_format_errors(records: list[Record]) -> int:
    """How many task runs ended on a format error (`has_format_error`)."""
    return sum(has_format_error(record) for record in records)


def record_steps(record: Record) -> int:
    """Avg Steps' count for a task run: the actions the agent sent to the environment. The
    built-in agents record one model call (usage entry) per action, so that count is theirs
    and the release's; a record says `info.steps` only where the two differ (an agent that
    calls no model, or several per action)."""
    steps = record["info"].get("steps")
    return steps if isinstance(steps, int) else len(record["info"]["usage"]["completion_tokens"])


def record_cost(record: Record) -> float:
    """The agent's cost of a task run (the header's `total cost`, as in the release)."""
    return float(record["info"]["usage"].get("total_price", 0.0))


def record_user_cost(record: Record) -> float:
    """The simulated user's cost of a task run (the header's `total user cost`)."""
    return float(record["info"].get("user_cost") or 0.0)


def record_saved_usd(record: Record) -> float:
    """What the response cache spared a task run's calls (0 for a run without one)."""
    value = record["info"].get("cache_saved_usd")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def record_paid_usd(record: Record) -> float:
    """What a task run's model calls were paid: the agent's and the user's cost, less what
    the response cache answered (its calls are counted in the cost, as the first run paid them)."""
    return record_cost(record) + record_user_cost(record) - record_saved_usd(record)


def compute_statistics(records: list[Record]) -> Statistics:
    """Per task type and overall: count, Avg Steps, Function Acc, Result Acc."""
    groups: dict[str, list[Record]] = {kind: [] for kind in TASK_TYPES}
    for record in records:
        groups.setdefault(record["info"]["task"]["type"], []).append(record)
    groups["overall"] = list(records)
    stats: Statistics = {}
    for name, members in groups.items():
        scores = [task_score(r["action_acc"], r["res_acc"]) for r in members]
        count = len(members)
        stats[name] = {
            "total_count": count,
            "avg_interaction_times": sum(record_steps(r) for r in members) / count if count else 0.0,
            "avg_action_acc": sum(s[0] for s in scores) / count if count else 0.0,
            "avg_res_acc": sum(s[1] for s in scores) / count if count else 0.0,
        }
    return stats


def count_errors(records: list[Record]) -> dict[str, int]:
    """Errored task runs per task type and overall."""
    counts = {"overall": 0}
    for record in records:
        if is_errored(record):
            kind = record["info"]["task"]["type"]
            counts[kind] = counts.get(kind, 0) + 1
            counts["overall"] += 1
    return counts


def format_statistics_table(stats: Statistics, title: str = "",
                            errors: dict[str, int] | None = None) -> str:
    """The per-type table printed at the end of a run; with `errors` (from `count_errors`)
    an `errored` column marks the rows that include tasks which ended in an error
    (they count as 0/0 until resumed)."""
    errors = errors or {}
    errored = bool(errors.get("overall"))
    lines = [title] if title else []
    lines.append(f"{'type':<10} {'tasks':>6} {'Function Acc':>13} {'Result Acc':>11} {'Avg Steps':>10}"
                 + (f" {'errored':>8}" if errored else ""))
    for name in (*TASK_TYPES, "overall"):
        row = stats.get(name)
        if row is None:
            continue
        lines.append(
            f"{name:<10} {row['total_count']:>6} {row['avg_action_acc']:>13.3f} "
            f"{row['avg_res_acc']:>11.3f} {row['avg_interaction_times']:>10.2f}"
            + (f" {errors.get(name, 0) or '':>8}" if errored else "")
        )
    return "\n".join(lines)


def t_two_sided_cdf(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with an integer number of degrees of freedom, in closed
    form (Abramowitz & Stegun 26.7.3-4): no numerical library needed, the same value everywhere."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:  # odd: (2/π)(θ + sinθ cosθ (1 + 2/3 cos² + 2·4/(3·5) cos⁴ + ...))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for n in range(3, df - 1, 2):
            term *= (n - 1) / n * c2
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    term, total = 1.0, 1.0  # even: sinθ (1 + 1/2 cos² + 1·3/(2·4) cos⁴ + ...)
    for n in range(2, df - 1, 2):
        term *= (n - 1) / n * c2
        total += term
    return math.sin(theta) * total


@functools.lru_cache(maxsize=256)
def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| <= t) = level (e.g. 0.95 -> the 0.975 quantile), by bisection (kept per
    level and degrees of freedom: a run's thousands of tasks make each bisection step long)."""
    low, high = 0.0, 1.0
    while t_two_sided_cdf(high, df) < level:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if t_two_sided_cdf(middle, df) < level:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def spread(values: list[float], upper: float = math.inf) -> dict[str, Any]:
    """Per-trial values, their mean, sample standard deviation and 95% t-interval, kept
    within [0, upper] (the range the statistic's mean can take)."""
    mean = fmean(values)
    std = stdev(values)
    half = t_quantile(LEVEL, len(values) - 1) * std / math.sqrt(len(values))
    return {"per_trial": values, "mean": mean, "std": std, "ci95": [max(0.0, mean - half), min(upper, mean + half)]}


def pass_hat(correct: list[int], trials: int) -> dict[str, float]:
    """pass^j for j = 1..trials: mean over tasks of C(c, j) / C(trials, j)."""
    return {f"pass^{j}": fmean(math.comb(c, j) / math.comb(trials, j) for c in correct)
            for j in range(1, trials + 1)}


def solved_threshold_of(run_args: Any) -> float | None:
    """The run's `solved_threshold` when it records a number in [0, 1], else None."""
    value = run_args.get("solved_threshold") if isinstance(run_args, dict) else None
    return float(value) if isinstance(value, (int, float)) and 0 <= value <= 1 else None


def trial_statistics(records: list[Record], num_trials: int,
                     solved_threshold: float | None = None) -> dict[str, Any] | None:
    """The header's `trials` section for a run of `num_trials` trials (None below 2); with
    `solved_threshold`, pass^j over solved trials too."""
    if num_trials < 2 or not records:
        return None
    by_trial = [[r for r in records if r["trial"] == trial] for trial in range(num_trials)]
    per_trial = [compute_statistics(members) for members in by_trial]
    groups: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for record in records:
        scores = task_score(record["action_acc"], record["res_acc"])
        for group in (record["info"]["task"]["type"], "overall"):
            groups.setdefault(group, {}).setdefault(record["task_id"], []).append(scores)
    results: dict[str, Any] = {}
    for group in (*TASK_TYPES, "overall"):
        tasks = groups.get(group)
        if not tasks:
            continue
        entry: dict[str, Any] = {"tasks": len(tasks)}
        for key in STATISTICS:
            entry[key] = spread([stats[group][key] for stats in per_trial],
                                math.inf if key == "avg_interaction_times" else 1.0)
        entry["function_pass^k"] = pass_hat([sum(s[0] == 1 for s in scores) for scores in tasks.values()],
                                            num_trials)
        if solved_threshold is not None:
            entry["solved_pass^k"] = pass_hat([sum(s[0] == 1 and s[1] >= solved_threshold for s in scores)
                                               for scores in tasks.values()], num_trials)
        entry["result_identical"] = fmean(
            len(scores) == num_trials and max(s[1] for s in scores) - min(s[1] for s in scores) <= SAME_RESULT
            for scores in tasks.values())
        results[group] = entry
    trials = {"num_trials": num_trials, "interval": INTERVAL_NOTE, "results": results}
    if solved_threshold is not None:
        trials["solved_threshold"] = solved_threshold
    return trials


def interval(trials: dict[str, Any] | None, group: str, key: str) -> tuple[float, float] | None:
    """The 95% interval of a statistic in a `trials` section (None without one)."""
    entry = ((trials or {}).get("results") or {}).get(group) or {}
    values = entry.get(key)
    return tuple(values["ci95"]) if isinstance(values, dict) else None


def format_trial_table(trials: dict[str, Any]) -> str:
    """The spread printed after a run's table: mean ± std [95% interval] per type."""
    k = trials["num_trials"]
    threshold = trials.get("solved_threshold")
    pass_key, meaning = (("solved_pass^k", f"solved (right function, best Result Acc >= {threshold}) in all {k}")
                         if threshold is not None else ("function_pass^k", f"right function in all {k}"))
    lines = [f"Across {k} trials (mean ± std [95% interval]; pass^{k}: {meaning}; "
             "same R. Acc: best Result Acc identical in every trial)",
             f"{'type':<10} {'tasks':>6} {'Function Acc':>30} {'Result Acc':>30} {f'pass^{k}':>7} {'same R. Acc':>11}"]
    for group, entry in trials["results"].items():
        cells = []
        for key in ("avg_action_acc", "avg_res_acc"):
            s = entry[key]
            cells.append(f"{s['mean']:.3f} ± {s['std']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]")
        lines.append(f"{group:<10} {entry['tasks']:>6} {cells[0]:>30} {cells[1]:>30} "
                     f"{entry[pass_key][f'pass^{k}']:>7.3f} {entry['result_identical']:>11.3f}")
    return "\n".join(lines)


# -- comparing two runs over the same tasks ---------------------------------------------------
#
# A run's mean over ~2,000 tasks moves with which tasks the benchmark happened to draw, so a
# difference between two runs is only worth reading with the spread that task sampling gives
# it. Runs of the same tasks are compared *paired* (task by task): the per-task difference
# removes how hard each task is, which a comparison of two unpaired means would count as noise.

EXACT_SIGN_FLIPS = 16  # nonzero differences up to which the sign-flip test enumerates every pattern
_CHUNK = 1_000_000  # numbers drawn per block, so resampling 2,000 x 2,174 tasks stays small in memory


def _resampled_means(values: Any, resamples: int, rng: Any) -> Any:
    """The means of `resamples` bootstrap resamples (n draws with replacement) of `values`."""
    import numpy as np

    n = len(values)
    rows = max(1, _CHUNK // n)
    return np.concatenate([values[rng.integers(0, n, size=(min(rows, resamples - start), n))].mean(axis=1)
                           for start in range(0, resamples, rows)])


def bootstrap_interval(values: Sequence[float], level: float = 0.95, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over tasks: where the mean would land had the
    benchmark drawn other tasks like these. It assumes nothing about the scores' distribution
    (they are 0/1 or bounded, far from normal). Deterministic given `seed`; kept within
    [min, max] of the values, which a resample's mean cannot leave (so all-equal values give
    (v, v) exactly)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap_interval needs at least one value")
    low, high = float(data.min()), float(data.max())
    if low == high:
        return low, high
    means = _resampled_means(data, resamples, np.random.default_rng(seed))
    tail = (1 - level) / 2
    bounds = np.quantile(means, [tail, 1 - tail])
    return min(max(float(bounds[0]), low), high), min(max(float(bounds[1]), low), high)


def _differences(a: Sequence[float], b: Sequence[float]) -> Any:
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"paired scores need equal lengths, got {len(a)} and {len(b)}")
    return np.asarray(b, dtype=float) - np.asarray(a, dtype=float)


def paired_bootstrap_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95,
                              resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of mean(b - a), resampling matched pairs (a[i], b[i]) together."""
    return bootstrap_interval(_differences(a, b), level, resamples, seed)


def paired_test(a: Sequence[float], b: Sequence[float], resamples: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip permutation test of mean(b - a) = 0.

    Under the null hypothesis the two runs are exchangeable on every task, so each task's
    difference is as likely to have either sign; the p-value is the share of sign patterns whose
    |sum| reaches the observed |sum|. Chosen over the paired t-test because the scores are 0/1
    or bounded with many ties (the t-test's normality does not hold on a type's few hundred
    tasks) and over the Wilcoxon signed-rank test because it tests the mean, the very number
    the leaderboard reports. Zero differences do not change under a flip and are left out;
    with none left p = 1. Up to `EXACT_SIGN_FLIPS` nonzero differences every pattern is
    enumerated (the exact p); beyond, `resamples` random patterns give (1 + hits) / (1 + resamples),
    which never reports p = 0 and never understates p on average (Phipson & Smyth 2010)."""
    import numpy as np

    diffs = _differences(a, b)
    diffs = diffs[diffs != 0]
    m = diffs.size
    if m == 0:
        return 1.0
    total = float(diffs.sum())
    threshold = abs(total) - 1e-9 * float(np.abs(diffs).sum())  # equal sums up to rounding count as reached
    if m <= EXACT_SIGN_FLIPS:
        flips = (np.arange(2 ** m)[:, None] >> np.arange(m)) & 1
        sums = total - 2 * (flips @ diffs)  # flipping d_i takes 2 d_i off the sum
        return float(np.mean(np.abs(sums) >= threshold))
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // m)
    hits = 0
    for start in range(0, resamples, rows):
        flips = rng.integers(0, 2, size=(min(rows, resamples - start), m)).astype(float)
        hits += int(np.count_nonzero(np.abs(total - 2 * (flips @ diffs)) >= threshold))
    return (1 + hits) / (1 + resamples)


# -- statistics that respect users ------------------------------------------------------------
#
# A user's tasks share the user (their history, their way of asking), so they are not
# independent draws: an interval that treats 2,000 tasks of 1,000 users as 2,000 independent
# tasks is too narrow. The cluster-robust standard error sums the residuals within each user
# before squaring; the design effect (its variance over the naive one) says how much wider.


def clustered_interval(values: Sequence[float], clusters: Sequence[Any], level: float = LEVEL) -> dict[str, Any]:
    """The mean of `values` with two intervals side by side: the naive t-interval (tasks taken as
    independent, mean ± t(n-1) s/√n) and the interval clustered by `clusters` (each value's user):
    mean ± t(G-1) · SE_cl, SE_cl = √(G/(G-1) · Σ_g (Σ_{i∈g} (y_i - ȳ))²) / n over G clusters (the
    CR1 estimator Inspect and Stata use). `design_effect` = (SE_cl / SE_naive)²: how many times the
    variance the user structure adds (1: none); None where the naive one is 0."""
    n = len(values)
    if n != len(clusters):
        raise ValueError(f"clustered_interval needs one cluster per value, got {n} values and {len(clusters)}")
    if n == 0:
        raise ValueError("clustered_interval needs at least one value")
    mean = fmean(values)
    sums: dict[Any, float] = {}
    for value, cluster in zip(values, clusters):
        sums[cluster] = sums.get(cluster, 0.0) + (value - mean)
    groups = len(sums)
    naive_se = stdev(values) / math.sqrt(n) if n > 1 else 0.0
    clustered_se = (math.sqrt(groups / (groups - 1) * sum(s * s for s in sums.values())) / n) if groups > 1 else 0.0

    def bounds(se: float, df: int) -> list[float]:
        half = t_quantile(level, df) * se if df > 0 and se > 0 else 0.0
        return [mean - half, mean + half]

    return {"mean": mean, "tasks": n, "clusters": groups, "naive_se": naive_se, "clustered_se": clustered_se,
            "naive": bounds(naive_se, n - 1), "clustered": bounds(clustered_se, groups - 1),
            "design_effect": (clustered_se / naive_se) ** 2 if naive_se > 0 else None}


def mcnemar_test(lost: int, gained: int) -> float:
    """Two-sided exact McNemar p-value for paired solved / unsolved outcomes: under the null
    hypothesis a discordant task (solved by one run only) is as likely lost as gained, so the
    smaller count is a Binomial(lost + gained, 1/2) tail, doubled (at most 1). No discordant task: 1."""
    discordant = lost + gained
    if discordant == 0:
        return 1.0
    tail = sum(math.comb(discordant, k) for k in range(min(lost, gained) + 1)) / 2 ** discordant
    return min(1.0, 2 * tail)


def per_user_means(values: Sequence[float], users: Sequence[Any]) -> dict[Any, float]:
    """Each user's mean of `values` (their tasks' scores), users in order of first appearance."""
    sums: dict[Any, list[float]] = {}
    for value, user in zip(values, users):
        sums.setdefault(user, []).append(value)
    return {user: fmean(scores) for user, scores in sums.items()}


def quantile(sorted_values: Sequence[float], share: float) -> float:
    """The `share` quantile of sorted values, interpolated linearly between ranks (numpy's default)."""
    position = share * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


WORST_SHARE = 0.1  # the worst decile of users


def user_distribution(means: dict[Any, float]) -> dict[str, Any]:
    """The distribution of per-user means: the sorted values, quantiles, and the worst decile of
    users (the ceil(10%) users with the lowest mean, ties broken by user id) with their mean."""
    ordered = sorted(means.values())
    worst_count = max(1, math.ceil(WORST_SHARE * len(means)))
    worst = sorted(means, key=lambda user: (means[user], str(user)))[:worst_count]
    return {"users": len(means), "mean": fmean(ordered), "values": ordered,
            "quantiles": {name: quantile(ordered, share) for name, share in
                          (("min", 0.0), ("p10", 0.1), ("p25", 0.25), ("median", 0.5), ("p75", 0.75),
                           ("p90", 0.9), ("max", 1.0))},
            "worst_decile": {"users": worst, "mean": fmean(means[user] for user in worst)}}


# -- ranking metrics of recommendation lists --------------------------------------------------

RANKING_CUTOFF = 10


def target_rank(target_asin: str, results: Sequence[str]) -> int | None:
    """The 1-based rank of the first result text naming the target ASIN (None: not listed)."""
    return next((rank for rank, text in enumerate(results, 1) if target_asin in text), None)


def ndcg_at(rank: int | None, cutoff: int = RANKING_CUTOFF) -> float:
    """NDCG@cutoff of a list with one relevant item at `rank`: 1/log2(rank + 1) within the cutoff, else 0."""
    return 0.0 if rank is None or rank > cutoff else 1.0 / math.log2(rank + 1)


def reciprocal_rank(rank: int | None) -> float:
    """1/rank of the relevant item (0 when it is not listed): a task's share of MRR."""
    return 0.0 if rank is None else 1.0 / rank
