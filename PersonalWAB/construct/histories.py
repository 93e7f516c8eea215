"""Steps `join` and `split`: products for the candidates' reviews, then the benchmark's
users with their time-ordered behaviours, the 80/10/10 split and the task plan.

`join` streams the metadata files once and keeps only the products the candidates
reviewed. `split` turns each candidate's reviews into behaviours (a review whose product
has no metadata is dropped; a product reviewed twice counts once, at its first review),
accepts candidates in their sampled order until `num_users` still fit the interaction
limits, splits every history by time (first 80% history, next 10% train targets, last
10% test targets) and plans which task types each target behaviour gets.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from PersonalWAB.progress import progress_bar

from PersonalWAB.construct.config import BuildConfig
from PersonalWAB.data import amazon_raw
from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.errors import DataError

Log = Callable[[str], None]
MIN_REVIEW_WORDS = 3  # a review task needs a real review to score against


def join_products(config: BuildConfig, selection: dict[str, Any], log: Log) -> dict[str, Any]:
    """The `join` step's output: official product records of every ASIN the candidates reviewed."""
    needed = {r["parent_asin"] for reviews in selection["reviews"].values() for r in reviews}
    products: dict[str, dict[str, Any]] = {}
    digests = []
    for category in config.categories:
        path = amazon_raw.locate(config.raw_dir, amazon_raw.meta_file(category))
        digest = amazon_raw.FileDigest(str(path))
        for number, record in progress_bar(iterable=amazon_raw.iter_records(path, digest),
                                           desc=f"joining {category} metadata", unit=" products", mininterval=2.0):
            asin = record.get("parent_asin")
            if asin in needed and asin not in products:
                products[asin] = amazon_raw.to_product(record, f"{path}:{number}")
        digests.append({"role": "meta", "category": category, **digest.as_dict()})
    log(f"join: metadata for {len(products)} of {len(needed)} reviewed products")
    return {"products": {asin: products[asin] for asin in sorted(products)},
            "missing_products": len(needed) - len(products), "sources": digests}


def split_label(position: int, total: int) -> str:
    """The 80/10/10 rule on a time-ordered list: history, then train targets, then test targets."""
    return "history" if position < total * 8 // 10 else "train" if position < total * 9 // 10 else "test"


def behaviours_of(reviews: list[dict[str, Any]], products: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Time-ordered behaviours with their split; reviews without product metadata dropped,
    a product kept at its first review only."""
    kept, seen = [], set()
    for review in sorted(reviews, key=lambda r: (r["timestamp"], r["parent_asin"])):
        asin = review["parent_asin"]
        if asin in products and asin not in seen:
            seen.add(asin)
            kept.append({"product_info": products[asin], "review": review})
    return [{**b, "split": split_label(i, len(kept))} for i, b in enumerate(kept)]


def task_types_for(behaviour: dict[str, Any]) -> list[str]:
    """Task types a target behaviour can carry: reviews need review text to score against."""
    words = len(behaviour["review"]["text"].split())
    return [t for t in TASK_TYPES if t != "review" or words >= MIN_REVIEW_WORDS]


def _draw_count(rng: random.Random, rate: float) -> int:
    whole = math.floor(rate)
    return whole + (rng.random() < rate - whole)


def plan_tasks(config: BuildConfig, histories: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """(split, user, behaviour position, type) of every task, in split, user and time order.

    Each target behaviour gets on average `<split>_tasks_per_target` distinct task types
    (drawn with a seeded generator); a user whose draws gave no test task gets one on a
    random test target, so every user is evaluated.
    """
    rng = random.Random(f"{config.seed}:tasks")
    rates = {"train": config.train_tasks_per_target, "test": config.test_tasks_per_target}
    plan = []
    for split in ("train", "test"):
        for user_id in sorted(histories):
            behaviours = histories[user_id]
            targets = [i for i, b in enumerate(behaviours) if b["split"] == split]
            chosen = []
            for i in targets:
                options = task_types_for(behaviours[i])
                count = min(_draw_count(rng, rates[split]), len(options))
                chosen += [(i, t) for t in sorted(rng.sample(options, count), key=TASK_TYPES.index)]
            if split == "test" and not chosen and targets:
                i = rng.choice(targets)
                chosen.append((i, rng.choice(task_types_for(behaviours[i]))))
            plan += [{"split": split, "user_id": user_id, "index": i, "type": t} for i, t in chosen]
    return plan


def split_users(config: BuildConfig, selection: dict[str, Any], joined: dict[str, Any], log: Log) -> dict[str, Any]:
    """The `split` step's output: accepted users' behaviours, the task plan and what was dropped."""
    products = joined["products"]
    histories: dict[str, list[dict[str, Any]]] = {}
    passed_over = 0
    for user_id in selection["candidates"]:
        if len(histories) == config.num_users:
            break
        behaviours = behaviours_of(selection["reviews"][user_id], products)
        if config.min_interactions <= len(behaviours) <= config.max_interactions:
            histories[user_id] = behaviours
        else:
            passed_over += 1
    if len(histories) < config.num_users:
        raise DataError(f"only {len(histories)} of {len(selection['candidates'])} candidates keep "
                        f"{config.min_interactions}+ reviews once products without metadata and repeated reviews "
                        f"are dropped; ask for fewer --num_users or lower --min_interactions")
    histories = {u: histories[u] for u in sorted(histories)}
    plan = plan_tasks(config, histories)
    log(f"split: {len(histories)} users ({passed_over} candidates passed over), "
        f"{sum(len(h) for h in histories.values())} behaviours, {len(plan)} planned tasks")
    return {"histories": histories, "plan": plan, "candidates_passed_over": passed_over}
