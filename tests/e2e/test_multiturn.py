"""The multi-turn track under the release's rules, with scripted agent and user servers: the user
answers only the agent's messages, cannot end the episode, and is the release's LLM user; the
offline simulator and the heuristic agent follow the same protocol."""

import json

import pytest

from PersonalWAB.agents.heuristic import HeuristicAgent, report, satisfied
from PersonalWAB.envs.users import get_user
from PersonalWAB.envs.users.leak_guard import MASK, guard_message
from PersonalWAB.envs.users.offline_user import OfflineUser
from PersonalWAB.leaderboard.analysis import attempt_profile, transition_matrices
from PersonalWAB.protocol import project_protocol
from PersonalWAB.metrics import compute_statistics, task_score
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.responders import conversation, instruction_of, is_agent_request, sensible_call
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
from PersonalWAB.types import Action

SENTINEL_KEY = "sk-SENTINEL-DO-NOT-LEAK-0123456789abcdef"
WRONG = {"search_product_by_query": ("get_recommendations_by_history", {"product_sequence": []}),
         "get_recommendations_by_history": ("search_product_by_query", {"query": "anything at all"}),
         "add_product_review": ("search_product_by_query", {"query": "anything at all"})}


@pytest.fixture(autouse=True)
def sentinel_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_KEY)


def tools_seen(request):
    return sum(1 for m in request["messages"] if m["role"] == "tool")


def call(name, arguments):
    return ScriptedReply(tool_calls=[(name, json.dumps(arguments))])


def run_multiturn(agent_server, user_server, data_dir, tmp_path, name, **overrides):
    values = {"data_dir": str(data_dir), "out": str(tmp_path / name), "model": "openai/scripted-agent",
              "api_base": agent_server.url, "user_mode": "naive", "user_model": "openai/gpt-4o-mini",
              "user_api_base": user_server.url, "agent_strategy": "function_calling", "agent_memory": "none",
              "max_steps": 10, "max_retries": 1, "end_index": 3}
    values.update(overrides)
    header, path, _ = run(RunConfig(**values), log=lambda _: None)
    return header, load_result_file(path)[1], path


def steps(record):
    return len(record["info"]["usage"]["total_tokens"])


def user_says(text):
    return lambda request: ScriptedReply(content=text)


@pytest.mark.slow
def test_the_user_answers_only_messages_and_the_agent_ends_the_episode(tiny_data_dir, tiny_engines, tmp_path):
    def attempt_ask_stop(request):
        n = sum(m["role"] == "assistant" for m in request["messages"])
        if n == 0:
            return call(*sensible_call(instruction_of(request)))
        if n == 1:
            assert request["messages"][-1]["role"] == "tool"  # the result, with no user reply after it
            return ScriptedReply(content="Did you find what you wanted?")
        return call("stop", {})

    with ScriptedLLMServer(attempt_ask_stop) as agent, \
            ScriptedLLMServer(user_says("Not quite. ###STOP###")) as user:
        header, records, path = run_multiturn(agent, user, tiny_data_dir, tmp_path, "stop.json")
        user_requests = list(user.requests)
    assert len(user_requests) == 3  # one per task: the user answered the one message only
    protocol = project_protocol()
    tasks = tiny_engines.data.tasks["test"]
    for request, task in zip(sorted(user_requests, key=lambda r: r["messages"][2]["content"]),
                             sorted(tasks[:3], key=lambda t: t["task"])):
        assert request["messages"][:3] == [
            {"role": "system", "content": protocol.user_prompt(task, tiny_engines.data.profile(task["user_id"]))},
            {"role": "user", "content": protocol.text("user.greeting")},
            {"role": "assistant", "content": task["task"]}]
        assert request["messages"][3] == {"role": "user", "content": "Did you find what you wanted?"}
        assert request["temperature"] == 1.0 and request["max_tokens"] == 150
    for record in records:
        assert steps(record) == 3 and record["action_acc"] == [1.0]  # the user's STOP token ended nothing
        assert record["info"]["actions"][-1]["name"] == "stop"
        assert record["traj"][5]["content"] == "Not quite. ###STOP###"
        assert record["info"]["user_cost"] > 0  # gpt-4o-mini is priced by litellm's table
    assert header["total cost"] == pytest.approx(sum(r["info"]["usage"]["total_price"] for r in records))
    assert header["total user cost"] == pytest.approx(sum(r["info"]["user_cost"] for r in records))
    assert SENTINEL_KEY not in path.read_text()


def test_the_step_limit_ends_it_and_the_best_valid_attempt_counts(tiny_data_dir, tiny_engines, tmp_path):
    def three_attempts_then_talk(request):
        name, arguments = sensible_call(instruction_of(request))
        n = tools_seen(request)
        if n == 0:
            return call(*WRONG[name])  # runs fine, wrong function: function acc 0
        if n == 1:
            return call(name, arguments)
        if n == 2:  # right function, poor arguments: valid but worse than attempt 2
            bad = {"query": "zzz"} if "query" in arguments else (
                {"product_sequence": ["B0NOTANITEM"]} if "product_sequence" in arguments else {"review": "ok"})
            return call(name, bad)
        return ScriptedReply(content="Is there anything else you would like?")

    with ScriptedLLMServer(three_attempts_then_talk) as agent, ScriptedLLMServer(user_says("Keep going.")) as user:
        header, records, _ = run_multiturn(agent, user, tiny_data_dir, tmp_path, "limit.json", max_steps=5)
    for record in records:
        assert steps(record) == 5
        assert record["action_acc"] == [0.0, 1.0, 1.0]
        assert record["traj"][-1]["content"] == "Keep going."
        assert task_score(record["action_acc"], record["res_acc"]) == (1.0, max(record["res_acc"][1:]))
    assert compute_statistics(records) == header["results"]
    expected = sum(max(r["res_acc"][1:]) for r in records) / len(records)
    assert header["results"]["overall"]["avg_res_acc"] == pytest.approx(expected)
    assert header["results"]["overall"]["avg_interaction_times"] == 5.0
    assert any(r["res_acc"][1] > r["res_acc"][2] for r in records)  # the last attempt is not what counts


def test_one_scripted_server_plays_agent_and_llm_user_offline(tiny_data_dir, tiny_engines, tmp_path):
    """The offline path of scripts/run_multiturn.sh (docs/multiturn.md): the agent asks the user,
    the LLM user answers from the same loopback server, and its calls are counted and priced."""
    with ScriptedLLMServer(conversation) as server:
        header, records, _ = run_multiturn(server, server, tiny_data_dir, tmp_path, "both.json")
        requests = list(server.requests)
    user_requests = [r for r in requests if not is_agent_request(r)]
    assert len(user_requests) == len(records) == 3  # one question per task, answered by the LLM user
    assert header["total user cost"] > 0 and all(r["info"]["user_cost"] > 0 for r in records)
    for record in records:  # call, ask (a message, not an action), call again with the answer, stop
        first, second, last = record["info"]["actions"]
        assert first["name"] == second["name"] and last["name"] == "stop" and steps(record) == 4
        if first["name"] != "get_recommendations_by_history":
            assert first["arguments"] != second["arguments"]  # the user's answer went into the second call


def test_leak_guard_when_asked_for(tiny_data_dir, tiny_data, tiny_engines, tmp_path):
    task = tiny_data.split("test")[0]
    asin = task["target"]["product_info"]["parent_asin"]
    review_words = task["target"]["review"]["text"].split()
    copied = " ".join(review_words[:9]).upper()  # case does not hide a copy
    leaky = f"It is {asin.lower()}! Honestly: {copied} Anyway."
    seen = []

    def agent_script(request):
        users = [m for m in request["messages"] if m["role"] == "user"]
        if len(users) == 1:
            return ScriptedReply(content="Which brand do you prefer?")
        seen.append(users[-1]["content"])
        return call("stop", {})

    with ScriptedLLMServer(agent_script) as agent, ScriptedLLMServer([ScriptedReply(content=leaky)]) as user:
        header, records, _ = run_multiturn(agent, user, tiny_data_dir, tmp_path, "leak.json", end_index=1,
                                           leak_guard=True)
    message = seen[0]
    assert asin.lower() not in message.lower() and MASK in message
    assert message.startswith("It is [masked]! Honestly:") and message.endswith("Anyway.")
    flags = records[0]["info"]["leak_guard"]
    assert flags[0]["masked"] == ["target_asin", "review_span"] and flags[0]["message"] == message
    departures = header["run_args"]["protocol"]["departures"]
    assert "leak_guard: user messages masked before the agent reads them" in departures


def test_leak_guard_threshold(tiny_data):
    task = tiny_data.split("test")[0]
    words = task["target"]["review"]["text"].split()
    assert not guard_message(" ".join(words[:7]), task).flagged  # seven words may coincide
    assert guard_message("so, " + " ".join(words[1:9]) + " ...", task).masked == ["review_span"]
    assert guard_message("I want a blue one", task).text == "I want a blue one"


def test_offline_user_judges_the_products_the_agent_names(tiny_data):
    task = next(t for t in tiny_data.split("test") if t["type"] == "search")
    product = task["target"]["product_info"]
    user = OfflineUser(seed=3)
    assert user.reset(task, tiny_data.profile(task["user_id"]), project_protocol()) is None
    others = [p for a, p in tiny_data.products.items() if a != product["parent_asin"]][:10]

    def named(products):
        return "I found: " + "; ".join(f"{p['title']} ({p['parent_asin']})" for p in products)

    replies = [user.reply(named(others)), user.reply(named(others[:5] + [product] + others[5:9]))]
    for reply in replies:
        assert not satisfied(reply)
        assert product["parent_asin"] not in reply and product["title"] not in reply
    assert user.reply("Which brand do you like?") == f"I'd like it from {product['store']}."
    assert satisfied(user.reply(named([others[0], product])))  # rank 2: satisfied
    again = OfflineUser(seed=3)
    again.reset(task, tiny_data.profile(task["user_id"]), project_protocol())
    assert [again.reply(named(others)), again.reply(named(others[:5] + [product] + others[5:9]))] == replies


def test_heuristic_agent_reports_what_it_found(tiny_engines, tiny_data):
    from PersonalWAB.envs.pwab.env import PWABEnv

    env = PWABEnv(tiny_engines, "test")
    task_index = next(i for i, t in enumerate(tiny_data.split("test")) if t["type"] == "search")
    env.reset(task_index)
    action = Action("search_product_by_query", {"query": tiny_data.split("test")[task_index]["task"]})
    observation, *_ = env.step(action)
    message = report(action, observation, tiny_data.products)
    assert message.startswith("Here is what I found: 1. ") and message.count("(B") == 5
    review = Action("add_product_review", {"review": "Lovely."})
    assert report(review, "{'review': 'Lovely.'}", tiny_data.products).startswith(
        'I wrote and posted this review for you: "Lovely."')


def offline_run(data_dir, tmp_path, name, use_feedback, monkeypatch, **overrides):
    original = HeuristicAgent.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.use_feedback = use_feedback

    monkeypatch.setattr(HeuristicAgent, "__init__", init)
    values = {"data_dir": str(data_dir), "out": str(tmp_path / name), "user_mode": "offline",
              "max_steps": 10, "agent_memory": "last", "memory_length": 20, "search_backend": "bm25s"}
    values.update(overrides)
    header, path, _ = run(RunConfig(**values), log=lambda _: None)
    return header, path


def comparable(path):
    content = json.loads(path.read_text())
    content[0]["run_args"].pop("out")
    return content


def test_offline_simulator_is_deterministic_and_feedback_helps(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    header, path = offline_run(tiny_data_dir, tmp_path, "a.json", True, monkeypatch)
    _, again = offline_run(tiny_data_dir, tmp_path, "b.json", True, monkeypatch)
    blind, _ = offline_run(tiny_data_dir, tmp_path, "c.json", False, monkeypatch)
    assert comparable(path) == comparable(again)
    assert "not comparable" in header["run_args"]["user_simulator_note"]
    assert header["results"]["overall"]["avg_res_acc"] > blind["results"]["overall"]["avg_res_acc"]
    assert header["results"]["overall"]["avg_interaction_times"] > blind["results"]["overall"]["avg_interaction_times"]
    _, records = load_result_file(path)
    assert len(records) == len(tiny_engines.data.split("test"))
    for record in records:
        names = [a["name"] for a in record["info"]["actions"]]
        assert names[-1] == "stop" or steps(record) == 10  # the agent ends it (or the step limit)

    # The analysis figures come straight out of the multi-turn result file.
    matrices = transition_matrices(records)
    search = matrices["search"]
    assert search.sources[0] == "start" and "end" in search.targets
    assert sum(map(sum, search.counts)) == sum(steps(r) + 1 for r in records  # every step, messages included
                                               if r["info"]["task"]["type"] == "search")
    assert search.counts[search.sources.index("search")][search.targets.index("respond")] > 0
    profile = attempt_profile(records)
    assert max(len(rows) for rows in profile.values()) >= 2  # feedback led to second attempts
    for kind, rows in profile.items():
        kind_records = [r for r in records if r["info"]["task"]["type"] == kind]
        assert rows[0].tasks == len(kind_records)
        assert sum(row.solved for row in rows) <= len(kind_records)


def test_get_user_modes():
    assert get_user("no") is None
    assert isinstance(get_user("offline", seed=5), OfflineUser)
    with pytest.raises(ValueError, match="user_model"):
        get_user("naive")
    with pytest.raises(ValueError, match="unknown user_mode"):
        get_user("robot")


@pytest.mark.slow
def test_offline_simulator_over_the_small_test_split(tmp_path_factory, monkeypatch):
    """The whole test split of small synthetic data (generation, bm25s index, SASRec, three runs)."""
    from PersonalWAB.data.synthetic import generate_synthetic

    data_dir = tmp_path_factory.mktemp("small")
    generate_synthetic(data_dir, scale="small", seed=0)
    tmp_path = tmp_path_factory.mktemp("small_runs")
    header, path = offline_run(data_dir, tmp_path, "a.json", True, monkeypatch)
    _, again = offline_run(data_dir, tmp_path, "b.json", True, monkeypatch)
    blind, _ = offline_run(data_dir, tmp_path, "c.json", False, monkeypatch)
    assert comparable(path) == comparable(again)
    _, records = load_result_file(path)
    assert len(records) == header["results"]["overall"]["total_count"] > 200
    assert all("error" not in r["info"] for r in records)
    assert header["results"]["overall"]["avg_res_acc"] > blind["results"]["overall"]["avg_res_acc"]
    assert header["results"]["search"]["avg_res_acc"] > blind["results"]["search"]["avg_res_acc"]
    assert header["results"]["review"]["avg_res_acc"] > blind["results"]["review"]["avg_res_acc"]
