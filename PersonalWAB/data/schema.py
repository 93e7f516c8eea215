"""The data's vocabulary (task types and the web function that answers each, behaviour
splits, profile fields) and shape checks for the official data files.

The fields each check wants are read from the types of `PersonalWAB.schema_types`. Each
check raises DataError naming the file and the key path that is wrong, so a truncated
download or a hand-edited file is reported precisely instead of failing later inside a task.
"""

from __future__ import annotations

import typing
from types import UnionType
from typing import Any

from PersonalWAB.errors import DataError
from PersonalWAB.schema_types import (BEHAVIOUR_SPLITS, TASK_TYPES, Behaviour, Product, Review, Target, Task,
                                      UserProfile)

SEARCH, RECOMMEND, REVIEW = "search_product_by_query", "get_recommendations_by_history", "add_product_review"
TASK_FUNCTIONS = (SEARCH, RECOMMEND, REVIEW)  # the web function that answers each task type, in TASK_TYPES' order
FUNCTION_FOR_TASK_TYPE = dict(zip(TASK_TYPES, TASK_FUNCTIONS))  # Function Acc is 1 only for the task's own
TASK_TYPE_OF_FUNCTION = dict(zip(TASK_FUNCTIONS, TASK_TYPES))
PROFILE_FIELDS = tuple(UserProfile.__annotations__)
_NUMBER = (int, float)
_NULL = type(None)


def runtime_types(hint: Any) -> tuple[type, ...]:
    """What `isinstance` accepts for a field annotated `hint`: a float field takes any number
    (JSON writes 4.0 as 4), a TypedDict or a generic its container, a Literal its values' type."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, UnionType):
        return tuple(t for arg in typing.get_args(hint) for t in runtime_types(arg))
    if origin is typing.Literal:
        return tuple(dict.fromkeys(type(value) for value in typing.get_args(hint)))
    if hint is None or hint is _NULL:
        return (_NULL,)
    if hint is float:
        return _NUMBER
    if typing.is_typeddict(hint):
        return (dict,)
    return (origin or hint,)


def field_types(shape: type, leave_out: tuple[str, ...] = ()) -> dict[str, tuple[type, ...]]:
    """Each field of the TypedDict `shape` with what `isinstance` accepts for it."""
    return {key: runtime_types(hint) for key, hint in typing.get_type_hints(shape).items() if key not in leave_out}


# Which product fields may be null. The official files (Amazon Reviews 2023 metadata) carry
# `null` in some of them, e.g. `store` and `main_category`. The release renders a product
# with `str(field)` for main_category, store, average_rating, rating_number, features,
# description and categories (the last only when its InteRecAgent memory is initialised),
# and `str()` of price ("None"): a null there reads "None" and breaks nothing, so the loader
# accepts it. The release inserts title and parent_asin as they are (`text.replace(...,
# product['title'])` fails on None), and writes details with `json.dumps` (null would read
# "null", and the metadata has `{}` for no details): those stay required, with the usual
# message naming the file and key. `price` is checked on its own (a number, null or "None").
PRODUCT_FIELDS = field_types(Product, leave_out=("price",))
NULLABLE_PRODUCT_FIELDS = tuple(key for key, allowed in PRODUCT_FIELDS.items() if _NULL in allowed)
REVIEW_FIELDS = field_types(Review)
TASK_FIELDS = field_types(Task)
BEHAVIOUR_KEYS = tuple(Behaviour.__annotations__)
TARGET_KEYS = tuple(Target.__annotations__)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def expect_type(value: Any, types: tuple[type, ...], file: str, where: str) -> None:
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        wanted = " or ".join("null" if t is _NULL else t.__name__ for t in types)
        raise DataError(f"{file}: {where}: expected {wanted}, got {_type_name(value)}")


def check_fields(record: Any, fields: dict[str, tuple[type, ...]], file: str, where: str) -> None:
    expect_type(record, (dict,), file, where)
    for key, types in fields.items():
        if key not in record:
            raise DataError(f"{file}: {where}: missing key {key!r}")
        expect_type(record[key], types, file, f"{where}.{key}")


def check_product(product: Any, file: str, where: str) -> None:
    check_fields(product, PRODUCT_FIELDS, file, where)
    if "price" not in product:
        raise DataError(f"{file}: {where}: missing key 'price'")
    price = product["price"]
    if not (price is None or price == "None" or isinstance(price, _NUMBER)):
        raise DataError(f"{file}: {where}.price: expected a number, null or \"None\", got {price!r}")


def check_review(review: Any, file: str, where: str) -> None:
    check_fields(review, REVIEW_FIELDS, file, where)


def check_products_file(products: Any, file: str) -> None:
    expect_type(products, (dict,), file, "top level")
    for asin, product in products.items():
        check_product(product, file, f"[{asin!r}]")
        if product["parent_asin"] != asin:
            raise DataError(
                f"{file}: [{asin!r}].parent_asin: is {product['parent_asin']!r}, expected the key {asin!r}"
            )


def check_history_file(histories: Any, file: str) -> None:
    expect_type(histories, (dict,), file, "top level")
    for user_id, behaviours in histories.items():
        expect_type(behaviours, (list,), file, f"[{user_id!r}]")
        for i, behaviour in enumerate(behaviours):
            where = f"[{user_id!r}][{i}]"
            expect_type(behaviour, (dict,), file, where)
            for key in BEHAVIOUR_KEYS:
                if key not in behaviour:
                    raise DataError(f"{file}: {where}: missing key {key!r}")
            check_product(behaviour["product_info"], file, f"{where}.product_info")
            check_review(behaviour["review"], file, f"{where}.review")
            if behaviour["split"] not in BEHAVIOUR_SPLITS:
                raise DataError(
                    f"{file}: {where}.split: expected one of {BEHAVIOUR_SPLITS}, got {behaviour['split']!r}"
                )


def repeated_behaviours(histories: dict[str, list[Any]], file: str) -> list[str]:
    """One warning per behaviour given twice (same product, time and review text): memory shows it
    twice and the recommender learns it twice. A warning, not a refusal, since the published data
    is taken as it is."""
    warnings = []
    for user_id, behaviours in histories.items():
        seen: dict[tuple[Any, ...], int] = {}
        for i, behaviour in enumerate(behaviours):
            review = behaviour["review"]
            key = (behaviour["product_info"]["parent_asin"], review["timestamp"], review["text"])
            if key in seen:
                warnings.append(f"{file}: [{user_id!r}][{i}]: repeats [{user_id!r}][{seen[key]}] (same product, "
                                "time and review); memory shows it twice")
            seen.setdefault(key, i)
    return warnings


def check_instructions_file(instructions: Any, file: str) -> None:
    expect_type(instructions, (dict,), file, "top level")
    for split in ("train", "test"):
        if split not in instructions:
            raise DataError(f"{file}: missing key {split!r}")
        expect_type(instructions[split], (list,), file, f"[{split!r}]")
        for i, task in enumerate(instructions[split]):
            where = f"[{split!r}][{i}]"
            check_fields(task, TASK_FIELDS, file, where)
            if not task["task"].strip():
                raise DataError(f"{file}: {where}.task: is empty; every instruction needs a text")
            if task["type"] not in TASK_TYPES:
                raise DataError(f"{file}: {where}.type: expected one of {TASK_TYPES}, got {task['type']!r}")
            target = task["target"]
            for key in TARGET_KEYS:
                if key not in target:
                    raise DataError(f"{file}: {where}.target: missing key {key!r}")
            check_product(target["product_info"], file, f"{where}.target.product_info")
            check_review(target["review"], file, f"{where}.target.review")


def check_profiles_file(profiles: Any, file: str) -> None:
    expect_type(profiles, (dict,), file, "top level")
    for user_id, entry in profiles.items():
        where = f"[{user_id!r}]"
        expect_type(entry, (dict,), file, where)
        if "user_profile" not in entry:
            raise DataError(f"{file}: {where}: missing key 'user_profile'")
        profile = entry["user_profile"]
        expect_type(profile, (dict,), file, f"{where}.user_profile")
        for field in PROFILE_FIELDS:
            if field not in profile:
                raise DataError(f"{file}: {where}.user_profile: missing key {field!r}")
            expect_type(profile[field], (str,), file, f"{where}.user_profile[{field!r}]")
