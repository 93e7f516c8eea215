"""SASRec recommender: official checkpoint layout, recommendation rules, training (a model that does
not beat popularity is warned about), errors, and a checkpoint keyed to the data it was trained on
(one of another data folder or of changed files is refused or retrained, never used)."""

from __future__ import annotations

import json
import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from PersonalWAB.build import _recommender_is_stale
from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.engines.recommender import train
from PersonalWAB.engines.recommender.engine import SASRecRecommender, checkpoint_record_path
from PersonalWAB.engines.recommender.sasrec import SASRec, SASRecConfig
from PersonalWAB.engines.recommender.train import (
    SASRecTrainConfig,
    popularity_warning,
    split_sequences,
    train_sasrec,
    user_sequences,
)
from PersonalWAB.engines.shared import Engines
from PersonalWAB.errors import DataError
from tests.conftest import rewrite

OFFICIAL_USER_NUM = 19005
OFFICIAL_ITEM_NUM = 104284
BLOCK_KEYS = (
    "attention_layernorms.{i}.weight",
    "attention_layernorms.{i}.bias",
    "attention_layers.{i}.in_proj_weight",
    "attention_layers.{i}.in_proj_bias",
    "attention_layers.{i}.out_proj.weight",
    "attention_layers.{i}.out_proj.bias",
    "forward_layernorms.{i}.weight",
    "forward_layernorms.{i}.bias",
    "forward_layers.{i}.conv1.weight",
    "forward_layers.{i}.conv1.bias",
    "forward_layers.{i}.conv2.weight",
    "forward_layers.{i}.conv2.bias",
)
OFFICIAL_KEYS = {
    "item_emb.weight",
    "pos_emb.weight",
    "last_layernorm.weight",
    "last_layernorm.bias",
    *(key.format(i=i) for i in range(2) for key in BLOCK_KEYS),
}


def asin(item_id: int) -> str:
    return f"B{item_id:09d}"


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A randomly weighted model of the official checkpoint's size, saved the way the release saved it."""
    torch.manual_seed(0)
    model = SASRec(OFFICIAL_USER_NUM, OFFICIAL_ITEM_NUM, SASRecConfig())
    with torch.no_grad():  # move every weight off its default so a mis-loaded tensor shows
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
        model.item_emb.weight[0].zero_()
        model.pos_emb.weight[0].zero_()
    model.eval()
    directory = tmp_path_factory.mktemp("official")
    checkpoint = directory / "pwab.pth"
    torch.save(model.state_dict(), checkpoint)
    rng = random.Random(1)
    ids = sorted(rng.sample(range(1, OFFICIAL_ITEM_NUM), 499) + [OFFICIAL_ITEM_NUM])
    item_map_path = directory / "1000_ids.json"
    item_map_path.write_text(json.dumps({asin(i): i for i in ids}))
    return {"model": model, "checkpoint": checkpoint, "item_map": item_map_path, "ids": ids}


@pytest.fixture(scope="module")
def recommender(official: dict) -> SASRecRecommender:
    return SASRecRecommender(official["checkpoint"], official["item_map"])


def reference_scores(model: SASRec, item_ids: list[int], candidates: list[int]) -> torch.Tensor:
    padded = [0] * (30 - len(item_ids)) + item_ids
    with torch.no_grad():
        return model.predict(None, torch.tensor([padded]), torch.tensor(candidates))[0]


def test_official_layout_key_names(official: dict) -> None:
    state_dict = official["model"].state_dict()
    assert set(state_dict) == OFFICIAL_KEYS
    assert state_dict["item_emb.weight"].shape == (OFFICIAL_ITEM_NUM + 1, 50)
    assert state_dict["pos_emb.weight"].shape == (31, 50)


def test_loaded_checkpoint_scores_like_the_original_module(official: dict, recommender: SASRecRecommender) -> None:
    history = official["ids"][100:112]
    expected = reference_scores(official["model"], history, official["ids"])
    scores = recommender.score_candidates([asin(i) for i in history])
    assert torch.equal(scores, expected)
    top = torch.argsort(expected, descending=True)[:10].tolist()
    assert recommender.recommend([asin(i) for i in history]) == [asin(official["ids"][c]) for c in top]
    assert recommender.maxlen == 30
    assert recommender.candidate_asins == tuple(asin(i) for i in official["ids"])


@pytest.mark.parametrize("wrapper", ["state_dict", "model"])
def test_wrapped_state_dicts_load_the_same(official: dict, tmp_path: Path, wrapper: str) -> None:
    wrapped = tmp_path / "wrapped.pth"
    torch.save({wrapper: official["model"].state_dict(), "epoch": 3}, wrapped)
    sequence = [asin(i) for i in official["ids"][:8]]
    plain = SASRecRecommender(official["checkpoint"], official["item_map"])
    assert torch.equal(SASRecRecommender(wrapped, official["item_map"]).score_candidates(sequence),
                       plain.score_candidates(sequence))


def test_short_sequences_are_scored_unpadded_like_the_release(
    official: dict, recommender: SASRecRecommender
) -> None:
    first, second = official["ids"][5:7]
    expected = reference_scores(official["model"], [first, second], official["ids"])
    assert torch.equal(recommender.score_candidates([asin(first), asin(second)]), expected)


def test_sequence_rules(official: dict, recommender: SASRecRecommender) -> None:
    known = [asin(i) for i in official["ids"][:40]]
    assert recommender.recommend(["NOT-AN-ASIN", known[0], "B000000000", *known[1:12]]) == recommender.recommend(
        known[:12]
    )
    assert recommender.recommend(["NOT-AN-ASIN", "ALSO-UNKNOWN"]) == []
    assert recommender.recommend([]) == []
    assert recommender.recommend(known) == recommender.recommend(known[-30:])
    assert recommender.recommend(known) != recommender.recommend(known[:30])
    assert len(recommender.recommend(known, k=3)) == 3
    top = recommender.recommend(known, k=50)
    assert len(top) == len(set(top)) == 50
    assert set(top) <= set(recommender.candidate_asins)
    assert top[:10] == recommender.recommend(known)


def test_k_larger_than_the_item_set(official: dict, tmp_path: Path) -> None:
    small_map = tmp_path / "ids.json"
    small_map.write_text(json.dumps({asin(i): i for i in official["ids"][:4]}))
    small = SASRecRecommender(official["checkpoint"], small_map)
    assert sorted(small.recommend([asin(official["ids"][0])], k=10)) == sorted(asin(i) for i in official["ids"][:4])


def test_batch_matches_single_calls(official: dict, recommender: SASRecRecommender) -> None:
    sequences = [[asin(i) for i in official["ids"][s : s + n]] for s, n in ((0, 3), (50, 30), (200, 45))]
    sequences.append(["UNKNOWN"])
    assert recommender.recommend_batch(sequences, k=10) == [recommender.recommend(s) for s in sequences]


def test_concurrent_callers_get_the_sequential_answers(official: dict, recommender: SASRecRecommender) -> None:
    sequences = [[asin(i) for i in official["ids"][s : s + 20]] for s in range(0, 400, 25)]
    expected = [recommender.recommend(s) for s in sequences]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(recommender.recommend, sequences * 4)) == expected * 4


def test_arguments_are_read_as_the_release_reads_them(recommender: SASRecRecommender) -> None:
    assert recommender.recommend("B000000001") == []  # type: ignore[arg-type]  # letters: none known
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):
        recommender.recommend([{"asin": "B000000001"}])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        recommender.recommend([], k=0)


def test_missing_and_corrupt_checkpoints_name_the_file(official: dict, tmp_path: Path) -> None:
    missing = tmp_path / "absent.pth"
    with pytest.raises(DataError, match="absent.pth"):
        SASRecRecommender(missing, official["item_map"])
    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(official["checkpoint"].read_bytes()[:4096])  # a truncated download
    with pytest.raises(DataError, match="corrupt.pth"):
        SASRecRecommender(corrupt, official["item_map"])
    pointer = tmp_path / "pointer.pth"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n")
    with pytest.raises(DataError, match="pointer.pth.*LFS"):
        SASRecRecommender(pointer, official["item_map"])
    foreign = tmp_path / "foreign.pth"
    torch.save({"linear.weight": torch.zeros(2, 2)}, foreign)
    with pytest.raises(DataError, match="foreign.pth"):
        SASRecRecommender(foreign, official["item_map"])


def test_bad_item_maps_name_the_file(official: dict, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt_ids.json"
    corrupt.write_text("{not json")
    with pytest.raises(DataError, match="corrupt_ids.json"):
        SASRecRecommender(official["checkpoint"], corrupt)
    zero_id = tmp_path / "zero_ids.json"
    zero_id.write_text(json.dumps({"B0": 0}))
    with pytest.raises(DataError, match="zero_ids.json"):
        SASRecRecommender(official["checkpoint"], zero_id)
    too_large = tmp_path / "large_ids.json"
    too_large.write_text(json.dumps({"B1": 1, "B2": OFFICIAL_ITEM_NUM + 1}))
    with pytest.raises(DataError, match="pwab.pth.*large_ids.json"):
        SASRecRecommender(official["checkpoint"], too_large)


# --- training -----------------------------------------------------------------------------

CYCLE = 40  # items; every user walks the cycle item i -> item i+1, a pattern popularity cannot see
PROFILE_FIELDS = (
    "Gender", "Age", "Occupation", "Price Sensitivity", "Shopping Interest", "Brand Preference",
    "Diversity Preference", "Interaction Complexity", "Tone and Style", "Item Reference", "Focus Aspect",
)


def product(item: int) -> dict:
    return {
        "main_category": "Toys", "title": f"Toy {item}", "average_rating": 4.5, "rating_number": 10,
        "features": [], "description": [], "price": 9.99, "store": "Shop", "categories": [], "details": {},
        "parent_asin": asin(item),
    }


def write_cyclic_data(directory: Path, users: int = 60) -> Path:
    """Official-format files whose histories follow one cycle through the catalogue from random starts."""
    rng = random.Random(7)
    directory.mkdir()
    histories, profiles = {}, {}
    for u in range(users):
        start, length = rng.randrange(CYCLE), rng.randint(12, 18)
        behaviours = []
        for step in range(length):
            item = (start + step) % CYCLE + 1
            split = "history" if step < 0.8 * length else "train" if step < 0.9 * length else "test"
            review = {"rating": 5.0, "title": "ok", "text": "fine", "parent_asin": asin(item),
                      "timestamp": 1_600_000_000_000 + step * 86_400_000}
            behaviours.append({"product_info": product(item), "review": review, "split": split})
        histories[f"U{u}"] = behaviours
        profiles[f"U{u}"] = {"user_profile": {name: "Medium" for name in PROFILE_FIELDS}}
    files = {
        "all_products_part_1.json": {asin(i): product(i) for i in range(1, CYCLE + 1)},
        "user_history_part_1.json": histories,
        "user_profiles.json": profiles,
        "user_instructions.json": {"train": [], "test": []},
    }
    for name, content in files.items():
        (directory / name).write_text(json.dumps(content))
    return directory


def test_training_sequences_leave_out_test_behaviours(tmp_path: Path) -> None:
    data = load_benchmark_data(write_cyclic_data(tmp_path / "data", users=3))
    item_map = {asin(i): i for i in range(1, CYCLE + 1)}
    for sequence, user_id in zip(user_sequences(data, item_map), sorted(data.histories)):
        kept = [b["product_info"]["parent_asin"] for b in data.histories[user_id] if b["split"] != "test"]
        assert sequence == kept


def test_split_holds_out_the_last_two_items() -> None:
    split = split_sequences([["a", "b", "c", "d"], ["x", "y"]])
    assert split.train == [["a", "b"], []]
    assert (split.validation.inputs, split.validation.targets) == ([["a", "b"]], ["c"])
    assert (split.test.inputs, split.test.targets) == ([["a", "b", "c"], ["x"]], ["d", "y"])


@pytest.mark.slow
def test_training_learns_the_pattern_deterministically(tmp_path: Path) -> None:
    data = load_benchmark_data(write_cyclic_data(tmp_path / "data"))
    config = SASRecTrainConfig(epochs=40, seed=3)
    item_map = tmp_path / "out" / "ids.json"
    first = train_sasrec(data, tmp_path / "out" / "a.pth", item_map, config)
    second = train_sasrec(data, tmp_path / "out" / "b.pth", item_map, config)

    assert first["sasrec"]["hr@10"] >= 0.8
    assert first["sasrec"]["hr@10"] > first["popularity"]["hr@10"] + 0.3
    assert first["sasrec"]["ndcg@10"] > first["popularity"]["ndcg@10"]
    assert first["users_evaluated"] == 60 and first["candidates"] == CYCLE
    assert 0 < first["epochs"] <= first["epochs_run"] <= 40
    assert "leave-one-out" in first["protocol"]
    for key in ("sasrec", "popularity", "validation_ndcg@10", "epochs", "epochs_run"):
        assert first[key] == second[key]
    a, b = torch.load(tmp_path / "out" / "a.pth"), torch.load(tmp_path / "out" / "b.pth")
    assert set(a) == OFFICIAL_KEYS and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads(item_map.read_text()) == {asin(i): i for i in range(1, CYCLE + 1)}
    assert json.loads((tmp_path / "out" / "a.pth.json").read_text())["sasrec"] == first["sasrec"]

    trained = SASRecRecommender(tmp_path / "out" / "a.pth", item_map)
    assert asin(15) in trained.recommend([asin(i) for i in range(5, 15)])[:3]


@pytest.mark.parametrize("min_epochs", [0, 6])
def test_early_stopping_waits_for_min_epochs(tmp_path: Path, min_epochs: int) -> None:
    """A plateau before --min_epochs never ends training; after it, patience counts as usual."""
    data = load_benchmark_data(write_cyclic_data(tmp_path / "data"))
    config = SASRecTrainConfig(epochs=12, eval_every=1, patience=1, min_epochs=min_epochs, seed=3,
                               hidden_units=8, num_blocks=1, l2_emb=10.0)  # heavy L2: validation barely moves
    report = train_sasrec(data, tmp_path / "a.pth", tmp_path / "ids.json", config)
    assert report["epochs_run"] > min_epochs
    if min_epochs == 0:
        assert report["epochs_run"] < 12  # the plateau ends it early when nothing holds patience back


def test_equal_models_give_equal_checkpoint_files(tmp_path, monkeypatch):
    """Rebuilds are checked byte for byte: the scratch name (it holds the pid) must not reach the file."""
    from PersonalWAB.engines.recommender.train import save_checkpoint

    torch.manual_seed(0)
    model = SASRec(3, 5, SASRecConfig(hidden_units=8, num_blocks=1))
    written = []
    for pid in (111, 222):  # two processes writing the same model
        monkeypatch.setattr("os.getpid", lambda pid=pid: pid)
        save_checkpoint(model, tmp_path / "pwab.pth", {"run": pid})
        written.append((tmp_path / "pwab.pth").read_bytes())
    assert written[0] == written[1]


# -- a trained recommender that does not beat popularity is warned about ----------------------------

def test_warning_only_when_popularity_is_not_beaten() -> None:
    assert popularity_warning({"hr@10": 0.05}, {"hr@10": 0.01}) is None
    for sasrec in (0.01, 0.0):
        message = popularity_warning({"hr@10": sasrec}, {"hr@10": 0.01})
        assert message is not None and "does not beat popularity" in message and "0.0100" in message


def test_training_that_loses_to_popularity_warns_and_records_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = load_benchmark_data(write_cyclic_data(tmp_path / "data", users=8))
    # a model that never ranks the held-out item, whatever the training did
    monkeypatch.setattr(train, "model_metrics", lambda *_: {"hr@10": 0.0, "ndcg@10": 0.0})
    report = train_sasrec(data, tmp_path / "out" / "a.pth", tmp_path / "out" / "ids.json",
                          SASRecTrainConfig(epochs=1, hidden_units=8, num_blocks=1))
    assert report["popularity"]["hr@10"] > 0, "the cyclic data gives popularity some hits"
    assert report["warning"] == popularity_warning(report["sasrec"], report["popularity"])
    assert json.loads((tmp_path / "out" / "a.pth.json").read_text())["warning"] == report["warning"]
    assert f"warning: {tmp_path / 'out' / 'a.pth'}: {report['warning']}" in capsys.readouterr().err


# -- a checkpoint is keyed to the data it was trained on: refused or retrained, never used -------------

@pytest.fixture()
def other_data(tmp_path: Path) -> Path:
    """Tiny data of another seed: none of its ASINs is in the seed-0 data."""
    from PersonalWAB.data.synthetic import generate_synthetic

    generate_synthetic(tmp_path / "other", scale="tiny", seed=1)
    return tmp_path / "other"


@pytest.fixture()
def built(tiny_engines, tiny_data_dir: Path) -> Path:
    """The recommender folder of the tiny data, trained by this project (with its record)."""
    return tiny_data_dir / "recommender"


def _refusal(data_dir: Path) -> str:
    data = load_benchmark_data(data_dir, reload=True)
    with pytest.raises(DataError) as refused:
        Engines(data, "bm25s").check(search=False, recommender=True)
    return str(refused.value)


def test_training_records_what_the_checkpoint_was_trained_on(built: Path, tiny_data) -> None:
    record = json.loads(checkpoint_record_path(built / "pwab.pth").read_text())
    assert record["behaviours_fingerprint"] == tiny_data.behaviours_fingerprint
    assert len(record["checkpoint_sha256"]) == len(record["item_map_sha256"]) == 64


def test_a_recommender_copied_from_another_data_folder_is_refused(built: Path, other_data: Path) -> None:
    shutil.copytree(built, other_data / "recommender", dirs_exist_ok=True)
    message = _refusal(other_data)
    assert str(other_data / "recommender" / "1000_ids.json") in message
    assert "none of its" in message and "another data folder" in message


def test_a_checkpoint_copied_beside_another_item_map_is_refused(built: Path, other_data: Path) -> None:
    for name in ("pwab.pth", "pwab.pth.json"):  # the item map stays the other folder's own
        shutil.copy(built / name, other_data / "recommender" / name)
    message = _refusal(other_data)
    assert "item_map_sha256 differs" in message


def test_a_checkpoint_replaced_under_its_record_is_refused(built: Path, data_copy: Path) -> None:
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    checkpoint = data_copy / "recommender" / "pwab.pth"
    content = bytearray(checkpoint.read_bytes())
    content[len(content) // 2] ^= 0xFF  # same size, one byte flipped
    checkpoint.write_bytes(bytes(content))
    assert "checkpoint_sha256 differs" in _refusal(data_copy)


def test_a_checkpoint_without_its_item_map_is_refused(built: Path, data_copy: Path) -> None:
    (data_copy / "recommender").mkdir(exist_ok=True)
    shutil.copy(built / "pwab.pth", data_copy / "recommender" / "pwab.pth")
    (data_copy / "recommender" / "1000_ids.json").unlink(missing_ok=True)
    assert "its item map" in _refusal(data_copy) and "is missing" in _refusal(data_copy)


def test_a_checkpoint_of_edited_data_is_refused_by_engines_and_retrained_by_build(built: Path,
                                                                                  data_copy: Path) -> None:
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    record_path = checkpoint_record_path(data_copy / "recommender" / "pwab.pth")
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps({**record, "behaviours_fingerprint": "0" * 64}))
    assert "trained on other products or histories" in _refusal(data_copy)
    logged: list[str] = []
    assert _recommender_is_stale(load_benchmark_data(data_copy), logged.append)
    assert logged and logged[0].startswith("warning:") and "training it again" in logged[0]


def test_edited_tasks_or_profiles_keep_the_recommender(built: Path, data_copy: Path) -> None:
    """SASRec learns from the products and histories alone: a task file cut to a few tasks (what
    a check on a subset does) neither refuses nor retrains it."""
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    rewrite(data_copy / "user_instructions.json", lambda tasks: tasks.update(test=tasks["test"][:3]))
    data = load_benchmark_data(data_copy, reload=True)
    Engines(data, "bm25s").check(search=False, recommender=True)
    assert not _recommender_is_stale(data, lambda _: None)


def test_a_record_that_names_every_data_file_is_still_checked(built: Path, data_copy: Path) -> None:
    """A checkpoint recorded with the fingerprint of all four files (before the record named the
    products and histories alone) is refused when those files changed, kept when they did not."""
    shutil.copytree(built, data_copy / "recommender", dirs_exist_ok=True)
    record_path = checkpoint_record_path(data_copy / "recommender" / "pwab.pth")
    record = {k: v for k, v in json.loads(record_path.read_text()).items() if k != "behaviours_fingerprint"}
    data = load_benchmark_data(data_copy, reload=True)
    record_path.write_text(json.dumps({**record, "data_fingerprint": data.fingerprint}))
    Engines(data, "bm25s").check(search=False, recommender=True)
    record_path.write_text(json.dumps({**record, "data_fingerprint": "0" * 64}))
    assert "trained on other products or histories" in _refusal(data_copy)


def test_a_foreign_recommender_is_not_retrained_over(built: Path, other_data: Path) -> None:
    shutil.copytree(built, other_data / "recommender", dirs_exist_ok=True)
    assert not _recommender_is_stale(load_benchmark_data(other_data), lambda _: None)
