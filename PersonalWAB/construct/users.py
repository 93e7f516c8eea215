"""Step `select`: which users the benchmark is built from.

Two streaming passes over the chosen categories' review files. The first counts every
user's reviews and in how many categories they wrote them; users are kept as 64-bit
hashes of their ids in numpy arrays, because the paper's five categories hold about 200
million reviews by tens of millions of users, far too many for a dictionary of strings.
Among the users whose counts fit the settings, a seeded permutation (of the sorted
hashes, so the order of the files and lines does not matter) picks the benchmark's
candidates, a reserve (replacing candidates who lose reviews to missing metadata or
duplicates in the next steps) and the extra users whose reviews only train SASRec. The
second pass collects those users' reviews.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PersonalWAB.progress import progress_bar

from PersonalWAB.construct.config import BuildConfig
from PersonalWAB.data import amazon_raw
from PersonalWAB.errors import DataError

Log = Callable[[str], None]


def user_hash(user_id: str) -> int:
    """A stable signed 64-bit hash of a user id."""
    return int.from_bytes(hashlib.blake2b(user_id.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def review_paths(config: BuildConfig) -> list[tuple[str, Path]]:
    return [(c, amazon_raw.locate(config.raw_dir, amazon_raw.review_file(c))) for c in config.categories]


def _user_id(record: dict[str, Any], where: str) -> str:
    user_id = record.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        raise DataError(f"{where}: 'user_id' must be a non-empty string, got {user_id!r}")
    return user_id


def count_users(files: list[tuple[str, Path]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Sorted user hashes, their review counts and category counts, and the files' digests."""
    per_file: list[np.ndarray] = []
    digests = []
    for category, path in files:
        hashes = array("q")
        digest = amazon_raw.FileDigest(str(path))
        for number, record in progress_bar(iterable=amazon_raw.iter_records(path, digest),
                                           desc=f"counting {category} reviews", unit=" reviews", mininterval=2.0):
            hashes.append(user_hash(_user_id(record, f"{path}:{number}")))
        if not hashes:  # the category would silently add no users, and no behaviours to any
            raise DataError(f"{path}: holds no reviews (an empty or blank file); fetch the {category} reviews "
                            "again or leave the category out of --categories")
        per_file.append(np.frombuffer(hashes, dtype=np.int64) if hashes else np.zeros(0, dtype=np.int64))
        digests.append({"role": "reviews", "category": category, **digest.as_dict()})
    users, counts = np.unique(np.concatenate(per_file), return_counts=True)
    _, categories = np.unique(np.concatenate([np.unique(h) for h in per_file]), return_counts=True)
    return users, counts, categories, digests


def choose(config: BuildConfig, users: np.ndarray, counts: np.ndarray,
           categories: np.ndarray) -> tuple[list[int], list[int], int]:
    """Candidate hashes (benchmark users first, then the reserve), extra SASRec user hashes,
    and how many users were eligible."""
    eligible = users[(counts >= config.min_interactions) & (counts <= config.max_interactions)
                     & (categories >= config.min_categories)]
    if len(eligible) < config.num_users:
        raise DataError(
            f"only {len(eligible)} users have {config.min_interactions}-{config.max_interactions} reviews in at least "
            f"{config.min_categories} of {', '.join(config.categories)}; ask for fewer --num_users or widen "
            "--min_interactions/--max_interactions/--min_categories")
    order = eligible[np.random.default_rng(config.seed).permutation(len(eligible))].tolist()
    reserve = min(len(eligible) - config.num_users, config.num_users // 20 + 2)
    cut = config.num_users + reserve
    return order[:cut], order[cut : cut + config.sasrec_extra_users], len(eligible)


def collect(files: list[tuple[str, Path]], candidates: list[int], extra: list[int]) -> tuple[
        dict[str, list[dict[str, Any]]], dict[str, list[tuple[int, str]]]]:
    """Official-format reviews of the candidates, and (timestamp, ASIN) pairs of the extra users."""
    wanted, helpers = set(candidates), set(extra)
    reviews: dict[str, list[dict[str, Any]]] = {}
    sequences: dict[str, list[tuple[int, str]]] = {}
    for category, path in files:
        for number, record in progress_bar(iterable=amazon_raw.iter_records(path),
                                           desc=f"collecting {category} reviews", unit=" reviews", mininterval=2.0):
            where = f"{path}:{number}"
            hashed = user_hash(_user_id(record, where))
            if hashed in wanted:
                reviews.setdefault(record["user_id"], []).append(amazon_raw.to_review(record, where))
            elif hashed in helpers:
                _, parent_asin, timestamp = amazon_raw.review_keys(record, where)
                sequences.setdefault(record["user_id"], []).append((timestamp, parent_asin))
    return reviews, sequences


def _ordered(hashes: list[int], user_ids: list[str]) -> list[str]:
    """User ids in the order of their hashes (ids sharing a hash, a near-impossible collision, by id)."""
    rank = {h: i for i, h in enumerate(hashes)}
    return sorted(user_ids, key=lambda u: (rank[user_hash(u)], u))


def extra_sequence(pairs: list[tuple[int, str]]) -> list[str]:
    """An extra user's ASINs in time order, each product once (its first review)."""
    seen: set[str] = set()
    out = []
    for _, asin in sorted(pairs):
        if asin not in seen:
            seen.add(asin)
            out.append(asin)
    return out


def select_users(config: BuildConfig, log: Log) -> dict[str, Any]:
    """The `select` step's output."""
    files = review_paths(config)
    users, counts, categories, digests = count_users(files)
    candidates, extra, eligible = choose(config, users, counts, categories)
    log(f"select: {len(users)} users in {len(files)} review files, {eligible} eligible; "
        f"{len(candidates)} candidates for {config.num_users} benchmark users, {len(extra)} extra SASRec users")
    reviews, sequences = collect(files, candidates, extra)
    for user_reviews in reviews.values():
        user_reviews.sort(key=lambda r: (r["timestamp"], r["parent_asin"]))
    return {
        "users_seen": len(users),
        "eligible_users": eligible,
        "candidates": _ordered(candidates, list(reviews)),
        "reviews": {u: reviews[u] for u in sorted(reviews)},
        "extra_sequences": {u: extra_sequence(sequences[u]) for u in sorted(sequences)},
        "sources": digests,
    }
