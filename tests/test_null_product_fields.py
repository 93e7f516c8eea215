"""`null` in product fields: the official data has it in `store`,
`main_category` and others. The loader accepts it where the release renders the field with
`str()`, every renderer writes it as the release does ("None"), and the synthetic data has
such nulls too."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest

from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.data.schema import NULLABLE_PRODUCT_FIELDS, PRODUCT_FIELDS
from PersonalWAB.errors import DataError
from tests.conftest import rewrite

RELEASE_STR_FIELDS = ("main_category", "average_rating", "rating_number", "features", "description", "store",
                      "categories")
REQUIRED_FIELDS = ("title", "parent_asin", "details")
PRODUCT = {"main_category": "Grocery", "title": "Green Tea", "average_rating": 4.5, "rating_number": 10,
           "features": ["Loose leaf"], "description": ["From Japan"], "price": 9.99, "store": "TeaCo",
           "categories": ["Grocery", "Tea"], "details": {"Brand": "TeaCo"}, "parent_asin": "B000000001"}
REVIEW = {"rating": 5.0, "title": "Nice", "text": "Fresh and green.", "parent_asin": "B000000001",
          "timestamp": 1600000000000}


def nulled(product: dict, fields=RELEASE_STR_FIELDS) -> dict:
    return {**product, **{field: None for field in fields}}


def as_text(product: dict, fields=RELEASE_STR_FIELDS) -> dict:
    """The same product with each null written as the release writes `str(None)`."""
    return {**product, **{field: "None" for field in fields}}


def first_review_task(data_dir: Path) -> int:
    tasks = json.loads((data_dir / "user_instructions.json").read_text())["test"]
    return next(i for i, t in enumerate(tasks) if t["type"] == "review")


def null_everywhere(data_dir: Path, fields, task_index: int | None = None) -> str:
    """Null `fields` of one product in the catalogue, in every history entry that holds it
    and in every task that targets it; its ASIN."""
    instructions = json.loads((data_dir / "user_instructions.json").read_text())
    index = first_review_task(data_dir) if task_index is None else task_index
    asin = instructions["test"][index]["target"]["product_info"]["parent_asin"]

    def change_products(content):
        if asin in content:
            content[asin].update({field: None for field in fields})

    def change_histories(content):
        for behaviours in content.values():
            for b in behaviours:
                if b["product_info"]["parent_asin"] == asin:
                    b["product_info"].update({field: None for field in fields})

    def change_tasks(content):
        for split in content.values():
            for t in split:
                if t["target"]["product_info"]["parent_asin"] == asin:
                    t["target"]["product_info"].update({field: None for field in fields})

    for path in sorted(data_dir.glob("all_products_part_*.json")):
        rewrite(path, change_products)
    for path in sorted(data_dir.glob("user_history_part_*.json")):
        rewrite(path, change_histories)
    rewrite(data_dir / "user_instructions.json", change_tasks)
    return asin


# ------------------------------------------------------------------ the loader


def test_the_nullable_fields_are_those_the_release_writes_with_str() -> None:
    assert set(NULLABLE_PRODUCT_FIELDS) == set(RELEASE_STR_FIELDS)
    for field in PRODUCT_FIELDS:
        assert (type(None) in PRODUCT_FIELDS[field]) == (field in RELEASE_STR_FIELDS), field


@pytest.mark.parametrize("field", RELEASE_STR_FIELDS)
def test_the_loader_accepts_null_in_products_histories_and_targets(data_copy: Path, field: str) -> None:
    asin = null_everywhere(data_copy, [field])
    data = load_benchmark_data(data_copy)
    assert data.products[asin][field] is None
    assert any(b["product_info"]["parent_asin"] == asin and b["product_info"][field] is None
               for h in data.histories.values() for b in h)
    target = data.tasks["test"][first_review_task(data_copy)]["target"]["product_info"]
    assert target["parent_asin"] == asin and target[field] is None


@pytest.mark.parametrize("field", REQUIRED_FIELDS)
def test_null_where_the_release_inserts_the_value_as_it_is_names_the_file_and_field(data_copy: Path,
                                                                                    field: str) -> None:
    path = data_copy / "all_products_part_1.json"  # the loader names the parts it merged
    asin = next(iter(json.loads(path.read_text())))
    rewrite(path, lambda content: content[asin].update({field: None}))
    wanted = "dict" if field == "details" else "str"
    with pytest.raises(DataError, match=rf"all_products_part_1.json.*: \['{asin}'\].{field}: expected {wanted}, "
                                        r"got null"):
        load_benchmark_data(data_copy)


def test_a_null_title_in_a_history_or_a_target_names_the_file_and_field(data_copy: Path) -> None:
    history = data_copy / "user_history_part_1.json"
    user = next(iter(json.loads(history.read_text())))
    rewrite(history, lambda content: content[user][0]["product_info"].update({"title": None}))
    with pytest.raises(DataError, match=rf"user_history_part_1.json.*: \['{user}'\]\[0\].product_info.title: "
                                        r"expected str, got null"):
        load_benchmark_data(data_copy)

    rewrite(history, lambda content: content[user][0]["product_info"].update({"title": "Back"}))
    rewrite(data_copy / "user_instructions.json",
            lambda content: content["test"][2]["target"]["product_info"].update({"title": None}))
    with pytest.raises(DataError, match=r"user_instructions.json: \['test'\]\[2\].target.product_info.title: "
                                        r"expected str, got null"):
        load_benchmark_data(data_copy)


def test_a_wrong_type_in_a_nullable_field_still_says_null_is_allowed(data_copy: Path) -> None:
    path = data_copy / "all_products_part_1.json"
    asin = next(iter(json.loads(path.read_text())))
    rewrite(path, lambda content: content[asin].update({"store": 7}))
    with pytest.raises(DataError, match=rf"\['{asin}'\].store: expected str or null, got int"):
        load_benchmark_data(data_copy)


# ------------------------------------------------------------------ what models read


def renderers(protocol):
    behaviour = lambda product: {"product_info": product, "review": REVIEW}  # noqa: E731
    return {
        "product": lambda p: protocol.product_block(p),
        "recommendation": lambda p: protocol.recommendation_block(p, 3),
        "details": lambda p: protocol.details_block(p),
        "behaviour": lambda p: protocol.behaviour_block(behaviour(p), 1),
        "recmind": lambda p: protocol.recmind_block(behaviour(p), 1),
        "interecagent": lambda p: protocol.interecagent_block(behaviour(p)),
        "interecagent init": lambda p: protocol.interecagent_init_prompt([behaviour(p)]),
        "taskspe search": lambda p: protocol.taskspe_entry(behaviour(p), "search"),
        "taskspe recommend": lambda p: protocol.taskspe_entry(behaviour(p), "recommend"),
        "puma memory search": lambda p: protocol.puma_memory([behaviour(p)], "search"),
        "puma memory recommend": lambda p: protocol.puma_memory([behaviour(p)], "recommend"),
        "puma product": lambda p: protocol.puma_product(p),
        "puma param prompt": lambda p: protocol.puma_param_prompt("Review it", "add_product_review", "", p),
        "puma agent param prompt": lambda p: protocol.puma_param_prompt("Review it", "add_product_review", "", p,
                                                                         agent=True),
    }


@pytest.mark.parametrize("texts", ["project", "release"])
def test_every_renderer_writes_null_as_the_text_none(texts: str, fake_protocol) -> None:
    from PersonalWAB.protocol import project_protocol

    protocol = fake_protocol if texts == "release" else project_protocol()
    for name, render in renderers(protocol).items():
        assert render(nulled(PRODUCT)) == render(as_text(PRODUCT)), name
        assert render(nulled(PRODUCT)) != render(PRODUCT), name


def test_the_release_blocks_show_none_for_store_and_category(fake_protocol) -> None:
    product = nulled(PRODUCT, ("store", "main_category"))
    behaviour = {"product_info": product, "review": REVIEW}
    assert "|S=None|" in fake_protocol.product_block(product) and "|C=None\n" in fake_protocol.product_block(product)
    assert "|C=None|" in fake_protocol.behaviour_block(behaviour, 0)
    assert "|S=None|" in fake_protocol.behaviour_block(behaviour, 0)
    assert fake_protocol.puma_memory([behaviour, behaviour], "search") == "|".join(
        ["R:ps:Green Tea/None/9.99/None\n"] * 2)
    assert fake_protocol.puma_memory([behaviour], "recommend") == "R:pr:Green Tea/None/B000000001\n"
    assert "s=None c=None" in fake_protocol.puma_product(product)


def test_the_env_shows_none_in_observations_and_the_search_index(data_copy: Path, fake_protocol,
                                                                 tmp_path: Path) -> None:
    from PersonalWAB.engines.shared import Engines
    from PersonalWAB.envs.pwab.env import PWABEnv
    from PersonalWAB.engines.search.bm25s import build_bm25s_index

    asin = null_everywhere(data_copy, ["store", "main_category"])
    data = load_benchmark_data(data_copy)
    product = data.products[asin]
    index = tmp_path / "bm25s"
    build_bm25s_index(data.products, index, fake_protocol.product_block, fake_protocol.contents_fingerprint)
    env = PWABEnv(Engines(data, "bm25s", fake_protocol, search_index=index), "test", protocol=fake_protocol)
    block = fake_protocol.product_block(as_text(product, ("store", "main_category")))
    assert "|S=None|" in block and block.endswith("|C=None\n")

    obs, _ = env.reset(first_review_task(data_copy))
    assert obs.endswith(fake_protocol.fill("first_observation.product", product=block))
    obs, *_ = env.step({"name": "get_product_details_by_asin", "arguments": {"product_asin": asin}})
    assert obs == fake_protocol.details_block(as_text(product, ("store", "main_category"))) and "S=None" in obs
    obs, *_ = env.step({"name": "search_product_by_query", "arguments": {"query": product["title"]}})
    assert any(text == fake_protocol.search_result(i, block) for i, text in enumerate(ast.literal_eval(obs)))


def test_the_recommend_label_matches_a_null_main_category_as_the_release_does() -> None:
    from PUMA.data import recommend_label

    def behaviour(asin: str, category: str | None, ts: int) -> dict:
        return {"product_info": {**PRODUCT, "parent_asin": asin, "main_category": category},
                "review": {**REVIEW, "parent_asin": asin, "timestamp": ts}}

    history = [behaviour("B1", None, 1), behaviour("B2", "Grocery", 2), behaviour("B3", None, 3),
               behaviour("B4", "Grocery", 4)]

    class Data:
        def behaviours_before(self, user_id, timestamp):
            return [b for b in history if b["review"]["timestamp"] < timestamp]

    def task(category):
        return {"user_id": "U", "timestamp": 10, "target": {"product_info": {**PRODUCT, "parent_asin": "BT",
                                                                            "main_category": category}}}

    assert recommend_label(Data(), task(None)) == "B1, B3"  # None == None, as in the release
    assert recommend_label(Data(), task("Grocery")) == "B2, B4"
    assert recommend_label(Data(), task("Toys")) == "BT"


def test_the_heuristic_agent_reads_past_null_fields() -> None:
    from PersonalWAB.agents.heuristic import search_query, usual_store

    def behaviour(store, categories, main_category="Grocery"):
        return {"product_info": {**PRODUCT, "store": store, "categories": categories, "main_category": main_category},
                "review": REVIEW}

    memory = [behaviour(None, None), behaviour("TeaCo", ["Grocery", "Tea"]), behaviour("TeaCo", None, None),
              behaviour(None, ["Grocery", "Tea"])]
    assert usual_store("green tea please", memory) == "TeaCo"
    assert search_query("green tea please", memory) == "green tea please TeaCo"
    assert usual_store("green tea please", [behaviour(None, None, None)]) is None


def test_the_tiny_model_corpus_reads_null_fields(tiny_data_dir: Path, tiny_data) -> None:
    from PUMA.tiny_model import corpus

    null_store = sum(p["store"] is None for p in tiny_data.products.values())
    lines = [line for line in corpus(tiny_data_dir) if line.endswith(tuple(tiny_data.products))]
    assert null_store and sum("| None | B0" in line for line in lines) >= null_store


# ------------------------------------------------------------------ the synthetic data


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory):
    from PersonalWAB.data.synthetic import generate_synthetic

    out = tmp_path_factory.mktemp("synthetic_small")
    generate_synthetic(out, scale="small", seed=0)
    return load_benchmark_data(out)


def test_the_synthetic_data_has_nulls_at_the_chosen_rates(small, tiny_data) -> None:
    from PersonalWAB.data import synthetic

    for data in (small, tiny_data):
        products = list(data.products.values())
        nulls = Counter(field for p in products for field, value in p.items() if value is None and field != "price")
        assert set(nulls) == {"store", "main_category"}, nulls
        store_rate, category_rate = nulls["store"] / len(products), nulls["main_category"] / len(products)
        # binomial spread: within three standard deviations of the chosen rates
        for rate, chosen in ((store_rate, synthetic._NULL_STORE_RATE),
                             (category_rate, synthetic._NULL_MAIN_CATEGORY_RATE)):
            assert abs(rate - chosen) <= 3 * (chosen * (1 - chosen) / len(products)) ** 0.5 + 1e-9, (rate, chosen)
    assert 0.02 <= small_rate(small, "store") <= 0.04 and 0.005 <= small_rate(small, "main_category") <= 0.015
    behaviours = [b for h in small.histories.values() for b in h]
    targets = [t["target"]["product_info"] for split in small.tasks.values() for t in split]
    for field in ("store", "main_category"):
        assert any(b["product_info"][field] is None for b in behaviours)
        assert any(t[field] is None for t in targets)


def small_rate(data, field: str) -> float:
    return sum(p[field] is None for p in data.products.values()) / len(data.products)


def test_a_null_store_product_keeps_its_brand(small) -> None:
    """Only the field is null: the store's name still shows in the title and details."""
    for product in small.products.values():
        if product["store"] is None:
            assert product["details"]["Brand"] in product["title"]
