"""LLM agents end to end through litellm against a scripted OpenAI-compatible server on 127.0.0.1,
checked against the release's rules: what the model receives, how replies are read, how steps count."""

import json
import shutil

import pytest

from PersonalWAB.agents.react import parse_react
from PersonalWAB.agents.llm_agent import UnusableReply, conversation_text
from PersonalWAB.data.schema import TASK_TYPE_OF_FUNCTION
from PersonalWAB.memory import system_prompt
from PersonalWAB.protocol import project_protocol
from PersonalWAB.metrics import compute_statistics
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.responders import instruction_of, react_writer, sensible_call, tool_caller
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
from release_fixture import FAKE_TEXTS

SENTINEL_KEY = "sk-SENTINEL-DO-NOT-LEAK-0123456789abcdef"
FC_TOOLS = ("search_product_by_query", "get_recommendations_by_history", "add_product_review", "stop")


def run_against(server, data_dir, tmp_path, name="r.json", **overrides):
    values = {"data_dir": str(data_dir), "out": str(tmp_path / name), "model": "openai/scripted-model",
              "api_base": server.url, "agent_strategy": "function_calling", "agent_memory": "none",
              "max_retries": 2, "end_index": 6}
    values.update(overrides)
    return run(RunConfig(**values), log=lambda _: None)


@pytest.fixture(autouse=True)
def sentinel_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_KEY)


def test_first_request_and_scored_tool_calls(tiny_data_dir, tiny_engines, tmp_path):
    with ScriptedLLMServer(tool_caller) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path)
        first = server.requests[0]
    protocol = project_protocol()
    assert first["messages"][0] == {"role": "system", "content": system_prompt(protocol, "none", -1)}
    assert first["messages"][1]["content"] == protocol.first_observation(tiny_engines.data.tasks["test"][0])
    assert first["tools"] == protocol.tools(FC_TOOLS) and first["tool_choice"] == "auto"
    assert first["temperature"] == 0.0
    _, records = load_result_file(path)
    assert header["results"]["overall"]["avg_action_acc"] == 1.0
    assert compute_statistics(records) == header["results"]
    assert "no price" in header["run_args"]["cost_note"]
    for record in records:
        usage = record["info"]["usage"]
        assert len(usage["total_tokens"]) == 1 and usage["total_tokens"][0] > 0
        assert record["traj"][0]["role"] == "system" and record["traj"][2]["tool_calls"]
    assert SENTINEL_KEY not in path.read_text()


def test_a_run_with_a_pack_sends_exactly_the_packs_texts(tiny_data_dir, tiny_engines, tmp_path, fake_pack,
                                                        fake_protocol):
    data_dir = tmp_path / "data"  # a copy: its search index is built from the pack's product texts
    shutil.copytree(tiny_data_dir, data_dir, ignore=shutil.ignore_patterns("indexes"))
    with ScriptedLLMServer(tool_caller) as server:
        header, _, _ = run_against(server, data_dir, tmp_path, agent_memory="last", end_index=4,
                                   protocol_file=str(fake_pack), search_backend="bm25s")
        requests = list(server.requests)
    assert header["run_args"]["protocol"] == {
        "texts": "release@unpinned", "departures": ["search_backend bm25s: the release searched with Lucene"],
        "standard": False}
    tasks = tiny_engines.data.tasks["test"]
    for request in requests:
        task = next(t for t in tasks if t["task"] == instruction_of(request))
        past = tiny_engines.data.behaviours_before(task["user_id"], task["timestamp"])[::-1][:10]
        memory = FAKE_TEXTS["memory.last.header"] + "\n".join(fake_protocol.behaviour_block(b, i)
                                                              for i, b in enumerate(past))
        assert request["messages"] == [
            {"role": "system", "content": FAKE_TEXTS["system.single_turn"] + memory},
            {"role": "user", "content": fake_protocol.first_observation(task)}]
        assert request["tools"] == [FAKE_TEXTS[f"tool.{name}"] for name in FC_TOOLS]
        assert request["messages"][1]["content"].startswith("R:USER ")


def test_text_reply_in_single_turn_is_a_zero_attempt(tiny_data_dir, tiny_engines, tmp_path):
    with ScriptedLLMServer([ScriptedReply(content="Could you tell me more about what you need?")]) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, end_index=3)
    _, records = load_result_file(path)
    assert all(r["action_acc"] == [0.0] and r["res_acc"] == [0.0] for r in records)
    assert header["results"]["overall"]["avg_action_acc"] == 0.0
    assert records[0]["info"]["actions"] == []
    assert records[0]["traj"][-2:] == [{"role": "assistant", "content": "Could you tell me more about what you need?"},
                                       {"role": "user", "content": "Error: ###STOP###"}]


def test_unknown_tool_goes_on_and_only_the_first_tool_call_is_kept(tiny_data_dir, tiny_engines, tmp_path):
    def script(request):
        tool_messages = [m for m in request["messages"] if m["role"] == "tool"]
        if not tool_messages:
            return ScriptedReply(tool_calls=[("buy_it_now", "{}"), ("stop", "{}")])
        assert tool_messages[0]["content"] == "Unknown action buy_it_now"
        assert len(request["messages"][2]["tool_calls"]) == 1  # the second call was dropped, as in the release
        return tool_caller(request)

    with ScriptedLLMServer(script) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, end_index=2)
    _, records = load_result_file(path)
    assert all(r["action_acc"] == [1.0] for r in records)
    assert header["results"]["overall"]["avg_interaction_times"] == 2.0


def test_malformed_arguments_are_asked_again_then_scored(tiny_data_dir, tiny_engines, tmp_path):
    replies = {"n": 0}

    def twice_bad(request):
        replies["n"] += 1
        name, _ = sensible_call(instruction_of(request))
        if replies["n"] <= 2:
            return ScriptedReply(tool_calls=[(name, '{"query": "unterminated')])
        return tool_caller(request)

    with ScriptedLLMServer(twice_bad) as server:
        _, path, _ = run_against(server, tiny_data_dir, tmp_path, end_index=1)
        assert len(server.requests) == 3 and server.requests[0] == server.requests[2]  # the same request again
    usage = load_result_file(path)[1][0]["info"]["usage"]
    assert len(usage["total_tokens"]) == 1 and usage["extra_calls"] == 2  # asked-again calls are not steps

    with ScriptedLLMServer([ScriptedReply(tool_calls=[("search_product_by_query", "[1, 2]")])]) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, name="bad.json", end_index=1)
        assert len(server.requests) == 10
    record = load_result_file(path)[1][0]
    assert record["action_acc"] == [] and "no usable reply in 10 tries" in record["info"]["format_error"]
    assert "error" not in record["info"]  # the model's failure is a scored result, not a task to run again


def test_react_prompt_parsing_budget_and_api_output(tiny_data_dir, tiny_engines, tmp_path):
    protocol = project_protocol()
    assert parse_react("Thought:\nx\nAction:\nsearch_product_by_query\nArguments:\n{\"query\": \"mug\"}\nmore",
                       protocol).arguments == {"query": "mug"}
    assert parse_react("Action: respond\nArguments: Which colour?", protocol).arguments == {"content": "Which colour?"}
    with pytest.raises(UnusableReply):  # free text: the whole reply is read as action and arguments; asked again
        parse_react("I would search for it.", protocol)

    def thinker(request):
        if len(request["messages"]) == 2:
            return ScriptedReply(content="Thought:\nlook\nAction:\nthink_more\nArguments:\n{}")
        assert request["messages"][-1]["content"] == protocol.text("react.api_output") + "Unknown action think_more"
        return ScriptedReply(content="Thought:\nlook\nAction:\nthink_more\nArguments:\n{}")

    with ScriptedLLMServer(thinker) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, agent_strategy="react", end_index=1,
                                      agent_memory="last")
        first = server.requests[0]
    tools = protocol.tools(FC_TOOLS)
    assert first["messages"][0]["content"].startswith(protocol.react_system_prompt(-1, tools)
                                                      + protocol.text("react.memory.last.header"))
    assert "tools" not in first
    assert load_result_file(path)[1][0]["info"]["usage"]["total_tokens"].__len__() == 3  # the release's budget


def test_react_reflection_follows_each_message_to_the_user_and_is_not_a_step(tiny_data_dir, tiny_engines,
                                                                            tmp_path):
    def script(request):
        if "tools" in request or len(request["messages"]) == 1:  # the reflection: one system message
            return ScriptedReply(content="Next time ask less.")
        turns = sum(m["role"] == "assistant" for m in request["messages"])
        if turns == 0:
            return ScriptedReply(content="Thought:\nask\nAction:\nrespond\nArguments:\nWhat brand do you like?")
        if turns == 2:  # the answer, then the reflection
            return react_writer(request)
        return ScriptedReply(content="Thought:\ndone\nAction:\nstop\nArguments:\n{}")

    with ScriptedLLMServer(script) as server:
        _, path, _ = run_against(server, tiny_data_dir, tmp_path, agent_strategy="react_reflect", end_index=1,
                                 max_steps=5, user_mode="offline", agent_memory="none")
        reflections = [r for r in server.requests if len(r["messages"]) == 1]
    record = load_result_file(path)[1][0]
    assert len(reflections) == 1 and "temperature" not in reflections[0]
    assert len(record["info"]["usage"]["total_tokens"]) == 3 and record["info"]["usage"]["extra_calls"] == 1
    roles = [m["role"] for m in record["traj"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "assistant", "user", "assistant", "user"]
    assert record["traj"][4]["content"] == "Next time ask less."


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


@pytest.mark.slow
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
    ("function_calling", "none", None),
    ("function_calling", "random", "memory.random.header"),
    ("function_calling", "last", "memory.last.header"),
    pytest.param("function_calling", "relevant", "memory.relevant.header", marks=pytest.mark.slow),
    ("react", "last", "react.memory.last.header"),
    ("react_reflect", "last", "react.memory.last.header"),
    ("recmind", "recmind", "memory.recmind.header"),
    pytest.param("function_calling", "taskspe", "memory.taskspe.header", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("strategy, memory, header_text", TABLE3)
def test_every_strategy_and_memory_runs(tiny_data_dir, tiny_engines, tmp_path, strategy, memory, header_text):
    responder = react_writer if strategy.startswith("react") else tool_caller
    with ScriptedLLMServer(responder) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, agent_strategy=strategy,
                                      agent_memory=memory, memory_length=5)
        system = server.requests[0]["messages"][0]["content"]
    assert header["results"]["overall"]["avg_action_acc"] == 1.0
    assert header["results"]["overall"]["total_count"] == 6
    protocol = project_protocol()
    if header_text:
        assert protocol.text(header_text) in system
    if strategy == "recmind":
        assert system.startswith(protocol.text("system.recmind.single_turn"))
        assert [t["function"]["name"] for t in server.requests[0]["tools"]] == \
            ["search_product_by_query", "get_recommendations_by_history", "add_product_review",
             "get_product_details_by_asin", "stop"]
    if memory == "taskspe":
        task = tiny_engines.data.tasks["test"][0]
        assert system.startswith(protocol.text("system.taskspe.single_turn"))
        function = sensible_call(task["task"])[0]
        assert protocol.fill("memory.taskspe.intro", task_type=TASK_TYPE_OF_FUNCTION[function],
                             tool_name=function) in system
    assert SENTINEL_KEY not in path.read_text()


def test_interecagent_memory_is_updated_after_each_task(tiny_data_dir, tiny_engines, tmp_path):
    from PersonalWAB.memory.interec import InterecMemoryStore

    store_file = tmp_path / "interec.json"
    user = tiny_engines.data.tasks["test"][0]["user_id"]
    store_file.write_text(json.dumps({user: {"like": ["B0OLD00001"], "dislike": ["B0QUIET001"], "expect": []}}))

    def script(request):
        if "tools" not in request:
            return ScriptedReply(content='```json\n{"like": ["B0QUIET001"], "dislike": [], "expect": ["tea"]}\n```')
        return tool_caller(request)

    with ScriptedLLMServer(script) as server:
        run_against(server, tiny_data_dir, tmp_path, agent_memory="interecagent", end_index=1,
                    interec_memory_file=str(store_file))
        first, update = server.requests
    protocol = project_protocol()
    assert first["messages"][0]["content"].startswith(system_prompt(protocol, "interecagent", -1))
    assert protocol.text("memory.interecagent.like") + "['B0OLD00001']" in first["messages"][0]["content"]
    assert update["messages"][0]["role"] == "system" and len(update["messages"]) == 1
    assert update["messages"][0]["content"].startswith(protocol.text("interecagent.update").split("{conversation}")[0])
    assert "assistant:Function(arguments=" in update["messages"][0]["content"] and "temperature" not in update
    assert InterecMemoryStore(store_file).get(user) == {"like": ["B0OLD00001", "B0QUIET001"], "dislike": [],
                                                        "expect": ["tea"]}


def test_conversation_text_as_the_release_writes_it():
    traj = [{"role": "system", "content": "S"}, {"role": "user", "content": "U: hi"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "stop", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "1", "name": "stop", "content": "###STOP###"}]
    assert conversation_text(traj) == ("user:U: hi\nassistant:Function(arguments='{}', name='stop')\n"
                                       "tool:###STOP###\n")


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


def test_text_that_utf8_cannot_hold_is_an_error_observation_and_the_file_is_written(tiny_data_dir, tiny_engines,
                                                                                     tmp_path):
    def surrogate_query(request):
        name, _ = sensible_call(instruction_of(request))
        return ScriptedReply(tool_calls=[(name, '{"query": "tea \\ud800", "product_sequence": ["\\ud800"], '
                                                '"review": "\\ud800"}')])

    with ScriptedLLMServer(surrogate_query) as server:
        _, path, _ = run_against(server, tiny_data_dir, tmp_path, end_index=3)
    _, records = load_result_file(path)
    assert len(records) == 3 and all("error" not in r["info"] for r in records)
    assert all(r["traj"][-1]["content"].startswith("Error: 'utf-8' codec can't encode") for r in records)
    assert all(r["action_acc"] == [0.0] for r in records)
    with ScriptedLLMServer(tool_caller) as server:  # the file reads back for a resume like any other
        run_against(server, tiny_data_dir, tmp_path, end_index=3, resume_from=str(path))
        assert server.requests == []
    assert sorted(r["task_id"] for r in load_result_file(path)[1]) == [0, 1, 2]


def test_calls_made_before_a_task_fails_are_still_counted(tiny_data_dir, tiny_engines, tmp_path):
    def fails_on_the_third_call(request):
        if len(request["messages"]) >= 6:  # system, user, two tool turns: the third agent call
            return ScriptedReply(status=500)
        if tools_seen(request) == 0:
            return ScriptedReply(tool_calls=[("get_product_details_by_asin", '{"product_asin": "B0NOPE"}')])
        return ScriptedReply(tool_calls=[("get_product_details_by_asin", '{"product_asin": "B0NOPE2"}')])

    with ScriptedLLMServer(fails_on_the_third_call) as server:
        header, path, _ = run_against(server, tiny_data_dir, tmp_path, agent_strategy="recmind",
                                      agent_memory="recmind", end_index=2, max_retries=0)
    for record in load_result_file(path)[1]:
        assert "error" in record["info"] and len(record["info"]["usage"]["total_tokens"]) == 2
        assert record["info"]["usage"]["prompt_tokens"][0] > 0


def tools_seen(request):
    return sum(1 for m in request["messages"] if m["role"] == "tool")


def test_invented_tool_call_ids_count_the_episode_actions_from_zero(tiny_data, tiny_engines):
    from PersonalWAB.agents.heuristic import HeuristicAgent
    from PersonalWAB.envs.pwab.env import PWABEnv
    from PersonalWAB.envs.users.offline_user import OfflineUser

    env = PWABEnv(tiny_engines, "test", user=OfflineUser(seed=0), max_steps=10)
    episode = HeuristicAgent(tiny_data, "none").solve(env, 0)
    calls = [m["tool_calls"][0]["id"] for m in episode.traj if m.get("tool_calls")]
    results = [m["tool_call_id"] for m in episode.traj if m["role"] == "tool"]
    assert calls == results == [f"call_{n}" for n, a in enumerate(episode.actions) if a["name"] != "respond"]
    assert calls[0] == "call_0" and "respond" in [a["name"] for a in episode.actions]


def test_a_model_tool_call_keeps_its_own_id_and_only_the_first_call():
    from PersonalWAB.types import Action, Episode

    episode = Episode()
    action = Action("stop", {})
    message = {"role": "assistant", "content": "done", "tool_calls": [
        {"id": "abc", "type": "function", "function": {"name": "stop", "arguments": "{}"}},
        {"id": "def", "type": "function", "function": {"name": "stop", "arguments": "{}"}}]}
    episode.record_action(action)
    episode.record_tool_call(action, "###STOP###", message)
    assert episode.traj == [{**message, "tool_calls": message["tool_calls"][:1]},
                            {"role": "tool", "tool_call_id": "abc", "name": "stop", "content": "###STOP###"}]
    assert len(message["tool_calls"]) == 2 and episode.actions == [{"name": "stop", "arguments": {}}]


def test_a_reply_budget_is_sent_recorded_and_makes_the_run_custom(tiny_data_dir, tiny_engines, tmp_path):
    with ScriptedLLMServer(tool_caller) as server:
        header, _, _ = run_against(server, tiny_data_dir, tmp_path, end_index=2, max_tokens=64, request_timeout=300.0)
        sent = server.requests
    assert all(request["max_tokens"] == 64 for request in sent)
    args = header["run_args"]
    assert (args["max_tokens"], args["request_timeout"]) == (64, 300.0)
    assert any(line.startswith("max_tokens 64: ") for line in args["protocol"]["departures"])
    with ScriptedLLMServer(tool_caller) as server:
        header, _, _ = run_against(server, tiny_data_dir, tmp_path, name="plain.json", end_index=1)
        assert "max_tokens" not in server.requests[0]
    assert not any(line.startswith("max_tokens") for line in header["run_args"]["protocol"]["departures"])
