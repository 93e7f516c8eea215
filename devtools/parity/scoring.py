"""Steps 4 and 5 of the `puma` check on candidates that hit, and the one declared difference they
expose: the release reads a recommend candidate's ASINs through `list(set(...))`, an order fixed
only by the hash seed (0 in the harness), where the project keeps their first-occurrence order
(`bug_fixes` in PUMA/configs/release.yaml).

Candidates per train instruction (`crafted_candidates`): search queries holding the target's
title (whole and in parts); recommend lists holding the target among the items the recommender
ranks after it (and the user's own history) in several orders and positions; the real review;
and beside them the label, `stop`, a `Say:` message and text that scores nothing. Recommend
lists are picked with this project's recommender and the release's set order (worked out by the
release worker in a process with the release's hash seed, `release_set_orders`), so that some
hit under both orders and some under one only: both sides score above 0 on search and
recommend, and the order's effect is measured rather than assumed.

A recommend score that differs is put down to the declared order only when proved: the
project's score of the candidate rewritten in the order the release's recommender was given
(recorded inside the release's process) equals the release's score (`classify_score`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from devtools.parity.compare import Tally

SCORE_TOLERANCE = {"search": 1e-9, "recommend": 1e-9, "review": 1e-6}
SAY = "Say: could you tell me more?"
NOTHING = "zzzz qqqq"  # words no product holds
UNKIND_REVIEW = "Terrible. Broke on day one, do not buy."
NEIGHBOURS = 29  # the recommender reads the last 30 items: the target and 29 before it
MIN_BEFORE_TARGET = 4  # a list cut to end with the target keeps at least these items before it
POOL = 300  # recommend lists tried per instruction (subsets of the neighbours, the target last or first)
ORDER_NOTE = "recommend: differs only by the declared ASIN order (proved with the release's order)"
SetOrders = Callable[[list[str]], dict[str, list[str]]]


@dataclass(frozen=True)
class Target:
    """What the candidates of one instruction are made from: its last task (the one both sides
    score against) and the step-1 example."""

    instruction: str
    kind: str
    label: str
    title: str
    asin: str
    review: str
    history: tuple[str, ...]  # the user's ASINs before the task, oldest first


def last_tasks(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """instruction -> its last task: both sides score a repeated instruction against that one."""
    return {task["task"]: task for task in tasks}


def target_of(task: dict[str, Any], history: Callable[[dict[str, Any]], list[str]], label: str = "") -> Target:
    product = task["target"]["product_info"]
    return Target(task["task"], task["type"], label, str(product["title"]), product["parent_asin"],
                  task["target"]["review"]["text"], tuple(history(task)))


def targets_of(examples: list[dict[str, Any]], tasks: list[dict[str, Any]],
               history: Callable[[dict[str, Any]], list[str]]) -> list[Target]:
    """One target per instruction of `examples` (step 1's parameter examples), in their order."""
    by_instruction, seen, targets = last_tasks(tasks), set(), []
    for example in examples:
        task = by_instruction.get(example["instruction"])
        if task is None or example["instruction"] in seen:
            continue
        seen.add(example["instruction"])
        targets.append(target_of(task, history, example["label"]))
    return targets


def fixed_candidates(target: Target) -> list[str]:
    """The label and the outputs that decide how a candidate is read (a message, a stop), and
    for each type the texts that hit (the title, the real review) and that score nothing."""
    options = [target.label, "stop", SAY, " ".join(target.instruction.split()[:4])]
    if target.kind == "search":
        words = target.title.split()
        half = max(1, len(words) // 2)
        options += [target.title, " ".join(words[:half]), " ".join(words[half:]), " ".join(words[:3]), NOTHING]
    elif target.kind == "review":
        options += ["", target.label[: len(target.label) // 2], UNKIND_REVIEW, target.review]
    else:
        recent = list(target.history[-3:])
        options += [target.asin, ", ".join([*recent, target.asin]), ", ".join([target.asin, *recent]),
                    ",".join(recent)]
    return list(dict.fromkeys(options))


def recommend_pool(target: Target, neighbours: list[str], rng: random.Random, size: int = POOL) -> list[str]:
    """Lists holding the target among its neighbours (best first): all of them with the target
    last and first, then random subsets in random orders with the target last (where the
    recommender puts it in its top 10) or first, some with the user's own latest ASINs in front."""
    near = [asin for asin in neighbours if asin != target.asin][:NEIGHBOURS]
    pool = [", ".join([*near[::-1], target.asin]), ", ".join([target.asin, *near[::-1]])]
    while near and len(pool) < size:
        chosen = rng.sample(near, rng.randint(min(8, len(near)), len(near)))
        chosen.insert(len(chosen) if rng.random() < 0.5 else 0, target.asin)
        if target.history and rng.random() < 0.25:
            chosen = [*target.history[-2:], *chosen]
        pool.append((", " if rng.random() < 0.5 else ",").join(chosen))
    return list(dict.fromkeys(pool))


HIT_CLASSES = {(True, True): "both", (True, False): "project", (False, True): "release", (False, False): "neither"}
PICKED = {"both": 2, "project": 2, "release": 1, "neither": 1}  # recommend lists per instruction, by hit class


def ending_with_target(target: Target, order: list[str]) -> str | None:
    """The items the release's order puts before the target, then the target: a list the
    release likely reads in its own written order (checked again, never assumed)."""
    before = order[:order.index(target.asin)] if target.asin in order else []
    return ", ".join([*before, target.asin]) if len(before) >= MIN_BEFORE_TARGET else None


def recommend_lists(targets: list[Target], recommender: Any, set_orders: SetOrders, seed: int = 0
                    ) -> dict[str, dict[str, list[str]]]:
    """instruction -> hit class -> lists: `both` hit (the target in the top 10) in the
    project's order and in the release's, `project` or `release` in that one only, `neither`.
    The lists: each target's pool (`recommend_pool`), and each pool list cut to the items the
    release's order puts before the target (`ending_with_target`: where the target ends both
    orders, both may hit). Hits by the project's recommender (`recommend_batch`), the release's
    order from `set_orders`, asked for every list."""
    from PUMA.prompting import parse_asins

    rng = random.Random(seed)
    recommend = [t for t in targets if t.kind == "recommend"]
    after = recommender.recommend_batch([[t.asin] for t in recommend], k=NEIGHBOURS + 1) if recommend else []
    pools = {t.instruction: recommend_pool(t, near, rng) for t, near in zip(recommend, after)}
    orders = set_orders([c for pool in pools.values() for c in pool]) if pools else {}
    for target in recommend:
        pool = pools[target.instruction]
        cut = (ending_with_target(target, orders[c]) for c in pool)
        pools[target.instruction] = list(dict.fromkeys([*pool, *(c for c in cut if c)]))
    orders.update(set_orders([c for pool in pools.values() for c in pool if c not in orders]) if pools else {})
    lists: dict[str, dict[str, list[str]]] = {}
    for target in recommend:
        pool = pools[target.instruction]
        hits = [target.asin in top for top in recommender.recommend_batch(
            [parse_asins(c, keep_empty=True) for c in pool] + [orders[c] for c in pool], k=10)]
        classes = lists.setdefault(target.instruction, {name: [] for name in HIT_CLASSES.values()})
        for candidate, project, release in zip(pool, hits[:len(pool)], hits[len(pool):]):
            classes[HIT_CLASSES[project, release]].append(candidate)
    return lists


def crafted_candidates(targets: list[Target], recommender: Any, set_orders: SetOrders, seed: int = 0
                       ) -> dict[str, list[str]]:
    """instruction -> its candidates (module docstring): the fixed ones, and recommend lists of
    each hit class (`recommend_lists`, `PICKED` of each)."""
    lists = recommend_lists(targets, recommender, set_orders, seed)
    candidates = {}
    for target in targets:
        picked = [c for name, count in PICKED.items() for c in lists.get(target.instruction, {}).get(name, [])[:count]]
        candidates[target.instruction] = list(dict.fromkeys(fixed_candidates(target) + picked))
    return candidates


# --- the release's order, recorded ---------------------------------------------------------------------------------
def release_orders(tasks: list[dict[str, Any]], candidates: dict[str, list[str]],
                   calls: list[list[str]]) -> dict[str, dict[str, list[str]]]:
    """instruction -> {candidate: the ASIN list the release's recommender was given for it}, from
    test.py's calls in order (every recommend task of the file, each of its candidates once)."""
    expected = [(t["task"], c) for t in tasks if t["type"] == "recommend" for c in candidates.get(t["task"], [])]
    if len(expected) != len(calls):
        raise ValueError(f"the release's test.py made {len(calls)} recommender calls where its candidates "
                         f"ask for {len(expected)}")
    orders: dict[str, dict[str, list[str]]] = {}
    for (instruction, candidate), sequence in zip(expected, calls):
        orders.setdefault(instruction, {})[candidate] = sequence
    return orders


def reordered_candidates(orders: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, str]]:
    """instruction -> {candidate: the candidate rewritten in the release's order}, for the
    candidates whose order the project reads differently."""
    from PUMA.prompting import parse_asins

    rewritten: dict[str, dict[str, str]] = {}
    for instruction, by_candidate in orders.items():
        for candidate, sequence in by_candidate.items():
            if parse_asins(candidate, keep_empty=True) != sequence:
                rewritten.setdefault(instruction, {})[candidate] = ", ".join(sequence)
    return rewritten


# --- comparisons ---------------------------------------------------------------------------------------------------
def classify_score(kind: str, release: float, project: float | None, reordered: float | None = None) -> str:
    """`identical`, `order` (a recommend score that differs, and the project's score of the
    candidate in the release's order is the release's) or `differs`."""
    tolerance = SCORE_TOLERANCE.get(kind, 1e-9)
    if project is not None and abs(release - project) <= tolerance:
        return "identical"
    if kind == "recommend" and reordered is not None and abs(release - reordered) <= tolerance:
        return "order"
    return "differs"


def compare_scores(theirs: dict[str, dict[str, float]], ours: dict[str, dict[str, float]],
                   types: dict[str, str], reordered: dict[str, dict[str, float]] | None = None) -> Tally:
    """Every candidate's score (instruction -> {candidate: score}) within its type's tolerance;
    `reordered`: the project's scores of recommend candidates rewritten in the release's order."""
    tally = Tally()
    if set(theirs) != set(ours):
        tally.add("instructions", False, {"release_only": sorted(set(theirs) - set(ours))[:3],
                                          "project_only": sorted(set(ours) - set(theirs))[:3]})
    for instruction, scored in theirs.items():
        kind = types.get(instruction, "?")
        for candidate, score in scored.items():
            mine = ours.get(instruction, {}).get(candidate)
            verdict = classify_score(kind, score, mine, (reordered or {}).get(instruction, {}).get(candidate))
            if verdict == "order":
                tally.note(ORDER_NOTE)
            tally.add(kind, verdict != "differs", None if verdict != "differs" else {
                "instruction": instruction[:60], "candidate": candidate[:60], "release": score, "project": mine})
    return tally


def scores_above_zero(theirs: dict[str, dict[str, float]], ours: dict[str, dict[str, float]], types: dict[str, str],
                      reordered: dict[str, dict[str, float]] | None = None,
                      required: tuple[str, ...] = ("search", "recommend")) -> Tally:
    """The candidates both sides score above 0, compared; a type of `required` with none makes the
    item not comparable on these inputs (said, with which type: the comparison would be blind to
    ranking and hits)."""
    tally = Tally()
    for instruction, scored in theirs.items():
        kind = types.get(instruction, "?")
        for candidate, score in scored.items():
            mine = ours.get(instruction, {}).get(candidate)
            if score > 0 and mine is not None and mine > 0:
                verdict = classify_score(kind, score, mine, (reordered or {}).get(instruction, {}).get(candidate))
                tally.add(kind, verdict != "differs", None if verdict != "differs" else {
                    "instruction": instruction[:60], "candidate": candidate[:60], "release": score, "project": mine})
    missing = [kind for kind in required if kind not in tally.by_type]
    if missing:  # the inputs' property: said, never counted as a difference
        tally.cannot_compare(f"no {' or '.join(missing)} candidate scored above 0 on both sides")
    return tally


def above_zero_counts(theirs: dict[str, dict[str, float]], ours: dict[str, dict[str, float]],
                      types: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per type: candidates, and how many score above 0 on the release's side, the project's, both."""
    counts: dict[str, dict[str, int]] = {}
    for instruction, scored in theirs.items():
        row = counts.setdefault(types.get(instruction, "?"), {"candidates": 0, "release": 0, "project": 0, "both": 0})
        for candidate, score in scored.items():
            mine = ours.get(instruction, {}).get(candidate) or 0.0
            row["candidates"] += 1
            row["release"] += score > 0
            row["project"] += mine > 0
            row["both"] += score > 0 and mine > 0
    return counts


def order_effect(theirs: dict[str, dict[str, float]], ours: dict[str, dict[str, float]], types: dict[str, str],
                 reordered: dict[str, dict[str, float]], rewritten: dict[str, dict[str, str]]) -> dict[str, Any]:
    """What the declared order changes: recommend candidates read in another order, those whose
    score it changes (proved), and the mean and largest change."""
    changes = []
    for instruction, by_candidate in rewritten.items():
        for candidate in by_candidate:
            release, project = theirs[instruction][candidate], ours.get(instruction, {}).get(candidate)
            verdict = classify_score(types.get(instruction, "?"), release, project,
                                     reordered.get(instruction, {}).get(candidate))
            if verdict == "order":
                changes.append(abs(release - project))
    recommend = sum(len(s) for i, s in theirs.items() if types.get(i) == "recommend")
    return {"recommend_candidates": recommend, "read_in_another_order": sum(len(c) for c in rewritten.values()),
            "score_changed": len(changes), "mean_change": sum(changes) / len(changes) if changes else 0.0,
            "max_change": max(changes, default=0.0)}


def release_order_scores(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]],
                         types: dict[str, str], reordered: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The project's scores with each candidate whose difference is the declared order (proved)
    scored in the release's order: the scores the release's pairs are compared against."""
    merged = {instruction: dict(scored) for instruction, scored in ours.items()}
    for instruction, scored in theirs.items():
        for candidate, score in scored.items():
            proof = reordered.get(instruction, {}).get(candidate)
            if classify_score(types.get(instruction, "?"), score, merged.get(instruction, {}).get(candidate),
                              proof) == "order":
                merged[instruction][candidate] = proof
    return merged


def informative_pairs(pairs: list[dict[str, Any]], scores: dict[str, dict[str, float]]) -> int:
    """Pairs whose chosen candidate scores above the rejected one."""
    return sum(1 for pair in pairs if scores.get(pair["instruction"], {}).get(pair["chosen"], 0.0)
               > scores.get(pair["instruction"], {}).get(pair["rejected"], 0.0))
