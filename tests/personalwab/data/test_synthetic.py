"""The synthetic PersonalWAB: official layout, determinism, the split rule, exact counts
and the personalization signal that makes reading a user's history pay off (sequential structure
a next-item recommender can learn)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from PersonalWAB.agents.heuristic import recommendation_sequence
from PersonalWAB.data.__main__ import main as data_cli
from PersonalWAB.data.loader import BenchmarkData, load_benchmark_data
from PersonalWAB.data.schema import PROFILE_FIELDS, TASK_TYPES
from PersonalWAB.data.synthetic import SCALES, generate_synthetic
from PersonalWAB.engines.recommender.engine import SASRecRecommender
from PersonalWAB.engines.recommender.train import (
    TOP_K,
    SASRecTrainConfig,
    split_sequences,
    train_sasrec,
    user_sequences,
)
from PersonalWAB.envs.pwab.scoring import rank_score
from PersonalWAB.errors import DataError
from PersonalWAB.memory import retrieve_memory
from PersonalWAB.paths import OFFICIAL_DATA_DIR, SYNTHETIC_MANIFEST, ArtifactPaths
from tests.conftest import REPO_ROOT

FIRST_MS, LAST_MS = 1514764800000, 1704067200000  # 2018-01-01 and 2024-01-01, UTC


def _file_bytes(folder: Path) -> dict[str, bytes]:
    """The generator's files (not the loader's parsed-data cache, which loading them adds)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).parts[0] != "cache"}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy: the shared conftest one gets search indexes and a model written into it."""
    out = tmp_path_factory.mktemp("synthetic_tiny")
    generate_synthetic(out, scale="tiny", seed=0)
    return out


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> BenchmarkData:
    return load_benchmark_data(tiny_dir)


def test_tiny_loads_cleanly_in_the_official_layout(tiny_dir: Path, tiny: BenchmarkData) -> None:
    names = sorted(p.name for p in tiny_dir.iterdir() if p.is_file())
    assert names == ["all_products_part_1.json", "all_products_part_2.json", SYNTHETIC_MANIFEST,
                     "user_history_part_1.json", "user_history_part_2.json", "user_instructions.json",
                     "user_profiles.json"]
    assert tiny.warnings == []
    for pattern in ("all_products_part_*.json", "user_history_part_*.json"):
        parts = [json.loads(p.read_text()) for p in sorted(tiny_dir.glob(pattern))]
        assert len(parts) == 2 and all(parts), "both parts hold part of the data"
    plan = SCALES["tiny"]
    assert len(tiny.products) == plan.products and len(tiny.profiles) == plan.users
    assert sum(len(h) for h in tiny.histories.values()) == plan.behaviours


def test_same_seed_gives_byte_identical_files(tmp_path: Path, tiny_dir: Path) -> None:
    generate_synthetic(tmp_path / "again", scale="tiny", seed=0)
    assert _file_bytes(tmp_path / "again") == _file_bytes(tiny_dir)
    generate_synthetic(tmp_path / "other", scale="tiny", seed=1)
    assert _file_bytes(tmp_path / "other") != _file_bytes(tiny_dir)


@pytest.mark.parametrize("hash_seed", ["1", "4242"])
def test_output_does_not_depend_on_hash_randomization(tmp_path: Path, tiny_dir: Path, hash_seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    code = ("import sys; from PersonalWAB.data.synthetic import generate_synthetic; "
            "generate_synthetic(sys.argv[1], scale='tiny', seed=0)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, cwd=REPO_ROOT, check=True)
    assert _file_bytes(tmp_path) == _file_bytes(tiny_dir)


def test_histories_follow_the_split_rule(tiny: BenchmarkData) -> None:
    for user_id, behaviours in tiny.histories.items():
        n = len(behaviours)
        assert n >= 10
        times = [b["review"]["timestamp"] for b in behaviours]
        assert all(a < b for a, b in zip(times, times[1:])), f"{user_id}: timestamps not strictly increasing"
        assert FIRST_MS <= times[0] and times[-1] < LAST_MS
        expected = ["history"] * (n * 8 // 10) + ["train"] * (n * 9 // 10 - n * 8 // 10)
        expected += ["test"] * (n - len(expected))
        assert [b["split"] for b in behaviours] == expected
        for b in behaviours:
            assert b["review"]["parent_asin"] == b["product_info"]["parent_asin"]
            assert b["product_info"] == tiny.products[b["product_info"]["parent_asin"]]
        assert len({b["product_info"]["parent_asin"] for b in behaviours}) == n, "a product is bought once per user"


def test_tasks_target_behaviours_of_their_own_split(tiny: BenchmarkData) -> None:
    for split, tasks in tiny.tasks.items():
        for task in tasks:
            by_time = {b["review"]["timestamp"]: b for b in tiny.histories[task["user_id"]]}
            behaviour = by_time[task["timestamp"]]
            assert behaviour["split"] == split
            assert task["target"] == {"product_info": behaviour["product_info"], "review": behaviour["review"]}
            assert task["timestamp"] == task["target"]["review"]["timestamp"]
            assert all(b["review"]["timestamp"] < task["timestamp"]
                       for b in tiny.behaviours_before(task["user_id"], task["timestamp"]))


def test_task_counts_and_types_match_the_plan(tiny: BenchmarkData) -> None:
    plan = SCALES["tiny"]
    for split, mix in (("train", plan.train_mix), ("test", plan.test_mix)):
        counts = Counter(task["type"] for task in tiny.tasks[split])
        assert [counts[t] for t in TASK_TYPES] == list(mix)
    assert len({t["user_id"] for t in tiny.tasks["train"]}) == plan.users_with_train
    assert len({t["user_id"] for t in tiny.tasks["test"]}) == plan.users


def test_instruction_texts_are_unique_within_each_split(tiny: BenchmarkData) -> None:
    for tasks in tiny.tasks.values():
        texts = [task["task"] for task in tasks]
        assert len(set(texts)) == len(texts)
        assert all(text.strip() == text and len(text.split()) >= 4 for text in texts)


def test_manifest_marks_the_data_as_synthetic(tiny: BenchmarkData) -> None:
    manifest = tiny.synthetic_manifest
    assert tiny.is_synthetic and manifest["synthetic"] is True
    assert (manifest["scale"], manifest["seed"]) == ("tiny", 0)
    assert "not comparable" in manifest["note"]
    counts = manifest["counts"]
    assert counts["products"] == len(tiny.products) and counts["test_tasks"] == len(tiny.tasks["test"])
    assert counts["test_types"] == dict(zip(TASK_TYPES, SCALES["tiny"].test_mix))


def test_item_map_numbers_the_catalogue_in_order(tiny_dir: Path, tiny: BenchmarkData) -> None:
    item_map = json.loads(ArtifactPaths.for_data_dir(tiny_dir).item_map.read_text())
    assert list(item_map) == list(tiny.products)
    assert list(item_map.values()) == list(range(1, len(tiny.products) + 1))


def test_products_look_like_amazon_products(tiny: BenchmarkData) -> None:
    assert len({p["main_category"] for p in tiny.products.values()} - {None}) == 5
    for asin, product in tiny.products.items():
        assert re.fullmatch(r"B0[A-Z0-9]{8}", asin)
        brand = product["details"]["Brand"]  # the store's name, also where `store` is null
        assert brand in product["title"] and product["store"] in (brand, None)
        assert 3 <= len(product["features"]) <= 5 and 1 <= len(product["description"]) <= 2
        assert len(product["categories"]) == 3
        assert 1.0 <= product["average_rating"] <= 5.0 and product["rating_number"] >= 1
        assert product["price"] is None or product["price"] == "None" or product["price"] > 0


def test_profiles_have_the_eleven_fields_and_name_the_usual_stores(tiny: BenchmarkData) -> None:
    named = 0
    for user_id, profile in tiny.profiles.items():
        assert list(profile) == list(PROFILE_FIELDS) and all(isinstance(v, str) and v for v in profile.values())
        assert profile["Price Sensitivity"] in ("Low", "Medium", "High")
        stores = Counter(b["product_info"]["store"] for b in tiny.histories[user_id] if b["product_info"]["store"])
        top_store = stores.most_common(1)[0][0]
        named += top_store in profile["Brand Preference"].split(", ")
    assert named >= 0.8 * len(tiny.profiles)


def test_history_predicts_the_target_store(tmp_path: Path) -> None:
    """Targets come from the stores a user keeps buying from, far above chance."""
    generate_synthetic(tmp_path, scale="small", seed=0)
    data = load_benchmark_data(tmp_path)
    stores_per_category = Counter(p["main_category"] for p in data.products.values())
    hits = chance = 0
    tasks = [t for split in data.tasks.values() for t in split if t["type"] in ("search", "recommend")]
    for task in tasks:
        earlier = data.behaviours_before(task["user_id"], task["timestamp"])
        top3 = [s for s, _ in Counter(b["product_info"]["store"] for b in earlier
                                      if b["product_info"]["store"] is not None).most_common(3)]
        target = task["target"]["product_info"]
        hits += target["store"] in top3  # a null store is never a hit
        share = Counter(p["store"] for p in data.products.values() if p["main_category"] == target["main_category"])
        chance += sum(share[s] for s in top3) / stores_per_category[target["main_category"]]
    assert hits / len(tasks) > 0.5 and hits > 4 * chance


def test_refuses_the_official_folder_and_foreign_data(tmp_path: Path) -> None:
    before = sorted(OFFICIAL_DATA_DIR.rglob("*")) if OFFICIAL_DATA_DIR.exists() else []
    for target in (OFFICIAL_DATA_DIR, OFFICIAL_DATA_DIR / "nested"):
        with pytest.raises(DataError, match="official data folder"):
            generate_synthetic(target, scale="tiny")
    assert (sorted(OFFICIAL_DATA_DIR.rglob("*")) if OFFICIAL_DATA_DIR.exists() else []) == before
    (tmp_path / "user_instructions.json").write_text('{"train": [], "test": []}')
    with pytest.raises(DataError, match="refusing to overwrite"):
        generate_synthetic(tmp_path, scale="tiny")


def test_regenerating_with_another_seed_drops_stale_artifacts(tmp_path: Path) -> None:
    generate_synthetic(tmp_path, scale="tiny", seed=0)
    artifacts = ArtifactPaths.for_data_dir(tmp_path)
    artifacts.bm25s_indexes.mkdir(parents=True)
    artifacts.checkpoint.write_bytes(b"model")
    generate_synthetic(tmp_path, scale="tiny", seed=0)
    assert artifacts.bm25s_indexes.exists() and artifacts.checkpoint.exists(), "same data: artefacts still valid"
    generate_synthetic(tmp_path, scale="tiny", seed=3)
    assert not artifacts.bm25s_indexes.exists() and not artifacts.checkpoint.exists()


def test_cli_prints_a_synthetic_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert data_cli(["synthetic", "--scale", "tiny", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" in out and "not comparable to the paper" in out
    assert data_cli(["synthetic", "--scale", "tiny", "--out", str(OFFICIAL_DATA_DIR)]) == 2


def test_full_plan_matches_the_published_statistics() -> None:
    full = SCALES["full"]
    assert (full.users, full.users_with_train, full.products) == (1000, 939, 35_772)
    assert (full.train_tasks, full.test_tasks) == (6_896, 2_174)
    assert full.test_mix == (694, 757, 723)
    assert full.behaviours == 40_600 and full.behaviours // full.users >= 10


@pytest.mark.slow
def test_full_scale_hits_the_published_counts(tmp_path: Path) -> None:
    counts = generate_synthetic(tmp_path, scale="full", seed=0)["counts"]
    assert (counts["users"], counts["users_with_train_tasks"]) == (1000, 939)
    assert (counts["products"], counts["behaviours"]) == (35_772, 40_600)
    assert (counts["train_tasks"], counts["test_tasks"]) == (6_896, 2_174)
    assert counts["test_types"] == {"search": 694, "recommend": 757, "review": 723}
    assert abs(counts["target_side_products"] - 8_236) < 400
    # validated in a child process so the big parsed data is not kept in this session's cache
    check = subprocess.run([sys.executable, "-m", "PersonalWAB.data", "validate", "--data_dir", str(tmp_path)],
                           cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert "valid (synthetic" in check.stdout and "warning" not in check.stdout


# -- the histories carry sequential structure a next-item recommender can learn -----------------------

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
