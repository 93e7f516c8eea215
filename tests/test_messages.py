"""Bad input ends in one clear line naming the file, flag or key (issue 22, item 6)."""

import json
import shutil

import pytest

from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.errors import DataError


@pytest.fixture()
def data_copy(tiny_data_dir, tmp_path):
    target = tmp_path / "data"
    shutil.copytree(tiny_data_dir, target, ignore=shutil.ignore_patterns("indexes", "recommender", "cache"))
    return target


def rewrite(path, change):
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content))


# ---------------------------------------------------------------- data files


def test_a_missing_product_part_is_named_and_refused(data_copy):
    (data_copy / "all_products_part_2.json").rename(data_copy / "all_products_part_3.json")
    with pytest.raises(DataError, match=r"all_products_part_2\.json missing \(found all_products_part_1\.json, "
                                        r"all_products_part_3\.json\).*renumber"):
        load_benchmark_data(data_copy)


def test_a_missing_first_history_part_is_named(data_copy):
    (data_copy / "user_history_part_1.json").unlink()
    with pytest.raises(DataError, match=r"user_history_part_1\.json missing"):
        load_benchmark_data(data_copy)


def test_an_asin_in_two_product_parts_is_reported_with_both_parts(data_copy):
    first, second = data_copy / "all_products_part_1.json", data_copy / "all_products_part_2.json"
    asin = next(iter(json.loads(first.read_text())))
    product = json.loads(first.read_text())[asin]
    rewrite(second, lambda content: content.update({asin: {**product, "title": "Second title"}}))
    data = load_benchmark_data(data_copy)
    assert data.products[asin]["title"] == "Second title"  # the later part wins, as before
    [warning] = [w for w in data.warnings if "ASIN" in w]
    assert f"1 ASIN(s) are in both {first} and {second} (e.g. {asin!r})" in warning


def test_a_duplicate_json_key_is_reported_with_its_places(data_copy):
    path = data_copy / "user_profiles.json"
    raw = path.read_text()
    user = next(iter(json.loads(raw)))
    entry = json.dumps(json.loads(raw)[user])
    path.write_text(raw.rstrip()[:-1] + f', "{user}": {entry}}}')  # the same user again, last
    data = load_benchmark_data(data_copy)
    [warning] = [w for w in data.warnings if "given twice" in w]
    assert str(path) in warning and repr(user) in warning and "at bytes 1 and " in warning


def test_a_duplicate_key_inside_a_record_is_reported(data_copy):
    path = data_copy / "user_instructions.json"
    raw = path.read_text()
    path.write_text(raw.replace('"type":', '"type":"search","type":', 1))
    data = load_benchmark_data(data_copy)
    assert any("key 'type' is given twice in one object" in w for w in data.warnings)


def test_clean_files_give_no_duplicate_warning(tiny_data):
    assert not [w for w in tiny_data.warnings if "given twice" in w or "ASIN" in w]


def test_a_profile_value_of_the_wrong_type_is_named(data_copy):
    path = data_copy / "user_profiles.json"
    user = next(iter(json.loads(path.read_text())))
    rewrite(path, lambda content: content[user]["user_profile"].update(Age=34))
    with pytest.raises(DataError, match=rf"user_profiles\.json: \['{user}'\]\.user_profile\['Age'\]: "
                                        r"expected str, got int"):
        load_benchmark_data(data_copy)


@pytest.mark.parametrize("text, problem", [("[1, 2]", "top level: expected dict, got list"),
                                           ('{"source": 5}', "source: expected str, got int"),
                                           ('{"scale": ', "not valid JSON")])
def test_a_malformed_manifest_is_named(data_copy, text, problem):
    (data_copy / "synthetic_manifest.json").write_text(text)
    with pytest.raises(DataError, match="synthetic_manifest.json: " + problem):
        load_benchmark_data(data_copy)


def test_deeply_nested_json_is_a_clear_data_error(data_copy):
    (data_copy / "user_profiles.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match=r"user_profiles\.json: not valid JSON \(.*depth"):
        load_benchmark_data(data_copy)


def test_a_quoted_text_with_a_colon_is_not_taken_for_a_key(data_copy):
    path = data_copy / "user_instructions.json"
    rewrite(path, lambda content: content["test"][0].update(task='I want the one labelled "pro": light and small'))
    assert not [w for w in load_benchmark_data(data_copy).warnings if "given twice" in w]
