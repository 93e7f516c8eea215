"""The benchmark-construction pipeline on the tiny synthetic world in Amazon Reviews 2023
raw format, with the scripted model server standing in for the LLM."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from PersonalWAB.construct import prompts
from PersonalWAB.construct.config import BuildConfig
from PersonalWAB.construct.pipeline import build
from PersonalWAB.data import amazon_raw
from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.data.schema import PROFILE_FIELDS
from PersonalWAB.data.synthetic import generate_synthetic
from PersonalWAB.errors import DataError
from PersonalWAB.llm import LLMError
from devtools.doubles.construct_responder import respond
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
from tests.conftest import HANG_GUARD_S, REPO_ROOT

DATA_FILES = ("all_products_part_1.json", "all_products_part_2.json", "user_history_part_1.json",
              "user_history_part_2.json", "user_instructions.json", "user_profiles.json")
TEXT_STEPS = ("select", "join", "split", "profiles", "instructions", "write")
quiet = lambda _: None  # noqa: E731


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("raw")
    generate_synthetic(out, scale="tiny", seed=0, layout="raw")
    return out


@pytest.fixture(scope="module")
def server():
    with ScriptedLLMServer(respond) as running:
        yield running


def settings(raw: Path, out: Path, url: str | None = None, **overrides) -> BuildConfig:
    values = dict(raw_dir=raw, out=out, num_users=12, sasrec_extra_users=3, model="scripted", api_base=url,
                  sasrec_epochs=5, sasrec_threads=1, max_concurrency=4)
    values.update(overrides)
    return BuildConfig(**values)


def checksums(data_dir: Path) -> dict[str, str]:
    return {name: hashlib.sha256((data_dir / name).read_bytes()).hexdigest() for name in DATA_FILES}


def bodies(requests: list[dict]) -> list[str]:
    return [json.dumps(r["messages"], sort_keys=True) for r in requests]


@pytest.fixture(scope="module")
def built(raw_dir: Path, server: ScriptedLLMServer, tmp_path_factory: pytest.TempPathFactory):
    """One full build (every step, SASRec and the Lucene index included)."""
    out = tmp_path_factory.mktemp("built")
    before = len(server.requests)
    result = build(settings(raw_dir, out, server.url), log=quiet)
    return out, result, server.requests[before:]


# ---------------------------------------------------------------- raw format


def test_raw_world_is_the_synthetic_world(raw_dir: Path, tiny_data, tmp_path: Path) -> None:
    """Selecting every user of the raw world and splitting 80/10/10 gives back exactly the
    histories the generator writes in the official layout from the same seed."""
    out = tmp_path / "roundtrip"
    build(settings(raw_dir, out, num_users=16, min_interactions=1, sasrec_extra_users=0),
          steps=("select", "join", "split"), log=quiet)
    histories = json.loads((out / "work" / "split.json").read_text())["histories"]
    assert histories == tiny_data.histories
    again = tmp_path / "again"
    generate_synthetic(again, scale="tiny", seed=0, layout="raw")
    files = sorted(p.relative_to(raw_dir) for p in raw_dir.rglob("*.jsonl"))
    assert len(files) == 10 and all((raw_dir / f).read_bytes() == (again / f).read_bytes() for f in files)


def test_raw_records_convert_and_stream(tmp_path: Path) -> None:
    meta = {"main_category": None, "title": "Lamp", "average_rating": None, "rating_number": None,
            "features": None, "description": "One line", "price": "$1,299.50 (list)", "images": [{"large": "x"}],
            "videos": [], "store": None, "categories": [], "details": '{"Brand": "Lumo"}',
            "parent_asin": "B0LAMP", "bought_together": None}
    product = amazon_raw.to_product(meta, "here")
    assert product == {"main_category": None, "title": "Lamp", "average_rating": 0.0, "rating_number": 0,
                       "features": [], "description": ["One line"], "price": 1299.5, "store": None,
                       "categories": [], "details": {"Brand": "Lumo"}, "parent_asin": "B0LAMP"}
    assert [amazon_raw.price_of(v) for v in (None, "None", 3, "call us", True)] == [None, "None", 3.0, "None", "None"]
    with pytest.raises(DataError, match="here.details"):
        amazon_raw.to_product({**meta, "details": "not json"}, "here")
    with pytest.raises(DataError, match="timestamp"):
        amazon_raw.to_review({"user_id": "U", "parent_asin": "B", "rating": 5, "timestamp": "yesterday"}, "there")

    lines = b'{"a": 1}\n\n{"a": 2}\n'
    plain, packed = tmp_path / "x.jsonl", tmp_path / "y.jsonl.gz"
    plain.write_bytes(lines)
    packed.write_bytes(gzip.compress(lines))
    for path in (plain, packed):
        digest = amazon_raw.FileDigest(str(path))
        assert [r for _, r in amazon_raw.iter_records(path, digest)] == [{"a": 1}, {"a": 2}]
        assert digest.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and digest.records == 2
    plain.write_bytes(b'{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match=r"x.jsonl:2: not valid JSON"):
        list(amazon_raw.iter_records(plain))


def test_selection_follows_the_limits_and_the_seed(raw_dir: Path, tmp_path: Path) -> None:
    def chosen(seed: int, **limits) -> dict:
        out = tmp_path / f"s{seed}{sorted(limits.items())}"
        build(settings(raw_dir, out, num_users=4, seed=seed, **limits), steps=("select", "join", "split"), log=quiet)
        return json.loads((out / "work" / "split.json").read_text())["histories"]

    first = chosen(0, min_interactions=20, max_interactions=70)
    assert all(20 <= len(h) <= 70 for h in first.values()) and len(first) == 4
    assert chosen(0, min_interactions=20, max_interactions=70) == first
    assert set(chosen(1, min_interactions=20, max_interactions=70)) != set(first)
    with pytest.raises(DataError, match="only 10 users have 20-70 reviews"):
        build(settings(raw_dir, tmp_path / "many", num_users=15, min_interactions=20, max_interactions=70),
              steps=("select",), log=quiet)


def test_bad_settings_fail_before_any_file_is_written(raw_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cases = [({"categories": ("Electronic",)}, "unknown Amazon Reviews 2023 category Electronic"),
             ({"categories": ("Books",)}, "review_categories/Books.jsonl: not found"),
             ({"min_interactions": 9, "max_interactions": 3}, "need 1 <= min <= max"),
             ({"test_tasks_per_target": 4.0}, "--test_tasks_per_target must be between 0 and 3")]
    for overrides, message in cases:
        with pytest.raises(DataError, match=message):
            build(settings(raw_dir, out, **overrides), log=quiet)
    with pytest.raises(DataError, match="unknown step"):
        build(settings(raw_dir, out), steps=("select", "profile"), log=quiet)
    assert not out.exists()
    foreign = tmp_path / "foreign"
    generate_synthetic(foreign / "data", scale="tiny")
    with pytest.raises(DataError, match="did not build"):
        build(settings(raw_dir, foreign), log=quiet)


# ---------------------------------------------------------------- the build


def test_build_writes_a_valid_benchmark(built) -> None:
    out, result, requests = built
    data = load_benchmark_data(out / "data", reload=True)
    manifest = result.manifest
    assert result.ran == ["select", "join", "split", "profiles", "instructions", "write", "recommender", "index"]
    assert data.source == manifest["source"] == "constructed(synthetic raw scale=tiny seed=0; users=12 seed=0)"
    assert manifest["llm_calls"] == len(requests) and manifest["llm_calls_cached"] == 0
    assert manifest["files"] == checksums(out / "data")
    assert {s["category"] for s in manifest["sources"]} == set(amazon_raw.PAPER_CATEGORIES)
    assert all(len(s["sha256"]) == 64 and s["records"] > 0 for s in manifest["sources"])
    assert manifest["model"]["model"] == "scripted" and manifest["raw_synthetic"]["scale"] == "tiny"

    assert len(data.profiles) == 12 and all(set(p) == set(PROFILE_FIELDS) for p in data.profiles.values())
    counts = manifest["counts"]
    assert (counts["train_tasks"], counts["test_tasks"]) == (len(data.tasks["train"]), len(data.tasks["test"]))
    assert {t["user_id"] for t in data.tasks["test"]} == set(data.profiles)  # every user is evaluated
    for split, tasks in data.tasks.items():
        assert len({t["task"] for t in tasks}) == len(tasks)
        for task in tasks:  # each target is one of the user's own behaviours of that split
            behaviour = next(b for b in data.histories[task["user_id"]]
                             if b["review"]["timestamp"] == task["timestamp"])
            assert behaviour["split"] == split and behaviour["product_info"] == task["target"]["product_info"]
    assert Counter(t["type"] for t in data.tasks["train"]).keys() == {"search", "recommend", "review"}
    catalogue = {b["product_info"]["parent_asin"] for h in data.histories.values() for b in h}
    assert set(data.products) == catalogue
    # the recommender saw the extra users and still answers with catalogue items only
    report = json.loads((out / "data" / "recommender" / "pwab.pth.json").read_text())
    assert report["extra_users"] == counts["sasrec_extra_users"] == 2 and report["item_num"] > len(data.products)
    assert sorted(json.loads((out / "data" / "recommender" / "1000_ids.json").read_text())) == sorted(data.products)
    assert (out / "data" / "indexes" / "lucene").is_dir()


def test_built_directory_runs_on_both_tracks(built, tmp_path: Path) -> None:
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    data_dir = str(built[0] / "data")
    single, _, _ = run(RunConfig(data_dir=data_dir, agent_memory="last", out=str(tmp_path / "st.json")), log=quiet)
    multi, _, _ = run(RunConfig(data_dir=data_dir, agent_memory="last", max_steps=4, user_mode="offline",
                                end_index=8, out=str(tmp_path / "mt.json")), log=quiet)
    assert single["run_args"]["data_source"].startswith("constructed(")
    assert single["results"]["overall"]["total_count"] == len(load_benchmark_data(data_dir).tasks["test"])
    assert single["results"]["overall"]["avg_action_acc"] == 1.0
    assert single["results"]["search"]["avg_res_acc"] > 0
    assert multi["results"]["overall"]["total_count"] == 8


def test_rerun_skips_everything_and_force_answers_from_the_cache(built, server: ScriptedLLMServer) -> None:
    out, first, _ = built
    before = len(server.requests)
    again = build(settings(first_raw(out), out, server.url), log=quiet)
    assert again.ran == [] and again.manifest["llm_calls"] == again.manifest["llm_calls_cached"] == 0
    forced = build(settings(first_raw(out), out, server.url), force=True, steps=TEXT_STEPS, log=quiet)
    assert forced.ran == list(TEXT_STEPS)
    assert len(server.requests) == before
    assert forced.manifest["llm_calls"] == 0
    assert forced.manifest["llm_calls_cached"] == sum(s["requests"] for s in first.manifest["llm_steps"].values())
    assert checksums(out / "data") == first.manifest["files"]


def first_raw(out: Path) -> Path:
    return Path(json.loads((out / "data" / "construction_manifest.json").read_text())["raw_dir"])


@pytest.mark.slow
def test_a_changed_setting_reruns_only_what_it_reaches(built, server: ScriptedLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    raw = first_raw(built[0])
    build(settings(raw, out, server.url), steps=TEXT_STEPS, log=quiet)
    before = len(server.requests)
    changed = build(settings(raw, out, server.url, recent_behaviours=2), steps=TEXT_STEPS, log=quiet)
    assert changed.ran == ["instructions", "write"]
    new = server.requests[before:]
    assert new and all("Task type: recommend" in r["messages"][1]["content"] for r in new)
    assert changed.manifest["llm_calls"] == len(new) and changed.manifest["llm_calls_cached"] > 0


@pytest.mark.slow
def test_new_product_texts_rebuild_only_the_index(built, fake_pack: Path) -> None:
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.search import search_index_dir
    from PersonalWAB.engines.search.common import index_record
    from PersonalWAB.protocol import load_protocol

    out = built[0]
    released = build(settings(first_raw(out), out, protocol_file=str(fake_pack)), log=quiet)
    index = search_index_dir(load_benchmark_data(out / "data"), "lucene", load_protocol(fake_pack))
    assert released.ran == ["index"]
    assert index_record(index)["contents"] == load_protocol(fake_pack).contents_fingerprint
    back = build(settings(first_raw(out), out), log=quiet)
    index = search_index_dir(load_benchmark_data(out / "data"), "lucene", load_protocol())
    assert back.ran == ["index"] and index_record(index)["contents"] == load_protocol().contents_fingerprint


def test_dry_run_estimates_without_calling(raw_dir: Path, tmp_path: Path, built) -> None:
    fresh = build(settings(raw_dir, tmp_path / "fresh", model="gpt-4o-mini"), dry_run=True, log=quiet)
    estimates = fresh.dry_run.estimates
    assert fresh.ran == ["select", "join", "split"] and not (tmp_path / "fresh" / "cache").exists()
    assert estimates["profiles"].requests == 12 and estimates["profiles"].calls == 12
    assert estimates["instructions"].calls > 0 and estimates["instructions"].cost_usd > 0
    assert "placeholder profile" in fresh.dry_run.table("gpt-4o-mini")
    done = build(settings(first_raw(built[0]), built[0]), dry_run=True, log=quiet).dry_run.estimates
    assert all(e.calls == 0 and e.cost_usd == 0 for e in done.values())


# ---------------------------------------------------------------- interruptions


def failing_after(limit: int):
    """The scripted model, answering `limit` requests and failing every later one."""
    answered: list[str] = []
    lock = threading.Lock()

    def responder(request: dict) -> ScriptedReply:
        with lock:
            if len(answered) >= limit:
                return ScriptedReply(status=400, content="injected failure")
            answered.append(json.dumps(request["messages"], sort_keys=True))
        return respond(request)

    return responder, answered


def test_interrupted_build_repeats_no_call_and_ends_identical(built, tmp_path: Path) -> None:
    raw, reference = first_raw(built[0]), built[1].manifest["files"]
    out = tmp_path / "interrupted"
    responder, answered = failing_after(40)
    with ScriptedLLMServer(responder) as broken, pytest.raises(LLMError, match="injected failure"):
        build(settings(raw, out, broken.url), steps=TEXT_STEPS, log=quiet)
    assert len(answered) == 40
    with ScriptedLLMServer(respond) as healthy:
        result = build(settings(raw, out, healthy.url), steps=TEXT_STEPS, log=quiet)
        resumed = bodies(healthy.requests)
    assert not set(answered) & set(resumed) and len(set(resumed)) == len(resumed)
    # the 12 profiles finished as a step; the 28 instructions answered before the failure come from the cache
    assert result.ran == ["instructions", "write"]
    assert result.manifest["llm_calls"] == len(resumed) and result.manifest["llm_calls_cached"] == 40 - 12
    assert checksums(out / "data") == reference


@pytest.mark.slow
def test_killed_build_repeats_no_call_and_ends_identical(built, tmp_path: Path) -> None:
    raw, reference = first_raw(built[0]), built[1].manifest["files"]
    out = tmp_path / "killed"
    answered: list[str] = []
    process: list[subprocess.Popen] = []

    def killer(request: dict) -> ScriptedReply:
        if len(answered) == 25:  # the 26th request kills the build before it is answered
            os.kill(process[0].pid, signal.SIGKILL)
            return ScriptedReply(status=500, content="gone")
        answered.append(json.dumps(request["messages"], sort_keys=True))
        return respond(request)

    with ScriptedLLMServer(killer) as server:
        command = [sys.executable, "-m", "PersonalWAB.construct", "build", "--raw_dir", str(raw), "--out", str(out),
                   "--num_users", "12", "--sasrec_extra_users", "3", "--model", "scripted", "--api_base", server.url,
                   "--max_concurrency", "1", "--steps", ",".join(TEXT_STEPS)]
        process.append(subprocess.Popen(command, cwd=REPO_ROOT, env={**os.environ, "TQDM_DISABLE": "1"},
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        assert process[0].wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
    assert len(answered) == 25 and not (out / "data").exists()
    with ScriptedLLMServer(respond) as healthy:
        result = build(settings(raw, out, healthy.url), steps=TEXT_STEPS, log=quiet)
        resumed = bodies(healthy.requests)
    assert not set(answered) & set(resumed) and len(set(resumed)) == len(resumed)
    assert result.manifest["llm_calls_cached"] == 25 - 12 and result.ran == ["instructions", "write"]
    assert checksums(out / "data") == reference


# ---------------------------------------------------------------- answers the pipeline cannot use


def test_repairs_resend_unusable_and_rechecked_answers_while_rounds_remain() -> None:
    from PersonalWAB.construct.llm_cache import Answer, ask_with_repairs, request

    class ScriptedLLM:  # answers by how many times the same conversation was asked
        def __init__(self, script: dict[str, list[str]]):
            self.script, self.labels = script, []

        def ask_all(self, requests, label):
            self.labels.append(label)
            return [Answer(self.script[r.messages[1]["content"]][(len(r.messages) - 2) // 2], 0, 0, 0.0, True, False)
                    for r in requests]

    def parse(text: str) -> str:
        if text.startswith("bad"):
            raise prompts.AnswerError(f"unusable: {text}")
        return text

    llm = ScriptedLLM({"a": ["bad 1", "fine a"], "b": ["same", "fresh b"], "c": ["same", "x"], "d": ["bad"] * 3})
    asked = ask_with_repairs(llm, [request("sys", user, 10) for user in "abcd"], parse, "fix: {problem}",
                             "item", 2, recheck=lambda values: [i for i in (2,) if values[i] == values[1]],
                             recheck_message="say it differently")
    assert asked.values == ["fine a", "same", "x", None]
    assert asked.problems == [None, None, None, "unusable: bad"]
    assert asked.repair_requests == 3 + 1  # a, c (a repeat of b) and d in round 2; d in round 3
    assert llm.labels == ["writing items", "re-asking for 3 item(s)", "re-asking for 1 item(s)"]


@pytest.mark.slow
def test_unusable_answers_are_sent_back_then_dropped(raw_dir: Path, tmp_path: Path) -> None:
    stubborn = {}

    def responder(request: dict) -> ScriptedReply:
        messages = request["messages"]
        if messages[0]["content"] == prompts.PROFILE_SYSTEM:
            history = messages[1]["content"]
            stubborn.setdefault("user", history)
            if history == stubborn["user"]:  # one user never gets a usable profile
                return ScriptedReply(content="I would rather not say.")
            if len(messages) == 2:  # everyone else on the second try
                return ScriptedReply(content='{"Gender": "Female"}')
        if messages[0]["content"] == prompts.INSTRUCTION_SYSTEM and len(messages) == 2:
            return ScriptedReply(content="Search please.")  # too short: sent back once
        return respond(request)

    with ScriptedLLMServer(responder) as server:
        result = build(settings(raw_dir, tmp_path / "out", server.url), steps=TEXT_STEPS, log=quiet)
        retries = [r for r in server.requests if len(r["messages"]) > 2]
    counts = result.manifest["counts"]
    assert counts["users"] == 11 and counts["users_dropped_at_profiles"] == 1
    assert counts["instructions_dropped"] == 0 and counts["test_tasks"] > 0
    profile_retry = [r for r in retries if r["messages"][0]["content"] == prompts.PROFILE_SYSTEM]
    assert any("missing field(s): Age" in r["messages"][-1]["content"] for r in profile_retry)
    assert any("no JSON object found" in r["messages"][-1]["content"] for r in profile_retry)
    data = load_benchmark_data(tmp_path / "out" / "data", reload=True)
    assert len(data.histories) == len(data.profiles) == 11


def test_answer_parsers() -> None:
    profile = {name: "x" for name in PROFILE_FIELDS} | {"Price Sensitivity": "high", "Diversity Preference": "LOW",
                                                        "Interaction Complexity": "Medium", "Focus Aspect": ["a", "b"]}
    parsed = prompts.parse_profile("Sure:\n```json\n" + json.dumps(profile) + "\n```")
    assert parsed["Price Sensitivity"] == "High" and parsed["Diversity Preference"] == "Low"
    assert parsed["Focus Aspect"] == "a, b"
    with pytest.raises(prompts.AnswerError, match="Low, Medium or High"):
        prompts.parse_profile(json.dumps({**profile, "Price Sensitivity": "Very"}))
    assert prompts.parse_instruction('Request: "Find me a red  kettle\nfor tea."') == "Find me a red kettle for tea."
    assert prompts.parse_choice("I think History C fits.", 4) == 2 and prompts.parse_choice("none", 4) is None
    assert prompts.parse_ranking("3, 1, 3, 9", 4) == ([2, 0, 1, 3], False)


# ---------------------------------------------------------------- evaluation and statistics


def test_consistency_on_built_and_synthetic_data(built, tiny_data_dir: Path, tmp_path: Path) -> None:
    from PersonalWAB.construct.consistency import (
        ConsistencyConfig,
        _RankCase,
        evaluate_consistency,
        random_baseline,
        ranking_scores,
    )
    from PersonalWAB.construct.llm_cache import LLMSettings

    assert ranking_scores([2, 0, 1], {0}) == {"recall@P": 0.0, "mrr": 0.5, "ndcg": pytest.approx(1 / 1.5849625)}
    case = _RankCase("u", [{}] * 5, {0, 3})  # the random baseline is the mean over every ranking
    every = [ranking_scores(list(order), case.positive) for order in itertools.permutations(range(5))]
    assert random_baseline([case]) == pytest.approx({k: sum(e[k] for e in every) / len(every) for k in every[0]})
    with ScriptedLLMServer(respond) as judge:
        reports = [evaluate_consistency(ConsistencyConfig(data_dir=d, judge=LLMSettings("scripted", api_base=judge.url),
                                                          users=0, cache_dir=tmp_path / "cache"), log=quiet)
                   for d in (built[0] / "data", tiny_data_dir)]
        calls = len(judge.requests)
        judge_settings = LLMSettings("scripted", api_base=judge.url)
        again = evaluate_consistency(ConsistencyConfig(data_dir=tiny_data_dir, judge=judge_settings,
                                                       users=0, cache_dir=tmp_path / "cache"), log=quiet)
        assert len(judge.requests) == calls  # the judge's answers come from the cache
    assert again["llm"]["calls"] == 0 and again["llm"]["cached"] == 32
    built_report, synthetic_report = reports
    assert again["matching"] == synthetic_report["matching"]
    for report in reports:
        assert report["matching"]["chance"] == 0.25 and report["matching"]["unparsed"] == 0
        assert 0 <= report["ranking"]["ndcg"] <= 1 and report["ranking"]["incomplete_answers"] == 0
        assert report["ranking"]["random"] == pytest.approx(
            {"recall@P": 0.1, "mrr": sum(1 / r for r in range(1, 11)) / 10,
             "ndcg": sum(1 / math.log2(r + 1) for r in range(1, 11)) / 10})
    # profiles that name the stores a user buys from point the judge to the user's own history
    assert synthetic_report["matching"]["accuracy"] > 0.5
    assert built_report["matching"]["cases"] == 12 and synthetic_report["matching"]["cases"] == 16


@pytest.mark.slow
def test_statistics_and_figure(tiny_data) -> None:
    from PersonalWAB.construct.stats import data_statistics, markdown_table, plot_statistics

    report = data_statistics(tiny_data)
    counts = tiny_data.synthetic_manifest["counts"]
    assert (report["users"], report["behaviours"], report["products"]) == (16, counts["behaviours"], counts["products"])
    assert report["test_tasks"] == counts["test_tasks"]
    assert [report[f"test_{t}"] for t in ("search", "recommend", "review")] == list(counts["test_types"].values())
    assert report["target_side_products"] == counts["target_side_products"]
    histories = tiny_data.histories.values()
    assert report["behaviours_train_time"] == sum(b["split"] == "history" for h in histories for b in h) / 16
    assert 0 < report["tokens_train_time"] < report["tokens_test_time"] < report["tokens_per_user"]
    assert sum(report["profile_distributions"]["Gender"].values()) == pytest.approx(1.0)
    table = markdown_table([report, report], ["a", "b"])
    assert "| users | 16 | 16 | 1,000 |" in table
    assert plot_statistics([report], ["tiny"])[:4] == b"\x89PNG"


# ---------------------------------------------------------------- fetcher


def test_fetch_streams_the_asked_categories(raw_dir: Path, tmp_path: Path) -> None:
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from PersonalWAB.construct.fetch import fetch_categories

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(raw_dir)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        dest = tmp_path / "fetched"
        sample = fetch_categories(["Electronics"], dest, base_url=base, max_lines=3, log=quiet)
        record = sample["files"][amazon_raw.review_file("Electronics")]
        assert not record["complete"]
        assert len((dest / amazon_raw.review_file("Electronics")).read_bytes().splitlines()) == 3
        whole = fetch_categories(["Electronics", "Grocery_and_Gourmet_Food"], dest, base_url=base, log=quiet)
        categories = ("Electronics", "Grocery_and_Gourmet_Food")
        assert set(whole["files"]) == {amazon_raw.review_file(c) for c in categories} | {
            amazon_raw.meta_file(c) for c in categories}
        for relative in whole["files"]:
            assert (dest / relative).read_bytes() == (raw_dir / relative).read_bytes()
        messages: list[str] = []
        fetch_categories(["Electronics"], dest, base_url=base, log=messages.append)
        assert all("already fetched" in m for m in messages)
        with pytest.raises(DataError, match="unknown or missing Electronic"):
            fetch_categories(["Electronic"], dest, base_url=base, log=quiet)
        with pytest.raises(DataError, match="not found"):
            fetch_categories(["Books"], dest, base_url=base, retries=0, log=quiet)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_scripted_server_runs_from_the_shell(tmp_path: Path) -> None:
    url_file = tmp_path / "url"
    process = subprocess.Popen([sys.executable, "-m", "devtools.doubles", "serve", "--responder",
                                "devtools.doubles.construct_responder:respond", "--url_file", str(url_file),
                                "--max_lifetime_s", "120"], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if url_file.exists():
                break
            assert process.poll() is None
            time.sleep(0.1)
        from PersonalWAB.construct.llm_cache import CachedLLM, LLMSettings, request

        llm = CachedLLM(LLMSettings("scripted", api_base=url_file.read_text()), tmp_path / "cache")
        answer = llm.ask(request(prompts.MATCH_SYSTEM, "Profile:\nBrand Preference: Lumo\n\nHistory A:\n\n"
                                 "History B:\n", 8))
        assert answer.content == "A" and not answer.cached and llm.ask(request(
            prompts.MATCH_SYSTEM, "Profile:\nBrand Preference: Lumo\n\nHistory A:\n\nHistory B:\n", 8)).cached
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=HANG_GUARD_S)
    assert process.returncode == 0 and "stopped after 1 request(s)" in output


def test_construct_flags_config_file_and_old_spellings(raw_dir: Path, tmp_path: Path, capsys) -> None:
    from PersonalWAB.construct.commands import BuildRun, FetchSettings, StatsSettings
    from PersonalWAB.settings import parse, parse_many

    flags = ["--raw_dir", str(raw_dir), "--out", str(tmp_path / "b"), "--categories", "Electronics,Books",
             "--num_users", "7", "--temperature", "0.2", "--search_backend", "all", "--steps", "select,join",
             "--dry_run"]
    config_file = tmp_path / "build.yaml"
    config_file.write_text(f"raw_dir: {raw_dir}\nout: {tmp_path / 'b'}\ncategories: [Electronics, Books]\n"
                           "num_users: 7\ntemperature: 0.2\nsearch_backend: all\nsteps: select,join\ndry_run: true\n")
    from_flags = parse_many([BuildConfig, BuildRun], flags)
    assert parse_many([BuildConfig, BuildRun], ["--config", str(config_file)]) == from_flags
    config, run = from_flags
    assert config.categories == ("Electronics", "Books") and config.search_backends == ("lucene", "bm25s")
    assert run.dry_run and config.describe()["categories"] == ["Electronics", "Books"]
    assert parse_many([BuildConfig, BuildRun], ["--config", str(config_file), "--num_users", "9"])[0].num_users == 9

    fetch = parse(FetchSettings, ["--raw_dir", str(tmp_path / "raw"), "--reviews_only"])
    stats = parse(StatsSettings, ["--data_dir", "a", "--data_dir", "b", "--no_published"])
    err = capsys.readouterr().err
    assert fetch.out == str(tmp_path / "raw") and fetch.reviews_only
    assert stats.data_dir == ["a", "b"] and stats.published is False
    assert "--raw_dir is deprecated; use --out" in err and "--no_published is deprecated; use --published 0" in err


def test_construct_manifest_records_the_resolved_settings(built) -> None:
    recorded = built[1].manifest["parameters"]
    given = settings(Path(recorded["raw_dir"]), built[0], recorded["api_base"])
    assert recorded == json.loads(json.dumps(given.describe()))
    assert recorded["search_backend"] == "lucene" and recorded["num_users"] == 12


def test_an_empty_review_file_is_named(tmp_path: Path) -> None:
    from PersonalWAB.construct.users import count_users

    empty = tmp_path / "Electronics.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match=rf"{empty}: holds no reviews .*Electronics"):
        count_users([("Electronics", empty)])


def test_answers_kept_one_file_per_request_still_count(tmp_path: Path) -> None:
    """A construct cache in the one-JSON-file-per-request layout answers without a call."""
    from PersonalWAB.construct.llm_cache import CachedLLM, LLMSettings, request, request_key, request_payload

    settings = LLMSettings("scripted", api_base="http://127.0.0.1:9")  # nothing listens: a call would fail
    req = request("system text", "user text", 16)
    key = request_key(settings.model, req, settings.temperature)
    entry = {"request": request_payload(settings.model, req, settings.temperature),
             "reply": {"content": "kept answer", "prompt_tokens": 3, "completion_tokens": 2, "cost_usd": 0.5,
                       "price_known": True}}
    (tmp_path / key[:2]).mkdir()
    (tmp_path / key[:2] / f"{key}.json").write_text(json.dumps(entry))
    answer = CachedLLM(settings, tmp_path).ask(req)
    assert (answer.content, answer.cached, answer.cost_usd) == ("kept answer", True, 0.5)
