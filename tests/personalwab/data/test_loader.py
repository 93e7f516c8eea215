import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from PersonalWAB.data.loader import PARSED_CACHE, load_benchmark_data
from PersonalWAB.errors import DataError
from tests.conftest import HANG_GUARD_S, REPO_ROOT, copy_data_dir, edit_in_place, rewrite


def test_one_shared_object_per_directory(tiny_data_dir, tiny_data):
    assert load_benchmark_data(tiny_data_dir) is tiny_data
    assert load_benchmark_data(str(tiny_data_dir) + "/") is tiny_data
    assert tiny_data.is_synthetic and "synthetic" in tiny_data.source


def test_parts_are_merged(tiny_data_dir, tiny_data):
    parts = sorted(tiny_data_dir.glob("all_products_part_*.json"))
    assert len(parts) >= 2
    assert len(tiny_data.products) == sum(len(json.loads(p.read_text())) for p in parts)


def test_behaviours_before_is_strict(tiny_data):
    task = tiny_data.tasks["test"][0]
    before = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    assert before and all(b["review"]["timestamp"] < task["timestamp"] for b in before)
    history = tiny_data.histories[task["user_id"]]
    assert any(b["review"]["timestamp"] == task["timestamp"] for b in history)


def test_missing_directory_and_file(tmp_path, data_copy):
    with pytest.raises(DataError, match="data directory not found"):
        load_benchmark_data(tmp_path / "nowhere")
    (data_copy / "user_profiles.json").unlink()
    with pytest.raises(DataError, match=r"user_profiles.json: file not found"):
        load_benchmark_data(data_copy)


def test_malformed_json_names_the_file(data_copy):
    path = data_copy / "user_instructions.json"
    path.write_text(path.read_text()[:200])
    with pytest.raises(DataError, match=r"user_instructions.json: not valid JSON"):
        load_benchmark_data(data_copy)


def test_wrong_type_names_file_and_key(data_copy):
    path = data_copy / "user_instructions.json"
    rewrite(path, lambda c: c["test"][3].update(timestamp="yesterday"))
    with pytest.raises(DataError, match=r"user_instructions.json: \['test'\]\[3\].timestamp: expected int, got str"):
        load_benchmark_data(data_copy)


def test_missing_key_in_history(data_copy):
    path = data_copy / "user_history_part_1.json"

    def drop_review_text(content):
        first_user = next(iter(content))
        del content[first_user][0]["review"]["text"]

    rewrite(path, drop_review_text)
    with pytest.raises(DataError, match=r"user_history_part_1.json.*\]\[0\].review: missing key 'text'"):
        load_benchmark_data(data_copy)


def test_unknown_task_type_and_unknown_user(data_copy):
    path = data_copy / "user_instructions.json"
    rewrite(path, lambda c: c["train"][0].update(type="shopping"))
    with pytest.raises(DataError, match=r"\['train'\]\[0\].type: expected one of"):
        load_benchmark_data(data_copy)
    rewrite(path, lambda c: c["train"][0].update(type="search", user_id="NOBODY"))
    with pytest.raises(DataError, match="'NOBODY' has no entry in user_profiles.json"):
        load_benchmark_data(data_copy)


def test_git_lfs_pointer_is_explained(data_copy):
    (data_copy / "all_products_part_2.json").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n")
    with pytest.raises(DataError, match="Git LFS pointer.*git lfs pull"):
        load_benchmark_data(data_copy)


def test_price_may_be_null_or_the_string_none(data_copy):
    path = data_copy / "all_products_part_1.json"

    def set_prices(content):
        first, second = list(content)[:2]
        content[first]["price"] = None
        content[second]["price"] = "None"

    rewrite(path, set_prices)
    assert load_benchmark_data(data_copy).products


def test_duplicate_instructions_are_reported(data_copy):
    path = data_copy / "user_instructions.json"
    rewrite(path, lambda c: c["test"][1].update(task=c["test"][0]["task"]))
    data = load_benchmark_data(data_copy)
    assert any("repeat in the 'test' split" in w for w in data.warnings)


def test_a_users_behaviours_in_two_history_parts_are_merged(data_copy):
    first, second = sorted(data_copy.glob("user_history_part_*.json"))[:2]
    part = json.loads(first.read_text())
    user = next(u for u, behaviours in part.items() if len(behaviours) >= 3)
    total = len(part[user])
    moved, part[user] = part[user][:2], part[user][2:]  # the user's first behaviours live in another part
    first.write_text(json.dumps(part))
    rewrite(second, lambda content: content.update({user: moved}))
    data = load_benchmark_data(data_copy)
    assert len(data.histories[user]) == total
    times = [b["review"]["timestamp"] for b in data.histories[user]]
    assert times == sorted(times)


def test_targets_missing_from_the_catalogue_are_flagged(data_copy):
    path = data_copy / "user_instructions.json"
    rewrite(path, lambda c: c["test"][4]["target"]["product_info"].update(parent_asin="B0NOTSOLD"))
    data = load_benchmark_data(data_copy)
    assert any("1 'test' task(s) have a target ASIN missing from the product catalogue (e.g. task 4: 'B0NOTSOLD')"
               in w for w in data.warnings)
    out = subprocess.run([sys.executable, "-m", "PersonalWAB.data", "validate", "--data_dir", str(data_copy)],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 0 and "warning:" in out.stdout and "B0NOTSOLD" in out.stdout


def test_the_fingerprint_follows_the_data_bytes(tiny_data, data_copy):
    assert load_benchmark_data(data_copy).fingerprint == tiny_data.fingerprint
    edited = data_copy.parent / "edited"
    shutil.copytree(data_copy, edited)
    rewrite(edited / "all_products_part_1.json", lambda c: c[next(iter(c))].update(title="Another title"))
    assert load_benchmark_data(edited).fingerprint != tiny_data.fingerprint


def test_importing_the_run_modules_loads_nothing_heavy():
    code = (
        "import sys, run, PersonalWAB.runner.cli, PersonalWAB.envs.pwab.env, PersonalWAB.agents.heuristic, "
        "PersonalWAB.engines.shared, PersonalWAB.build, PersonalWAB.results;"
        "from PersonalWAB.data import loader;"
        "heavy = [m for m in ('torch', 'jnius', 'sentence_transformers', 'transformers', 'bm25s', 'litellm') "
        "if m in sys.modules];"
        "assert not heavy, heavy; assert not loader._CACHE; print('light')"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    assert "light" in out.stdout


def test_a_second_load_reads_the_parsed_cache_and_a_changed_file_is_read_again(data_copy):
    from PersonalWAB.data.loader import PARSED_CACHE

    first = load_benchmark_data(data_copy, reload=True)
    cache = data_copy / "cache" / PARSED_CACHE
    assert cache.exists()
    again = load_benchmark_data(data_copy, reload=True)
    assert again is not first
    assert (again.products, again.histories, again.tasks, again.profiles, again.fingerprint) == \
        (first.products, first.histories, first.tasks, first.profiles, first.fingerprint)
    assert again.behaviours_before(*_some_user_and_time(again)) == first.behaviours_before(*_some_user_and_time(first))

    rewrite(data_copy / "all_products_part_1.json", lambda c: c[next(iter(c))].update(title="Another title"))
    changed = load_benchmark_data(data_copy, reload=True)
    assert any(p["title"] == "Another title" for p in changed.products.values())
    assert changed.fingerprint != first.fingerprint

    cache.write_bytes(b"not marshal")  # a damaged cache is ignored and rewritten
    assert load_benchmark_data(data_copy, reload=True).fingerprint == changed.fingerprint


def _some_user_and_time(data):
    user = sorted(data.histories)[0]
    return user, data.histories[user][-1]["review"]["timestamp"]


# ---------------------------------------------------------------- bad data files, each named in one line


def test_a_missing_product_part_is_named_and_refused(data_copy):
    (data_copy / "all_products_part_2.json").rename(data_copy / "all_products_part_3.json")
    with pytest.raises(DataError, match=r"all_products_part_2\.json missing \(found all_products_part_1\.json, "
                                        r"all_products_part_3\.json\).*renumber"):
        load_benchmark_data(data_copy)


def test_a_missing_first_history_part_is_named(data_copy):
    (data_copy / "user_history_part_1.json").unlink()
    with pytest.raises(DataError, match=r"user_history_part_1\.json missing"):
        load_benchmark_data(data_copy)


def test_a_behaviour_given_twice_in_data_with_a_manifest_is_named_as_such(data_copy):
    part = data_copy / "user_history_part_1.json"
    user, behaviours = next(iter(json.loads(part.read_text()).items()))
    rewrite(part, lambda content: content[user].append(behaviours[0]))
    with pytest.raises(DataError, match=r"holds \d+ behaviours where .* says \d+: 1 behaviour\(s\) are given twice "
                                        rf"\(a part or an entry copied\?\), e.g. .*\[{user!r}\]"):
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


def _edit_first_test_instruction(data_dir: Path) -> str:
    """Change one letter of the test split's first instruction in place; return the new text."""
    path = data_dir / "user_instructions.json"
    text = json.loads(path.read_text())["test"][0]["task"]
    at = next(i for i, c in enumerate(text) if c.isascii() and c.isalpha())
    edited = text[:at] + ("x" if text[at] != "x" else "y") + text[at + 1:]
    raw = path.read_bytes()
    edit_in_place(path, json.dumps(text)[1:-1].encode(), json.dumps(edited)[1:-1].encode(),
                   after=raw.index(b'"test"'))
    return edited


# ----------------------------------------------------------------------------- parsed-data cache


def test_an_instruction_edited_with_the_same_size_and_mtime_is_seen_by_the_next_load(tiny_data_dir, tmp_path):
    data_dir = copy_data_dir(tiny_data_dir, tmp_path / "data")
    before = load_benchmark_data(data_dir, reload=True)
    assert (data_dir / "cache" / PARSED_CACHE).exists()
    edited = _edit_first_test_instruction(data_dir)
    after = load_benchmark_data(data_dir, reload=True)
    assert after.split("test")[0]["task"] == edited != before.split("test")[0]["task"]
    assert after.fingerprint != before.fingerprint
    assert after.products_fingerprint == before.products_fingerprint  # the products did not change


def test_validate_sees_an_instruction_edited_with_the_same_size_and_mtime(tiny_engines, tiny_data_dir, tmp_path):
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    data_dir = copy_data_dir(tiny_data_dir, tmp_path / "data", artefacts=True)
    config = RunConfig(data_dir=str(data_dir), out=str(tmp_path / "result.json"), end_index=2,
                       search_backend="bm25s")
    _, result, _ = run(config, log=lambda _: None)

    def validate() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "PersonalWAB.leaderboard", "validate", str(result),
                               "--data_dir", str(data_dir)], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=HANG_GUARD_S)

    assert validate().returncode == 0
    edited = _edit_first_test_instruction(data_dir)
    checked = validate()
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "does not match task 0 of the test split" in checked.stdout and repr(edited) in checked.stdout


def test_a_garbage_parsed_data_cache_is_named_and_rebuilt(tiny_data_dir, tmp_path, capsys):
    data_dir = copy_data_dir(tiny_data_dir, tmp_path / "data")
    expected = load_benchmark_data(data_dir, reload=True)
    cache = data_dir / "cache" / PARSED_CACHE
    for garbage in (b"\x00garbage", json.dumps({"key": 1}).encode(), b""):
        cache.write_bytes(garbage)
        assert load_benchmark_data(data_dir, reload=True).tasks == expected.tasks
        assert f"warning: {cache}:" in capsys.readouterr().err
    load_benchmark_data(data_dir, reload=True)
    assert "warning" not in capsys.readouterr().err  # rewritten whole


def test_loaded_data_stays_out_of_the_garbage_collector_until_it_is_freed(data_copy):
    """Its objects are moved out of the collector's generations (never rescanned by a run's
    collections) and handed back once the data object is gone, both parsed and from the cache."""
    code = f"""
import gc
from pathlib import Path
from PersonalWAB.data import loader
for attempt in ("parsed", "cached"):
    data = loader.load_benchmark_data({str(data_copy)!r}, reload=True)
    frozen = gc.get_freeze_count()
    product = next(iter(data.products.values()))
    assert frozen > len(data.products), (attempt, frozen)
    assert not any(item is product for item in gc.get_objects()), attempt
    del data, product
    loader._CACHE.clear()
    assert gc.get_freeze_count() == 0, attempt
    assert list(Path({str(data_copy)!r}).rglob({PARSED_CACHE!r})), "the parse leaves the cache the next load reads"
print("ok")
"""
    assert not list(data_copy.rglob(PARSED_CACHE))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
