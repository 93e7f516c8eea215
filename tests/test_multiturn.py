"""The multi-turn track: scripted agent and user servers, the leak guard, and the offline simulator."""

import json

import pytest

from PersonalWAB.agents.heuristic import HeuristicAgent
from PersonalWAB.envs.user import STOP_TOKEN, get_user
from PersonalWAB.envs.users.leak_guard import MASK, guard_message
from PersonalWAB.envs.users.offline_user import OfflineUser
from PersonalWAB.leaderboard.analysis import attempt_profile, transition_matrices
from PersonalWAB.results import compute_statistics, load_result_file, task_score
from PersonalWAB.run import RunConfig, run
from PersonalWAB.testing.responders import instruction_of, sensible_call
from PersonalWAB.testing.scripted_server import ScriptedLLMServer, ScriptedReply

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
    values = {"data_dir": str(data_dir), "output": str(tmp_path / name), "model": "openai/scripted-agent",
              "api_base": agent_server.url, "user_mode": "naive", "user_model": "openai/gpt-4o-mini",
              "user_api_base": user_server.url, "agent_strategy": "function_calling", "agent_memory": "none",
              "max_steps": 10, "max_retries": 1, "end_index": 3}
    values.update(overrides)
    header, path, _ = run(RunConfig(**values), log=lambda _: None)
    return header, load_result_file(path)[1], path


def steps(record):
    return len(record["info"]["usage"]["total_tokens"])


def test_episodes_end_on_stop_on_user_stop_and_on_the_step_limit(tiny_data_dir, tiny_engines, tmp_path):
    def stops_after_one(request):
        if tools_seen(request):
            return call("stop", {})
        return call(*sensible_call(instruction_of(request)))

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

    def user_says(text):
        return lambda request: ScriptedReply(content=text)

    # 1. The agent's `stop` ends the episode; the user never said STOP.
    with ScriptedLLMServer(stops_after_one) as agent, ScriptedLLMServer(user_says("Not quite.")) as user:
        _, records, _ = run_multiturn(agent, user, tiny_data_dir, tmp_path, "stop.json")
        assert len(user.requests) == 3
    for record in records:
        assert steps(record) == 2 and record["action_acc"] == [1.0]
        assert record["info"]["actions"][-1]["name"] == "stop"
        assert record["traj"][3]["content"].endswith("USER: Not quite.")

    # 2. The user's ###STOP### ends it right after the first attempt.
    with ScriptedLLMServer(lambda r: call(*sensible_call(instruction_of(r)))) as agent, \
            ScriptedLLMServer(user_says(f"Perfect, thanks. {STOP_TOKEN}")) as user:
        header, records, path = run_multiturn(agent, user, tiny_data_dir, tmp_path, "userstop.json")
    for record in records:
        assert steps(record) == 1 and len(record["action_acc"]) == 1
        assert record["traj"][-1]["content"].endswith(STOP_TOKEN)
        assert record["info"]["user_cost"] > 0  # gpt-4o-mini is priced by litellm's table
    assert header["total cost"] == pytest.approx(sum(r["info"]["user_cost"] for r in records))
    assert SENTINEL_KEY not in path.read_text()

    # 3. The step limit ends a conversation the user would continue; best valid attempt counts.
    with ScriptedLLMServer(three_attempts_then_talk) as agent, ScriptedLLMServer(user_says("Keep going.")) as user:
        header, records, _ = run_multiturn(agent, user, tiny_data_dir, tmp_path, "limit.json", max_steps=5)
        prompts = [r["messages"][0]["content"] for r in user.requests]
    assert all("Parent Asin" not in p and STOP_TOKEN in p for p in prompts)
    for record in records:
        assert steps(record) == 5
        assert record["action_acc"] == [0.0, 1.0, 1.0]
        assert [a["name"] for a in record["info"]["actions"]][-1] != "stop"
        assert record["traj"][-1]["content"] == "Is there anything else you would like?"
        assert task_score(record["action_acc"], record["res_acc"]) == (1.0, max(record["res_acc"][1:]))
    assert compute_statistics(records) == header["results"]
    expected = sum(max(r["res_acc"][1:]) for r in records) / len(records)
    assert header["results"]["overall"]["avg_res_acc"] == pytest.approx(expected)
    assert header["results"]["overall"]["avg_interaction_times"] == 5.0
    assert any(r["res_acc"][1] > r["res_acc"][2] for r in records)  # the last attempt is not what counts


def test_leak_guard_masks_target_asin_and_copied_review(tiny_data_dir, tiny_data, tiny_engines, tmp_path):
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
        _, records, _ = run_multiturn(agent, user, tiny_data_dir, tmp_path, "leak.json", end_index=1)
    message = seen[0]
    assert asin.lower() not in message.lower() and MASK in message
    assert " ".join(review_words[:9]).lower() not in message.lower()
    assert message.startswith("It is [masked]! Honestly:") and message.endswith("Anyway.")
    flags = records[0]["info"]["leak_guard"]
    assert flags[0]["masked"] == ["target_asin", "review_span"] and flags[0]["message"] == message
    assert any(m["role"] == "user" and m["content"] == message for m in records[0]["traj"])


def test_leak_guard_threshold(tiny_data):
    task = tiny_data.split("test")[0]
    words = task["target"]["review"]["text"].split()
    assert not guard_message(" ".join(words[:7]), task).flagged  # seven words may coincide
    assert guard_message("so, " + " ".join(words[1:9]) + " ...", task).masked == ["review_span"]
    assert guard_message("I want a blue one", task).text == "I want a blue one"


def test_offline_user_reacts_to_ranks_without_leaking(tiny_data):
    task = next(t for t in tiny_data.split("test") if t["type"] == "search")
    product = task["target"]["product_info"]
    user = OfflineUser(seed=3, patience=3)
    assert user.reset(task, tiny_data.profile(task["user_id"])) == task["task"]
    others = [p for a, p in tiny_data.products.items() if a != product["parent_asin"]][:10]

    def results(products):
        return "\n\n".join(f"Product {i}:\nTitle: {p['title']}\nStore: {p['store']}\nParent Asin: {p['parent_asin']}"
                           for i, p in enumerate(products, 1))

    replies = [user.reply(results(others)), user.reply(results(others[:5] + [product] + others[5:9]))]
    for reply in replies:
        assert STOP_TOKEN not in reply
        assert product["parent_asin"] not in reply and product["title"] not in reply
    assert user.reply("Which brand do you like?") == f"I'd like it from {product['store']}."
    assert STOP_TOKEN in user.reply(results([others[0], product]))  # rank 2: satisfied
    again = OfflineUser(seed=3, patience=3)
    again.reset(task, tiny_data.profile(task["user_id"]))
    assert [again.reply(results(others)), again.reply(results(others[:5] + [product] + others[5:9]))] == replies
    user.reset(task, tiny_data.profile(task["user_id"]))
    assert [STOP_TOKEN in user.reply(results(others)) for _ in range(3)] == [False, False, True]  # patience


def offline_run(data_dir, tmp_path, name, use_feedback, monkeypatch, **overrides):
    original = HeuristicAgent.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.use_feedback = use_feedback

    monkeypatch.setattr(HeuristicAgent, "__init__", init)
    values = {"data_dir": str(data_dir), "output": str(tmp_path / name), "user_mode": "offline",
              "max_steps": 10, "agent_memory": "last", "memory_length": 20, "search_backend": "bm25s"}
    values.update(overrides)
    header, path, _ = run(RunConfig(**values), log=lambda _: None)
    return header, path


def comparable(path):
    content = json.loads(path.read_text())
    content[0]["run_args"].pop("output")
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

    # The analysis figures come straight out of the multi-turn result file.
    matrices = transition_matrices(records)
    search = matrices["search"]
    assert search.sources[0] == "start" and "end" in search.targets
    assert sum(map(sum, search.counts)) == sum(len(r["info"]["actions"]) + 1 for r in records
                                               if r["info"]["task"]["type"] == "search")
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


def test_offline_simulator_over_the_small_test_split(tmp_path_factory, monkeypatch):
    """The whole test split of small synthetic data (about 30 s: generation, bm25s index, SASRec, three runs)."""
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


def test_react_reflect_reflects_after_each_user_message(tiny_data_dir, tiny_engines, tmp_path):
    def react_agent(request):
        last = request["messages"][-1]["content"]
        if "Reflect briefly" in last:
            return ScriptedReply(content="Reflection: the user wants it cheaper; I will add that.")
        name, arguments = sensible_call(instruction_of(request))
        return ScriptedReply(content=f"Thought: go.\nAction: {name}\nArguments: {json.dumps(arguments)}")

    user_replies = [ScriptedReply(content="Not quite, cheaper please."),
                    ScriptedReply(content=f"Good enough. {STOP_TOKEN}")]
    with ScriptedLLMServer(react_agent) as agent, ScriptedLLMServer(user_replies) as user:
        _, records, _ = run_multiturn(agent, user, tiny_data_dir, tmp_path, "reflect.json",
                                      agent_strategy="react_reflect", end_index=1)
    traj = records[0]["traj"]
    reflections = [m for m in traj if m["role"] == "assistant" and m["content"].startswith("Reflection:")]
    assert len(reflections) == 1
    assert len(records[0]["action_acc"]) == 2
    assert steps(records[0]) == 3  # two actions and one reflection are model calls
