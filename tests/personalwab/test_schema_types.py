"""The types of `PersonalWAB.schema_types` against what is written: the checks' key lists are the
types' keys (and the result file's stay the release's), the synthetic data holds exactly the
declared fields, and a record and a header written by the runner hold the declared keys."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from PersonalWAB.data import schema
from PersonalWAB.protocol import project_protocol
from PersonalWAB.results import HEADER_KEYS, RECORD_KEYS, TASK_INFO_KEYS, USAGE_LISTS, build_header
from PersonalWAB.runner.records import make_record
from PersonalWAB.schema_types import (Behaviour, Header, Product, Record, RecordInfo, Review, Task, TaskSummary,
                                      UsageRecord, UserProfile, required_keys)
from PersonalWAB.types import Action, Attempt, Episode


def keys(shape: Any) -> set[str]:
    return set(shape.__annotations__)


def test_the_key_lists_are_the_types_keys():
    assert HEADER_KEYS == required_keys(Header) == ("run_args", "total cost", "results")  # the release's header
    assert RECORD_KEYS == required_keys(Record) == ("task_id", "action_acc", "res_acc", "info", "traj", "trial")
    assert TASK_INFO_KEYS == required_keys(TaskSummary) == ("user_id", "task", "type", "timestamp", "target")
    assert tuple(UserProfile.__annotations__) == schema.PROFILE_FIELDS and len(schema.PROFILE_FIELDS) == 11
    assert set(schema.PRODUCT_FIELDS) | {"price"} == keys(Product)
    assert set(schema.REVIEW_FIELDS) == keys(Review) and set(schema.TASK_FIELDS) == keys(Task)
    assert set(schema.BEHAVIOUR_KEYS) == keys(Behaviour) == {"product_info", "review", "split"}
    assert schema.TASK_TYPES == ("search", "recommend", "review")
    assert schema.BEHAVIOUR_SPLITS == ("history", "train", "test")


def test_a_float_field_takes_any_number_and_a_nullable_one_null():
    assert schema.REVIEW_FIELDS["rating"] == (int, float)
    assert schema.PRODUCT_FIELDS["average_rating"] == (int, float, type(None))
    assert schema.PRODUCT_FIELDS["features"] == (list, type(None))
    assert schema.TASK_FIELDS["type"] == (str,) and schema.TASK_FIELDS["target"] == (dict,)


def test_the_synthetic_data_holds_exactly_the_declared_fields(tiny_data):
    assert all(set(product) == keys(Product) for product in tiny_data.products.values())
    behaviours = [b for history in tiny_data.histories.values() for b in history]
    assert behaviours and all(set(b) == keys(Behaviour) for b in behaviours)
    assert all(set(b["product_info"]) == keys(Product) and set(b["review"]) == keys(Review) for b in behaviours)
    tasks = tiny_data.split("test") + tiny_data.split("train")
    assert tasks and all(set(task) == keys(Task) for task in tasks)
    assert all(set(profile) == keys(UserProfile) for profile in tiny_data.profiles.values())


def test_a_record_and_its_header_hold_the_declared_keys(tiny_data):
    task = tiny_data.split("test")[0]
    episode = Episode()
    episode.record_action(Action("respond", {"content": "hello"}))
    episode.usage.add_call(10, 5, 0.001, 0.002)
    episode.notes["format_error"] = "not a JSON object"
    env = SimpleNamespace(attempts=[Attempt("search_product_by_query", 1.0, 0.5)], leak_flags=[], steps=2,
                          protocol=project_protocol(), data=SimpleNamespace(products={}))
    record = make_record(0, 0, task, env, episode)  # an env with the fields a record reads

    assert set(record) == keys(Record)
    assert set(required_keys(RecordInfo)) <= set(record["info"]) <= keys(RecordInfo)
    assert set(record["info"]["task"]) == keys(TaskSummary)
    assert set(required_keys(UsageRecord)) <= set(record["info"]["usage"]) <= keys(UsageRecord)
    assert set(USAGE_LISTS) <= set(required_keys(UsageRecord))
    header = build_header({"num_trials": 1}, [record])
    assert set(HEADER_KEYS) <= set(header) <= keys(Header)
