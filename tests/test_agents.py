"""LLM agents end to end through litellm against a scripted OpenAI-compatible server on 127.0.0.1."""

import pytest

from PersonalWAB.agents.react import parse_react
from PersonalWAB.results import compute_statistics, load_result_file
from PersonalWAB.run import RunConfig, run
from PersonalWAB.testing.responders import instruction_of, react_writer, sensible_call, tool_caller
from PersonalWAB.testing.scripted_server import ScriptedLLMServer, ScriptedReply

SENTINEL_KEY = "sk-SENTINEL-DO-NOT-LEAK-0123456789abcdef"


def run_against(server, data_dir, tmp_path, name="r.json", **overrides):
    values = {"data_dir": str(data_dir), "output": str(tmp_path / name), "model": "openai/scripted-model",
              "api_base": server.url, "agent_strategy": "function_calling", "agent_memory": "none",
              "max_retries": 2, "end_index": 6}
    values.update(overrides)
    return run(RunConfig(**values), log=lambda _: None)


@pytest.fixture(autouse=True)
def sentinel_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_KEY)


def test_tool_calls_are_scored_and_usage_recorded(tiny_data_dir, tiny_engines, tmp_path):
    with ScriptedLLMServer(tool_caller) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path)
    _, records = load_result_file(path)
    assert header["results"]["overall"]["avg_action_acc"] == 1.0
    assert compute_statistics(records) == header["results"]
    assert "no price" in header["run_args"]["cost_note"]
    for record in records:
        usage = record["info"]["usage"]
        assert len(usage["total_tokens"]) == 1 and usage["total_tokens"][0] > 0
        assert record["traj"][0]["role"] == "system" and record["traj"][2]["tool_calls"]
    assert SENTINEL_KEY not in path.read_text()


def test_text_reply_in_single_turn_scores_zero(tiny_data_dir, tiny_engines, tmp_path):
    with ScriptedLLMServer([ScriptedReply(content="Could you tell me more about what you need?")]) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, end_index=3)
    _, records = load_result_file(path)
    assert all(r["action_acc"] == [] for r in records)
    assert header["results"]["overall"]["avg_action_acc"] == 0.0
    assert records[0]["info"]["actions"] == []


def test_malformed_arguments_and_unknown_tool(tiny_data_dir, tiny_engines, tmp_path):
    def script(request):
        tool_messages = [m for m in request["messages"] if m["role"] == "tool"]
        if not tool_messages:
            return ScriptedReply(tool_calls=[("buy_it_now", "{}")])
        if len(tool_messages) == 1:
            assert tool_messages[0]["content"] == "Unknown action buy_it_now"
            name, _ = sensible_call(instruction_of(request))
            return ScriptedReply(tool_calls=[(name, '{"query": "unterminated')])
        raise AssertionError("the task must have ended")

    with ScriptedLLMServer(script) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, end_index=2)
    _, records = load_result_file(path)
    for record in records:
        assert record["action_acc"] == [0.0] and record["res_acc"] == [0.0]
        assert record["traj"][-1]["content"].startswith("Error:")
        assert len(record["info"]["usage"]["total_tokens"]) == 2
    assert header["results"]["overall"]["avg_interaction_times"] == 2.0


def test_react_parsing_tolerates_drift():
    assert parse_react("Thought: t\nAction: search_product_by_query\nArguments: {\"query\": \"mug\"}").arguments == {
        "query": "mug"}
    drift = parse_react("**Action:** get_recommendations_by_history\n**Action Input:** ```json\n"
                        "{\"product_sequence\": [\"B1\"]}\n```")
    assert drift.name == "get_recommendations_by_history" and drift.arguments == {"product_sequence": ["B1"]}
    assert parse_react("Action: add_product_review\nArguments: {review: nice}").arguments == "{review: nice}"
    assert parse_react("Sure! Here are some ideas.").name == "respond"


def test_react_agent_end_to_end_with_format_drift(tiny_data_dir, tiny_engines, tmp_path):
    calls = {"n": 0}

    def script(request):
        calls["n"] += 1
        if calls["n"] == 1:
            return ScriptedReply(content="I would search for it.")
        return react_writer(request)

    with ScriptedLLMServer(script) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, agent_strategy="react", end_index=3)
    _, records = load_result_file(path)
    scores = sorted(len(r["action_acc"]) for r in records)
    assert scores == [0, 1, 1]
    assert all("tool_calls" not in m for r in records for m in r["traj"])


def test_rate_limit_is_retried_and_counted_once(tiny_data_dir, tiny_engines, tmp_path):
    replies = iter([ScriptedReply(status=429)])

    def script(request):
        return next(replies, None) or tool_caller(request)

    with ScriptedLLMServer(script) as server:
        _, path, _ = run_against(server, tiny_data_dir, tmp_path, end_index=1)
        assert len(server.requests) == 2
    _, records = load_result_file(path)
    assert len(records[0]["info"]["usage"]["total_tokens"]) == 1
    assert records[0]["action_acc"] == [1.0]


def test_persistent_server_error_is_recorded_then_resumed(tiny_data_dir, tiny_engines, tmp_path):
    def broken_for_task_1(request):
        if instruction_of(request) == tiny_engines.data.tasks["test"][1]["task"]:
            return ScriptedReply(status=500)
        return tool_caller(request)

    with ScriptedLLMServer(broken_for_task_1) as server:
        run_against(server, tiny_data_dir, tmp_path, end_index=3)
    _, records = load_result_file(tmp_path / "r.json")
    errored = [r for r in records if "error" in r["info"]]
    assert [r["task_id"] for r in errored] == [1]
    assert SENTINEL_KEY not in errored[0]["info"]["error"]
    with ScriptedLLMServer(tool_caller) as server:
        run_against(server, tiny_data_dir, tmp_path, end_index=3, resume_from=str(tmp_path / "r.json"))
        assert len(server.requests) == 1
    _, records = load_result_file(tmp_path / "r.json")
    assert sorted(r["task_id"] for r in records) == [0, 1, 2]
    assert all("error" not in r["info"] and r["action_acc"] == [1.0] for r in records)


TABLE3 = [
    ("function_calling", "none"),
    ("function_calling", "random"),
    ("function_calling", "last"),
    ("function_calling", "relevant"),
    ("react", "last"),
    ("react_reflect", "last"),
    ("recmind", "recmind"),
    ("function_calling", "taskspe"),
]


@pytest.mark.parametrize("strategy, memory", TABLE3)
def test_every_strategy_and_memory_runs(tiny_data_dir, tiny_engines, tmp_path, strategy, memory):
    responder = react_writer if strategy.startswith("react") else tool_caller
    with ScriptedLLMServer(responder) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, agent_strategy=strategy,
                                      agent_memory=memory, memory_length=5)
        system = server.requests[0]["messages"][0]["content"]
    assert header["results"]["overall"]["avg_action_acc"] == 1.0
    assert header["results"]["overall"]["total_count"] == 6
    if memory != "none":
        assert "earlier behaviour" in system
    if strategy == "recmind":
        assert any(t["function"]["name"] == "get_product_details_by_asin" for t in server.requests[0]["tools"])
    assert SENTINEL_KEY not in path.read_text()


def test_interecagent_memory_is_updated_after_each_task(tiny_data_dir, tiny_engines, tmp_path):
    from PersonalWAB.interec_memory import InterecMemoryStore

    store_file = tmp_path / "interec.json"
    store_file.write_text("{}")

    def script(request):
        if "tools" not in request:
            return ScriptedReply(content='{"like": ["quiet fans"], "dislike": [], "expect": ["fast shipping"]}')
        return tool_caller(request)

    with ScriptedLLMServer(script) as server:
        run_against(server, tiny_data_dir, tmp_path, agent_memory="interecagent", end_index=2,
                    interec_memory_file=str(store_file))
    user = tiny_engines.data.tasks["test"][0]["user_id"]
    assert "quiet fans" in InterecMemoryStore(store_file).get(user)["like"]


def test_concurrency_gives_same_results_and_overlaps_calls(tiny_data_dir, tiny_engines, tmp_path):
    def slow_tool_caller(request):
        reply = tool_caller(request)
        reply.delay_s = 0.1
        return reply

    overlap, results = {}, {}
    for workers in (1, 8):
        with ScriptedLLMServer(slow_tool_caller) as server:
            _, path, _ = run_against(server, tiny_data_dir, tmp_path, name=f"c{workers}.json", end_index=16,
                                     max_concurrency=workers)
        overlap[workers] = server.max_in_flight
        results[workers] = {r["task_id"]: (r["action_acc"], r["res_acc"]) for r in load_result_file(path)[1]}
    assert results[1] == results[8]
    assert overlap[1] == 1 and overlap[8] > 1  # the speed-up itself is measured in scripts/benchmark.py
