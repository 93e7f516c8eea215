"""The Gym-style interface: a random and a scripted policy over the tiny data, both tracks."""

import random

import pytest

from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
from PersonalWAB.envs.users.offline_user import OfflineUser
from PersonalWAB.gym import SINGLE_TURN_STEP_LIMIT, PWABGymEnv, make
from PersonalWAB.metrics import task_score

NAMES = ("search_product_by_query", "get_recommendations_by_history", "add_product_review",
         "get_product_details_by_asin", "stop", "respond", "no_such_function")


def random_action(rng: random.Random, data) -> dict:
    """Any function with arguments of the right shape, the wrong shape, or none."""
    name = rng.choice(NAMES)
    asins = rng.sample(sorted(data.products), 3)
    arguments = rng.choice([{}, {"query": rng.choice(["red running shoes", "", "kettle"])},
                            {"product_sequence": asins}, {"review": "good value, works well"},
                            {"product_asin": asins[0]}, {"content": "what do you prefer?"}, {"query": 3}])
    return {"name": name, "arguments": arguments}


def scripted_action(task: dict, data) -> dict:
    """The right function with arguments drawn from the task's target (a near-perfect attempt)."""
    target = task["target"]
    if task["type"] == "search":
        arguments = {"query": target["product_info"]["title"]}
    elif task["type"] == "recommend":
        arguments = {"product_sequence": [b["product_info"]["parent_asin"] for b in
                                          data.behaviours_before(task["user_id"], task["timestamp"])][-30:]}
    else:
        arguments = {"review": target["review"]["text"]}
    return {"name": FUNCTION_FOR_TASK_TYPE[task["type"]], "arguments": arguments}


def check_step(gym: PWABGymEnv, reward: float, terminated: bool, truncated: bool, info: dict) -> None:
    """Reward and score agree with the environment's own record of attempts."""
    env = gym.env
    assert 0.0 <= reward <= 1.0 and not (terminated and truncated)
    if info["attempt"]:
        last = env.attempts[-1]
        assert reward == (last.result_acc if last.function_acc == 1 else 0.0)
    else:
        assert reward == 0.0
    assert info["task_score"] == task_score([a.function_acc for a in env.attempts],
                                            [a.result_acc for a in env.attempts])


def test_random_policy_single_turn(tiny_engines):
    rng = random.Random(0)
    gym = PWABGymEnv(PWABEnv(tiny_engines, "test"), seed=0)
    seen = {"terminated": 0, "truncated": 0}
    for _ in range(25):
        observation, info = gym.reset()
        assert isinstance(observation, str) and observation and info["single_turn"]
        assert {t["function"]["name"] for t in info["tools"]} >= set(FUNCTION_FOR_TASK_TYPE.values())
        for step in range(1, SINGLE_TURN_STEP_LIMIT + 1):
            observation, reward, terminated, truncated, info = gym.step(random_action(rng, tiny_engines.data))
            assert isinstance(observation, str) and info["steps"] == step
            check_step(gym, reward, terminated, truncated, info)
            if terminated or truncated:
                # single-turn: the first action function, stop or a message to the user ends the task
                assert terminated == (info["function"] in (*FUNCTION_FOR_TASK_TYPE.values(), "stop", "respond"))
                seen["terminated" if terminated else "truncated"] += 1
                break
        else:
            pytest.fail("an episode outlived the step limit")
        with pytest.raises(RuntimeError, match="call reset"):
            gym.step({"name": "stop", "arguments": {}})
    assert seen["terminated"] > 0


def test_scripted_policy_earns_the_benchmark_reward(tiny_engines):
    data = tiny_engines.data
    gym = PWABGymEnv(PWABEnv(tiny_engines, "test"))
    rewards = {}
    for index, task in enumerate(gym.env.tasks):
        observation, info = gym.reset(options={"task_index": index})
        assert info["task"] is task and observation == gym.env.protocol.first_observation(task)
        _, reward, terminated, truncated, info = gym.step(scripted_action(task, data))
        check_step(gym, reward, terminated, truncated, info)
        assert terminated and not truncated and info["function_acc"] == 1.0
        assert info["task_score"] == (1.0, reward)
        rewards.setdefault(task["type"], []).append(reward)
    # the target's own title finds it, its own review matches itself
    assert min(rewards["review"]) > 0.99 and sum(r > 0 for r in rewards["search"]) > len(rewards["search"]) / 2
    # a wrong function scores no reward even where its results contain the target
    index = next(i for i, t in enumerate(gym.env.tasks) if t["type"] == "search")
    gym.reset(options={"task_index": index})
    _, reward, terminated, _, info = gym.step({"name": "get_recommendations_by_history",
                                                "arguments": {"product_sequence": []}})
    assert reward == 0.0 and terminated and info["function_acc"] == 0.0


def test_multi_turn_track_stop_terminates_and_the_budget_truncates(tiny_engines):
    gym = PWABGymEnv(PWABEnv(tiny_engines, "test", user=OfflineUser(seed=0), max_steps=3))
    task = gym.env.tasks[0]
    gym.reset(options={"task_index": 0})
    _, reward, terminated, truncated, info = gym.step(scripted_action(task, tiny_engines.data))
    check_step(gym, reward, terminated, truncated, info)
    assert not terminated and not truncated and info["task_score"] == (1.0, reward)  # the user may still talk
    observation, reward, terminated, truncated, info = gym.step({"name": "respond", "arguments": {"content": "ok?"}})
    assert reward == 0.0 and info["user_message"] and isinstance(observation, str) and not (terminated or truncated)
    _, _, terminated, truncated, info = gym.step({"name": "respond", "arguments": {"content": "anything else?"}})
    assert truncated and not terminated and info["steps"] == 3
    gym.reset(options={"task_index": 1})
    _, reward, terminated, truncated, _ = gym.step({"name": "stop", "arguments": {}})
    assert terminated and not truncated and reward == 0.0


def test_bad_actions_and_settings_are_refused(tiny_engines, tiny_data_dir):
    gym = PWABGymEnv(PWABEnv(tiny_engines, "test"), tasks=[0, 1], seed=3)
    assert {gym.reset()[1]["task_index"] for _ in range(10)} <= {0, 1}
    assert gym.reset(seed=5)[1]["task_index"] == gym.reset(seed=5)[1]["task_index"]
    for action, message in [("search", "an action is a dict"), ({"arguments": {}}, "an action is a dict"),
                            ({"name": "stop", "arguments": []}, "'arguments' must be a dict")]:
        with pytest.raises(ValueError, match=message):
            gym.step(action)
    with pytest.raises(ValueError, match="outside the 'test' split"):
        PWABGymEnv(PWABEnv(tiny_engines, "test"), tasks=[10_000])
    with pytest.raises(ValueError, match="environment's max_steps"):
        PWABGymEnv(PWABEnv(tiny_engines, "test", user=OfflineUser(), max_steps=3), max_episode_steps=5)
    built = make(tiny_data_dir, task_split="test", tasks=[2], seed=0, max_episode_steps=2)
    assert built.max_episode_steps == 2 and built.reset()[1]["task_index"] == 2


@pytest.mark.parametrize("task_index, error", [(1.5, TypeError), ("1", TypeError), (True, TypeError),
                                               (-1, ValueError), (10_000, ValueError)])
def test_a_task_index_that_is_no_index_of_the_split_is_named(tiny_engines, task_index, error):
    gym = PWABGymEnv(PWABEnv(tiny_engines, "test"))
    count = len(gym.env.tasks)
    with pytest.raises(error, match=rf"task_index .*(0 to {count - 1}).*" if error is ValueError
                       else rf"task_index must be an integer from 0 to {count - 1} .*got {task_index!r}"):
        gym.reset(options={"task_index": task_index})
    assert not gym.active
    with pytest.raises(error, match="task_index"):
        PWABGymEnv(PWABEnv(tiny_engines, "test"), tasks=[task_index])
