import pytest

from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.envs.pwab.scoring import rank_score
from PersonalWAB.envs.user import STOP_TOKEN, UserSimulator
from PersonalWAB.types import Action


def first_task(data, kind, split="test"):
    return next(i for i, t in enumerate(data.tasks[split]) if t["type"] == kind)


@pytest.fixture()
def env(tiny_engines):
    return PWABEnv(tiny_engines, "test")


def test_rank_score():
    assert rank_score("B", ["A", "B", "C", "D"]) == 0.75
    assert rank_score("A", ["A"]) == 1.0
    assert rank_score("Z", ["A", "B"]) == 0.0
    assert rank_score("Z", []) == 0.0


def test_first_observation(env, tiny_data):
    obs, info = env.reset(first_task(tiny_data, "search"))
    assert obs == f"USER {info['task']['user_id']}: {info['task']['task']}"
    obs, info = env.reset(first_task(tiny_data, "review"))
    assert "Product details:" in obs and info["task"]["target"]["product_info"]["parent_asin"] in obs


def test_search_for_the_target_title_scores(env, tiny_data):
    index = first_task(tiny_data, "search")
    _, info = env.reset(index)
    title = info["task"]["target"]["product_info"]["title"]
    obs, res, done, step_info = env.step({"name": "search_product_by_query", "arguments": {"query": title}})
    assert done and res[0] == 1.0 and res[1] > 0.5
    assert obs.startswith("Product 1:") and "Parent Asin:" in obs
    assert step_info["attempt"].function == "search_product_by_query"


def test_unknown_action_is_not_fatal(env, tiny_data):
    env.reset(0)
    obs, res, done, _ = env.step(Action("buy_now", {"x": 1}))
    assert obs == "Unknown action buy_now" and res == [0.0, 0.0] and not done
    assert env.attempts == []


@pytest.mark.parametrize("arguments, message", [
    ({"query": ["earbuds"]}, "argument 'query' must be a string"),
    ({}, "missing required argument 'query'"),
    ({"query": "x", "limit": 3}, "unexpected argument"),
    ({"query": "   "}, "non-empty"),
    ("query=earbuds", "takes a JSON object"),
])
def test_bad_arguments_give_error_and_zero(env, tiny_data, arguments, message):
    env.reset(first_task(tiny_data, "search"))
    obs, res, done, _ = env.step({"name": "search_product_by_query", "arguments": arguments})
    assert obs.startswith("Error:") and message in obs
    assert res == [0.0, 0.0] and done


def test_stop_word_query_returns_no_products(env, tiny_data):
    env.reset(first_task(tiny_data, "search"))
    obs, res, done, _ = env.step({"name": "search_product_by_query", "arguments": {"query": "the and of"}})
    assert obs == "No products found." and res == [1.0, 0.0] and done


def test_empty_and_unknown_recommendation_sequences(env, tiny_data):
    index = first_task(tiny_data, "recommend")
    env.reset(index)
    obs, res, _, _ = env.step({"name": "get_recommendations_by_history", "arguments": {"product_sequence": []}})
    assert obs == "No products found." and res == [1.0, 0.0]
    env.reset(index)
    obs, res, _, _ = env.step({"name": "get_recommendations_by_history",
                               "arguments": {"product_sequence": ["NOT-AN-ASIN"]}})
    assert obs == "No products found." and res == [1.0, 0.0]
    env.reset(index)
    obs, _, _, _ = env.step({"name": "get_recommendations_by_history",
                             "arguments": {"product_sequence": "B0123"}})
    assert obs.startswith("Error:") and "must be a list (JSON array)" in obs


def test_recommendation_from_history_returns_ten_catalogue_products(env, tiny_data):
    index = first_task(tiny_data, "recommend")
    _, info = env.reset(index)
    past = tiny_data.behaviours_before(info["task"]["user_id"], info["task"]["timestamp"])
    sequence = [b["product_info"]["parent_asin"] for b in past]
    obs, res, done, step_info = env.step({"name": "get_recommendations_by_history",
                                          "arguments": {"product_sequence": sequence}})
    assert done and res[0] == 1.0
    assert obs.count("Parent Asin:") == 10


def test_review_scoring_and_wrong_function(env, tiny_data):
    index = first_task(tiny_data, "review")
    _, info = env.reset(index)
    real = info["task"]["target"]["review"]["text"]
    _, res, _, _ = env.step({"name": "add_product_review", "arguments": {"review": real}})
    assert res[0] == 1.0 and res[1] == pytest.approx(1.0, abs=1e-4)
    env.reset(index)
    obs, res, _, _ = env.step({"name": "add_product_review", "arguments": {"review": ""}})
    assert "No review provided." in obs and 0.0 <= res[1] < 0.6
    env.reset(index)
    _, res, _, _ = env.step({"name": "search_product_by_query", "arguments": {"query": "anything"}})
    assert res == [0.0, 0.0]


def test_respond_ends_single_turn_with_zero(env):
    env.reset(0)
    _, res, done, _ = env.step({"name": "respond", "arguments": {"content": "Which colour?"}})
    assert done and res == [0.0, 0.0]


def test_details_only_when_offered(tiny_engines, tiny_data):
    asin = next(iter(tiny_data.products))
    env = PWABEnv(tiny_engines, "test")
    env.reset(0)
    obs, *_ = env.step({"name": "get_product_details_by_asin", "arguments": {"product_asin": asin}})
    assert obs.startswith("Unknown action")
    env = PWABEnv(tiny_engines, "test", offer_details=True)
    env.reset(0)
    obs, res, done, _ = env.step({"name": "get_product_details_by_asin", "arguments": {"product_asin": asin}})
    assert f"Parent Asin: {asin}" in obs and not done and env.attempts == []
    obs, *_ = env.step({"name": "get_product_details_by_asin", "arguments": {"product_asin": "NOPE"}})
    assert obs == "Product not found."


class ScriptedUser(UserSimulator):
    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []

    def reset(self, task, profile):
        assert "Gender" in profile
        return task["task"]

    def reply(self, agent_message):
        self.seen.append(agent_message)
        return self.replies.pop(0)


def test_multi_turn_attempts_user_stop_and_step_limit(tiny_engines, tiny_data):
    index = first_task(tiny_data, "search")
    user = ScriptedUser(["Cheaper please.", f"Thanks! {STOP_TOKEN}"])
    env = PWABEnv(tiny_engines, "test", user=user, max_steps=10)
    _, info = env.reset(index)
    title = info["task"]["target"]["product_info"]["title"]
    obs, res, done, _ = env.step({"name": "search_product_by_query", "arguments": {"query": "gift"}})
    assert not done and obs.endswith("USER: Cheaper please.") and user.seen[0].startswith(("Product 1:", "No products"))
    obs, res, done, _ = env.step({"name": "search_product_by_query", "arguments": {"query": title}})
    assert done and res[0] == 1.0 and len(env.attempts) == 2

    env = PWABEnv(tiny_engines, "test", user=ScriptedUser(["more?"] * 5), max_steps=2)
    env.reset(index)
    _, _, done, _ = env.step({"name": "respond", "arguments": {"content": "What do you need?"}})
    assert not done
    _, _, done, _ = env.step({"name": "respond", "arguments": {"content": "Anything else?"}})
    assert done and env.steps == 2

    env = PWABEnv(tiny_engines, "test", user=ScriptedUser([]), max_steps=5)
    env.reset(index)
    _, _, done, _ = env.step({"name": "stop", "arguments": {}})
    assert done


def test_multi_turn_needs_a_user(tiny_engines):
    with pytest.raises(ValueError, match="needs a user simulator"):
        PWABEnv(tiny_engines, "test", max_steps=3)
