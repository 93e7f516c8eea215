"""Why a task run failed, as one label a rule decides from its record, and the ranking metrics of a
recommendation task (NDCG@10 and the reciprocal rank of the target) beside its Result Acc.

The label looks at the calls the record holds (`PersonalWAB.calls`): a solved run has `none`; an
unsolved one is labelled by the first rule that applies, in `FAILURE_LABELS`' order, to its calls
of the right function (the last one, the agent's final answer, when there are several). The
catalogue check needs the run's products; without them that rule is left out (`catalogue=None`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from PersonalWAB.calls import RecordedCall, scored_calls
from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH
from PersonalWAB.errors import DataError
from PersonalWAB.metrics import is_errored, ndcg_at, reciprocal_rank, target_rank, task_score
from PersonalWAB.schema_types import Record

SOLVED, UNREADABLE = "none", "unreadable"
FAILURE_LABELS: dict[str, str] = {
    SOLVED: "solved: the right function was called and its best result scored above 0",
    "errored": "the task ended in an error (a provider or engine failure, not the agent's): resume it",
    "no_call": "no search, recommendation or review was called (the agent only talked, or stopped)",
    "wrong_function": "only functions of another task type were called",
    "malformed_call": "the right function's call failed (arguments missing, of the wrong kind, unreadable) or the "
                      "model's replies could not be read as a call",
    "empty_query": "the right function was called with an empty query, product sequence or review",
    "product_not_in_catalogue": "the recommendation's product sequence names ASINs that are not in the catalogue",
    "target_not_in_results": "the search ran, but its results do not list the target",
    "target_not_recommended": "the recommendation list does not hold the target",
    "review_off_topic": "the review was posted, but its MiniLM cosine to the user's real review is 0 or below",
    UNREADABLE: "the trajectory does not hold an observation for each action (a record edited by hand, or of texts "
                "not at hand), so no rule can read its calls",
}


def _empty(call: RecordedCall) -> bool:
    argument = {SEARCH: "query", RECOMMEND: "product_sequence", REVIEW: "review"}[call.name]
    value = call.arguments.get(argument)
    return value is None or (isinstance(value, (str, list)) and not (value.strip() if isinstance(value, str)
                                                                      else value))


def failure_label(record: Record, react_prefix: str, catalogue: Collection[str] | None = None) -> str:
    """The record's failure label (a key of `FAILURE_LABELS`); `catalogue`: the run's product ASINs."""
    function_acc, result_acc = task_score(record["action_acc"], record["res_acc"])
    if is_errored(record):
        return "errored"
    if function_acc == 1 and result_acc > 0:
        return SOLVED
    try:
        calls = scored_calls(record, react_prefix)
    except DataError:
        return UNREADABLE
    kind = record["info"]["task"]["type"]
    right = [call for call in calls if call.task_type == kind]
    if not right:
        if calls:
            return "wrong_function"
        return "malformed_call" if "format_error" in record["info"] else "no_call"
    final = right[-1]
    if final.value() is None:
        return "malformed_call"
    if _empty(final):
        return "empty_query"
    if kind == "search":
        return "target_not_in_results"
    if kind == "review":
        return "review_off_topic"
    sequence = final.arguments.get("product_sequence")
    if catalogue is not None and isinstance(sequence, list) and any(asin not in catalogue for asin in sequence):
        return "product_not_in_catalogue"
    return "target_not_recommended"


def recommendation_ranking(record: Record, react_prefix: str) -> dict[str, float] | None:
    """NDCG@10 and reciprocal rank of the target in the recommendation list of the task's best
    attempt with the right function (0 and 0 without one); None for a task of another type, or
    whose calls cannot be read back."""
    task = record["info"]["task"]
    if task["type"] != "recommend":
        return None
    right = [i for i, acc in enumerate(record["action_acc"]) if acc == 1]
    try:
        calls = scored_calls(record, react_prefix) if right else []
    except DataError:
        return None
    rank = None
    if right and len(calls) >= len(record["action_acc"]):
        best = max(right, key=lambda i: (record["res_acc"][i], -i))
        value = calls[best].value()
        rank = target_rank(str(task["target"]), value) if isinstance(value, list) else None
    return {"ndcg@10": ndcg_at(rank), "rr": reciprocal_rank(rank)}


def label_counts(labels: list[str]) -> dict[str, int]:
    """How many records carry each label, in `FAILURE_LABELS`' order (labels with none left out)."""
    return {label: labels.count(label) for label in FAILURE_LABELS if label in labels}


def describe(labels: dict[str, int]) -> str:
    """The counts as one line: `wrong_function 3, target_not_recommended 2` (solved runs left out)."""
    failures = [f"{label} {count}" for label, count in labels.items() if label != SOLVED]
    return ", ".join(failures) or "no failures"


def run_protocol(run_args: Any) -> Any:
    """The texts a run used, as far as they are at hand: the protocol pack its settings name when it
    is there, else the one loaded by default (the project's texts, or the placed release pack)."""
    from pathlib import Path

    from PersonalWAB.protocol import load_protocol

    pack = run_args.get("protocol_file") if isinstance(run_args, dict) else None
    return load_protocol(pack if pack and Path(pack).is_file() else None)


def react_prefix_of(run_args: Any) -> str:
    """The ReAct observation prefix of the texts a run used (`run_protocol`)."""
    return str(run_protocol(run_args).text("react.api_output"))
