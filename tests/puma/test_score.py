"""PUMA step 4 and the files evaluation (`PUMA.fast_test`) under `--recipe release`, as the
release's `test.py` scores, and the raw search labels of step 1."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from PersonalWAB.protocol import project_protocol

REVIEW_FN, SEARCH_FN = "add_product_review", "search_product_by_query"


class StubEmbedder:
    """Cosines from a table (default 0.5), noting every text it was asked to encode."""

    def __init__(self, table: dict[tuple[str, str], float]):
        self.table = table
        self.seen: list[str] = []

    def remember(self, texts, cache_file=None) -> int:
        self.seen += list(texts)
        return 0

    def similarity(self, a: str, b: str) -> float:
        return self.table.get((a, b), 0.5)


def review_task(instruction: str, real: str) -> dict:
    return {"task": instruction, "type": "review", "user_id": "u", "timestamp": 0,
            "target": {"review": {"text": real}, "product_info": {"parent_asin": "B000"}}}


def stub_engines(tiny_data, table: dict[tuple[str, str], float]) -> SimpleNamespace:
    return SimpleNamespace(protocol=project_protocol(), data=tiny_data, embedder=StubEmbedder(table))


def test_review_scores_raw_under_release_clipped_under_improved(tiny_data):
    from PUMA.candidate_scores import score_candidates

    task = review_task("Write my review", "REAL")
    placeholder = project_protocol().text("review.empty")
    table = {("REAL", "bad"): -0.25, ("REAL", ""): -0.125, ("REAL", "same"): 1.0000002,
             ("REAL", placeholder): 0.0625, ("REAL", "Say: hi"): -0.5}
    candidates = {"Write my review": ["bad", "", "same", "Say: hi", "bad"]}
    engines = stub_engines(tiny_data, table)
    release = score_candidates(engines, [task], candidates, parsing="strict", review_score="raw_cosine")
    assert release == {"Write my review": {"bad": -0.25, "": -0.125, "same": 1.0000002, "Say: hi": -0.5}}
    assert "" in engines.embedder.seen and placeholder not in engines.embedder.seen  # "" is encoded as ""
    engines = stub_engines(tiny_data, table)
    improved = score_candidates(engines, [task], candidates, parsing="lenient", review_score="environment")
    assert improved == {"Write my review": {"bad": 0.0, "": 0.0625, "same": 1.0, "Say: hi": 0.0}}
    assert placeholder in engines.embedder.seen
    # no parsing (GRPO's reward): every candidate is the parameter, scored as the environment does
    default = score_candidates(stub_engines(tiny_data, table), [task], candidates)
    assert default == {"Write my review": {"bad": 0.0, "": 0.0625, "same": 1.0, "Say: hi": 0.0}}


def test_review_with_the_wrong_function_scores_zero_under_release(tiny_data):
    from PUMA.candidate_scores import score_candidates

    task = dict(review_task("Find me a kettle", "REAL"), type="search")  # a review posted for a search task
    scores = score_candidates(stub_engines(tiny_data, {}), [task], {"Find me a kettle": ["bad"]},
                              functions={"Find me a kettle": REVIEW_FN}, parsing="strict", review_score="raw_cosine")
    assert scores == {"Find me a kettle": {"bad": 0.0}}


def test_a_repeated_instruction_is_scored_against_its_last_task(tiny_data):
    from PUMA.candidate_scores import score_candidates, scoring_facts

    tasks = [review_task("X", "first real"), review_task("Y", "other"), review_task("X", "second real")]
    table = {("first real", "c"): 0.1, ("second real", "c"): 0.9, ("other", "d"): 0.3}
    for parsing, review_score in (("strict", "raw_cosine"), ("lenient", "environment")):
        scores = score_candidates(stub_engines(tiny_data, table), tasks, {"Y": ["d"], "X": ["c"], "Z": ["e"]},
                                  parsing=parsing, review_score=review_score)
        assert list(scores) == ["X", "Y"]  # the order of each instruction's first task, as the release's dict
        assert scores["X"] == {"c": 0.9} and scores["Y"] == {"d": 0.3}
    assert scoring_facts("strict", "raw_cosine", tasks)["repeated_instruction_count"] == 1


def test_search_and_recommend_scores_are_the_releases_rank_formula(tiny_data, tiny_engines):
    from PersonalWAB.envs.pwab.functions.search_product_by_query import search_product_by_query
    from PersonalWAB.envs.pwab.scoring import rank_score
    from PUMA.candidate_scores import score_jobs

    task = next(t for t in tiny_data.split("train") if t["type"] == "search")
    query = task["target"]["product_info"]["title"]
    results = search_product_by_query(SimpleNamespace(engines=tiny_engines, protocol=tiny_engines.protocol), query)
    target = task["target"]["product_info"]["parent_asin"]
    first = next((i for i, text in enumerate(results) if target in text), None)
    expected = 0.0 if first is None else 1 - first / len(results)
    assert rank_score(target, results) == expected
    assert score_jobs(tiny_engines, [(task, SEARCH_FN, query), (task, SEARCH_FN, f"  {query} ")], "strict") == \
        [expected, expected]
    assert rank_score("B01", ["Product 0: B012", "Product 1: B01"]) == 1.0  # a substring counts, as in the release


def test_task_result_is_the_last_candidate_that_found_the_target_or_the_last_review():
    from PUMA.fast_test import predicted_type, task_result

    assert task_result("search", [0.5, 0.0]) == 0.5
    assert task_result("search", [0.9, 0.5, 0.0]) == 0.5  # the last that found it, not the best
    assert task_result("recommend", [0.0, 0.0]) == 0.0 and task_result("search", []) == 0.0
    assert task_result("review", [0.7, -0.2]) == -0.2 and task_result("review", []) == 0.0
    assert [predicted_type(x) for x in (SEARCH_FN, "get_recommendations_by_history", REVIEW_FN, "stop",
                                        " search_product_by_query")] == \
        ["search", "recommend", "review", "review", "review"]


def _fast_test_files(tiny_data, tmp_path: Path) -> tuple[list[dict], dict, dict]:
    tasks = tiny_data.split("test")
    search = [t for t in tasks if t["type"] == "search"]
    reviews = [t for t in tasks if t["type"] == "review"]
    functions = {t["task"]: [{"search": SEARCH_FN, "recommend": "get_recommendations_by_history",
                              "review": REVIEW_FN}[t["type"]], "ignored"] for t in tasks}
    params = {}
    for t in tasks:
        target = t["target"]
        params[t["task"]] = {"search": [target["product_info"]["title"], "zzzz qqqq"],
                             "recommend": [target["product_info"]["parent_asin"]],
                             "review": [target["review"]["text"], "Unrelated words about tax law.", ""]}[t["type"]]
    functions[search[1]["task"]] = [REVIEW_FN]  # wrong function: 0 and 0, its parameters are never read
    del params[search[1]["task"]]
    functions[reviews[1]["task"]] = ["I do not know"]  # anything but search/recommend counts as review
    (tmp_path / "f.json").write_text(json.dumps(functions))
    (tmp_path / "p.json").write_text(json.dumps(params))
    return tasks, functions, params


def test_fast_test_semantics_on_tiny_data(tiny_data, tiny_engines, tmp_path: Path):
    from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
    from PUMA.fast_test import evaluate, summarize
    from PUMA.candidate_scores import score_jobs

    tasks, functions, params = _fast_test_files(tiny_data, tmp_path)
    rows = evaluate(tiny_engines, tasks, functions, params)
    by_instruction = {r["instruction"]: r for r in rows}
    search = [t for t in tasks if t["type"] == "search"]
    wrong = by_instruction[search[1]["task"]]
    assert (wrong["function_acc"], wrong["result_acc"], wrong["candidate_scores"]) == (0.0, 0.0, [])
    found = by_instruction[search[0]["task"]]
    assert found["candidate_scores"][1] == 0.0 and found["result_acc"] == found["candidate_scores"][0] > 0
    review = next(t for t in tasks if t["type"] == "review")
    row = by_instruction[review["task"]]
    real = review["target"]["review"]["text"]
    assert row["candidate_scores"][0] == pytest.approx(1.0, abs=1e-5)
    raw = tiny_engines.embedder.similarity(real, "")
    assert row["candidate_scores"][2] == raw and row["result_acc"] == raw  # the last candidate's raw cosine
    assert row["candidate_scores"][1] == tiny_engines.embedder.similarity(real, "Unrelated words about tax law.")
    garbage = by_instruction[[t for t in tasks if t["type"] == "review"][1]["task"]]
    assert garbage["function"] == "I do not know" and garbage["function_acc"] == 1.0
    for r, task in zip(rows, tasks):
        if r["function_acc"]:
            jobs = [(task, FUNCTION_FOR_TASK_TYPE[task["type"]], c) for c in params[task["task"]]]
            assert r["candidate_scores"] == score_jobs(tiny_engines, jobs, "strict", "raw_cosine")
    summary = summarize(rows)
    assert summary["overall"]["total"] == len(tasks)
    assert summary["search"]["tool_accuracy"] == pytest.approx(1 - 1 / len(search))
    assert summary["overall"]["result"] == pytest.approx(sum(r["result_acc"] for r in rows) / len(rows))


def test_fast_test_writes_scores_table_and_record(tiny_data, tiny_engines, tmp_path: Path):
    from PUMA.fast_test import FastTestConfig, fast_test

    _fast_test_files(tiny_data, tmp_path)
    lines: list[str] = []
    config = FastTestConfig(function_file=str(tmp_path / "f.json"), param_file=str(tmp_path / "p.json"),
                            output_file=str(tmp_path / "scores.json"), data_dir=str(tiny_data.data_dir))
    out = fast_test(config, log=lines.append)
    written = json.loads(out.read_text())
    assert written["recipe"] == "release" and len(written["tasks"]) == len(tiny_data.split("test"))
    table = next(line for line in lines if "Tool Accuracy Avg" in line)
    assert all(name in table for name in ("| Search", "| Recommend", "| Review", "| Overall", "Result Avg"))
    record = json.loads((tmp_path / "scores.puma_run.json").read_text())
    assert record["step"] == "fast_test" and record["summary"] == written["summary"]
    assert any("first-occurrence order" in line for line in record["departures_from_release"])
    (tmp_path / "p.json").write_text("{}")
    with pytest.raises(ValueError, match="param file has no entry"):
        fast_test(config, log=lambda _: None)
    with pytest.raises(ValueError, match="run.py"):
        fast_test(FastTestConfig(recipe="improved"), log=lambda _: None)


def test_search_label_kept_raw_under_release(tiny_data):
    from PersonalWAB.agents.heuristic import search_query
    from PersonalWAB.llm import LLMClient
    from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
    from PUMA.data import llm_query, param_label

    task = next(t for t in tiny_data.split("train") if t["type"] == "search")
    behaviours = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    protocol = project_protocol()
    memory = protocol.puma_memory(behaviours, "search")
    quoted = '  "wireless earbuds\n  TROOIX" '
    replies = [ScriptedReply(content=quoted), ScriptedReply(content=""), ScriptedReply(content=None),
               ScriptedReply(content=quoted), ScriptedReply(content=quoted)]
    with ScriptedLLMServer(replies) as server:
        client = LLMClient("openai/query-writer", api_base=server.url, max_retries=0)
        fallback = lambda: search_query(task["task"], behaviours)  # noqa: E731
        assert llm_query(protocol, client, task["task"], memory, fallback, raw=True) == quoted
        assert llm_query(protocol, client, task["task"], memory, fallback, raw=True) == ""
        assert llm_query(protocol, client, task["task"], memory, fallback, raw=True) == "None"
        assert param_label(protocol, tiny_data, task, behaviours, memory, "train", client) == quoted
        assert param_label(protocol, tiny_data, task, behaviours, memory, "train", client, search_labels="cleaned") == \
            "wireless earbuds TROOIX"


def test_offline_search_labels_are_a_recorded_departure(tiny_puma_data, tiny_model_dir: Path, tmp_path: Path):
    from PUMA.data import DataConfig, prepare_param_data

    lines: list[str] = []
    (path,) = prepare_param_data(DataConfig(data_dir=str(tiny_puma_data.data_dir), out_dir=str(tmp_path),
                                            model_path=str(tiny_model_dir), splits="train", mem_token_length=64),
                                 log=lines.append)
    record = json.loads(path.with_name("param_train.puma_run.json").read_text())
    assert record["search_labels"] == "offline fallback"
    assert any("offline fallback" in line for line in record["departures_from_release"])
    assert any(line.startswith("warning:") and "--query_model" in line for line in lines)
