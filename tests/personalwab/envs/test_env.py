"""The environment's rules and observations, as the release has them: the agent's bad calls answer
`Error: ...` and score (0, 0), while an engine that fails raises (no observation)."""

import ast

import pytest

from PersonalWAB.engines.shared import Engines
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.envs.pwab.scoring import rank_score
from PersonalWAB.envs.users.base import UserSimulator
from PersonalWAB.errors import EngineError
from PersonalWAB.types import Action


def first_task(data, kind, split="test"):
    return next(i for i, t in enumerate(data.tasks[split]) if t["type"] == kind)


@pytest.fixture()
def env(tiny_engines):
    return PWABEnv(tiny_engines, "test")


@pytest.fixture(scope="module")
def fake_env_engines(tiny_data, fake_protocol, tmp_path_factory):
    """Engines whose search index holds the fake release texts' product blocks."""
    from PersonalWAB.engines.search.bm25s import build_bm25s_index

    index = tmp_path_factory.mktemp("fake_index") / "bm25s"
    build_bm25s_index(tiny_data.products, index, fake_protocol.product_block, fake_protocol.contents_fingerprint)
    return Engines(tiny_data, "bm25s", fake_protocol, search_index=index)


def test_rank_score_looks_for_the_asin_in_each_result_text():
    assert rank_score("B", ["xAx", "xBx", "C", "D"]) == 0.75
    assert rank_score("A", ["A"]) == 1.0
    assert rank_score("Z", ["A", "B"]) == 0.0
    assert rank_score("Z", []) == 0.0


def test_first_observation(env, tiny_data):
    obs, info = env.reset(first_task(tiny_data, "search"))
    assert obs == f"USER {info['task']['user_id']}: {info['task']['task']}"
    obs, info = env.reset(first_task(tiny_data, "review"))
    product = info["task"]["target"]["product_info"]
    assert obs == (f"USER {info['task']['user_id']}: {info['task']['task']}"
                   + env.protocol.fill("first_observation.product", product=env.protocol.product_block(product)))


def test_search_observation_is_pythons_text_of_the_result_list(fake_env_engines, tiny_data, fake_protocol):
    env = PWABEnv(fake_env_engines, "test", protocol=fake_protocol)
    _, info = env.reset(first_task(tiny_data, "search"))
    target = info["task"]["target"]["product_info"]
    obs, res, done, step_info = env.step({"name": "search_product_by_query", "arguments": {"query": target["title"]}})
    results = ast.literal_eval(obs)
    assert isinstance(results, list) and len(results) == 10 and obs == str(results)
    asins = [next(a for a in tiny_data.products if a in text) for text in results]
    assert results == [fake_protocol.search_result(i, fake_protocol.product_block(tiny_data.products[a]))
                       for i, a in enumerate(asins)]
    assert results[0].startswith("R:hit 0:\n\nR:T=")
    assert done and res == [1.0, rank_score(target["parent_asin"], results)] and res[1] > 0.5
    assert step_info["attempt"].function == "search_product_by_query"


def test_recommendation_and_details_observations(fake_env_engines, tiny_data, fake_protocol):
    env = PWABEnv(fake_env_engines, "test", protocol=fake_protocol)
    _, info = env.reset(first_task(tiny_data, "recommend"))
    past = tiny_data.behaviours_before(info["task"]["user_id"], info["task"]["timestamp"])
    obs, res, done, _ = env.step({"name": "get_recommendations_by_history",
                                  "arguments": {"product_sequence": [b["product_info"]["parent_asin"] for b in past]}})
    results = ast.literal_eval(obs)
    assert done and res[0] == 1.0 and len(results) == 10
    assert all(text.startswith(f"\nR:rec {i}:") for i, text in enumerate(results))
    env.reset(0)
    asin = next(iter(tiny_data.products))
    obs, res, done, _ = env.step({"name": "get_product_details_by_asin", "arguments": {"product_asin": asin}})
    assert obs == fake_protocol.details_block(tiny_data.products[asin]) and not done and env.attempts == []
    obs, *_ = env.step({"name": "get_product_details_by_asin", "arguments": {"product_asin": "NOPE"}})
    assert obs == "R: no such product"


def test_review_observation_and_scores(env, tiny_data):
    index = first_task(tiny_data, "review")
    _, info = env.reset(index)
    real = info["task"]["target"]["review"]["text"]
    obs, res, _, _ = env.step({"name": "add_product_review", "arguments": {"review": real}})
    assert obs == str({"review": real}) and res[0] == 1.0
    assert 1.0 - 1e-6 <= res[1] <= 1.0  # capped: float error stays <= 1 (fp32 backends agree within 1e-6)
    env.reset(index)
    obs, res, _, _ = env.step({"name": "add_product_review", "arguments": {"review": ""}})
    assert obs == str({"review": env.protocol.text("review.empty")}) and 0.0 <= res[1] < 0.6
    env.reset(index)
    obs, res, _, _ = env.step({"name": "search_product_by_query", "arguments": {"query": "anything"}})
    assert res == [0.0, 0.0] and obs.startswith("[")


def test_wrong_function_can_carry_a_result_acc_that_no_score_uses(env, tiny_data):
    index = first_task(tiny_data, "recommend")
    _, info = env.reset(index)
    title = info["task"]["target"]["product_info"]["title"]
    _, res, _, _ = env.step({"name": "search_product_by_query", "arguments": {"query": title}})
    assert res[0] == 0.0 and res[1] > 0  # the release scores the list whichever function made it


@pytest.mark.parametrize("arguments, expected, res", [
    ({"query": ""}, "[]", [1.0, 0.0]),                 # an empty query finds nothing: a valid, empty search
    ({"query": "the and of"}, "[]", [1.0, 0.0]),       # stop words only
    ({}, "Error: search_product_by_query() missing 1 required positional argument: 'query'", [0.0, 0.0]),
    ({"query": "x", "limit": 3}, "Error: search_product_by_query() got an unexpected keyword argument 'limit'",
     [0.0, 0.0]),
    ({"query": ["earbuds"]}, "Error: query must be a string", [0.0, 0.0]),
    ({"query": "tea \ud800"}, "Error: 'utf-8' codec can't encode character '\\ud800' in position 4: "
                              "surrogates not allowed", [0.0, 0.0]),
])
def test_search_arguments_as_the_release_treats_them(env, tiny_data, arguments, expected, res):
    env.reset(first_task(tiny_data, "search"))
    obs, got, done, _ = env.step({"name": "search_product_by_query", "arguments": arguments})
    assert (obs, got, done) == (expected, res, True)


@pytest.mark.parametrize("sequence, expected, res", [
    ([], "[]", [1.0, 0.0]),
    (["NOT-AN-ASIN"], "[]", [1.0, 0.0]),
    ("B0123", "[]", [1.0, 0.0]),  # a string is iterated letter by letter: no known item
    ([["B0123"]], "Error: unhashable type: 'list'", [0.0, 0.0]),
    (None, "Error: 'NoneType' object is not iterable", [0.0, 0.0]),
])
def test_recommendation_arguments_as_the_release_treats_them(env, tiny_data, sequence, expected, res):
    env.reset(first_task(tiny_data, "recommend"))
    obs, got, done, _ = env.step({"name": "get_recommendations_by_history",
                                  "arguments": {"product_sequence": sequence}})
    assert (obs, got, done) == (expected, res, True)


def test_a_recommended_item_missing_from_the_catalogue_is_a_key_error(tiny_engines, tiny_data, monkeypatch):
    env = PWABEnv(tiny_engines, "test")
    env.reset(first_task(tiny_data, "recommend"))
    monkeypatch.setattr(tiny_engines.recommender, "recommend", lambda sequence, k: ["B0MISSING1"])
    obs, res, done, _ = env.step({"name": "get_recommendations_by_history", "arguments": {"product_sequence": ["x"]}})
    assert (obs, res, done) == ("Error: 'B0MISSING1'", [0.0, 0.0], True)


def test_unknown_action_stop_and_respond_in_single_turn(env, tiny_data):
    env.reset(0)
    obs, res, done, _ = env.step(Action("buy_now", {"x": 1}))
    assert obs == "Unknown action buy_now" and res == [0.0, 0.0] and not done and env.attempts == []
    obs, res, done, _ = env.step({"name": "get_product_details_by_asin", "arguments": {"asin": "x"}})
    assert obs.startswith("Error: get_product_details_by_asin() got an unexpected keyword") and not done
    obs, res, done, _ = env.step({"name": "stop", "arguments": {}})
    assert obs == "###STOP###" and done and env.attempts == []
    env.reset(0)
    obs, res, done, _ = env.step({"name": "respond", "arguments": {"content": "Which colour?"}})
    assert obs == "Error: ###STOP###" and done and res == [0.0, 0.0]
    assert [(a.function, a.function_acc, a.result_acc) for a in env.attempts] == [("respond", 0.0, 0.0)]


class ScriptedUser(UserSimulator):
    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []

    def reset(self, task, profile, protocol):
        assert "Gender" in profile
        return None

    def reply(self, agent_message):
        self.seen.append(agent_message)
        return self.replies.pop(0)


def test_multi_turn_user_answers_only_messages_and_cannot_end(tiny_engines, tiny_data):
    index = first_task(tiny_data, "search")
    user = ScriptedUser(["Cheaper please. ###STOP###", "Thanks!"])
    env = PWABEnv(tiny_engines, "test", user=user, max_steps=10)
    _, info = env.reset(index)
    title = info["task"]["target"]["product_info"]["title"]
    obs, res, done, _ = env.step({"name": "search_product_by_query", "arguments": {"query": "gift"}})
    assert not done and obs.startswith("[") and user.seen == []  # the result goes to the agent only
    obs, res, done, _ = env.step({"name": "respond", "arguments": {"content": "Here are gifts."}})
    assert obs == "Cheaper please. ###STOP###" and not done and user.seen == ["Here are gifts."]
    obs, res, done, _ = env.step({"name": "search_product_by_query", "arguments": {"query": title}})
    assert not done and res[0] == 1.0 and len(env.attempts) == 2
    _, _, done, _ = env.step({"name": "stop", "arguments": {}})
    assert done

    env = PWABEnv(tiny_engines, "test", user=ScriptedUser(["more?"] * 5), max_steps=2)
    env.reset(index)
    _, _, done, _ = env.step({"name": "respond", "arguments": {"content": "What do you need?"}})
    assert not done
    _, _, done, _ = env.step({"name": "respond", "arguments": {"content": "Anything else?"}})
    assert done and env.steps == 2


def test_leak_guard_is_an_option(tiny_engines, tiny_data):
    index = first_task(tiny_data, "search")
    target = tiny_data.tasks["test"][index]["target"]["product_info"]["parent_asin"]
    for guard, expected in ((False, f"It is {target}"), (True, "It is [masked]")):
        env = PWABEnv(tiny_engines, "test", user=ScriptedUser([f"It is {target}"]), max_steps=5, leak_guard=guard)
        env.reset(index)
        obs, *_ = env.step({"name": "respond", "arguments": {"content": "Which one?"}})
        assert obs == expected and bool(env.leak_flags) == guard


def test_multi_turn_needs_a_user(tiny_engines):
    with pytest.raises(ValueError, match="needs a user simulator"):
        PWABEnv(tiny_engines, "test", max_steps=3)


# -- the agent's bad calls score as in the release; an engine's failure is no observation --------------

def test_agents_bad_calls_are_still_scored_as_in_the_release(env):
    env.reset(1)  # a recommendation task
    observation, reward, done, _ = env.step({"name": "get_recommendations_by_history",
                                              "arguments": {"product_sequence": None}})
    assert observation.startswith("Error:") and reward == [0.0, 0.0] and done
    env.reset(0)  # a search task
    observation, reward, done, _ = env.step({"name": "search_product_by_query", "arguments": {"query": 5}})
    assert observation.startswith("Error:") and reward == [0.0, 0.0] and done


def test_a_jvm_failure_in_search_reaches_the_runner(tiny_engines, monkeypatch):
    env = PWABEnv(tiny_engines, "test")
    env.reset(0)

    def jvm_fails(query, k=10):
        raise RuntimeError("java.io.IOException: read past EOF")

    monkeypatch.setattr(tiny_engines.search.engine, "search", jvm_fails)
    with pytest.raises(EngineError, match="read past EOF"):
        env.step({"name": "search_product_by_query", "arguments": {"query": "wireless headphones"}})
