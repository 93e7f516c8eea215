"""The shapes of the JSON that crosses module boundaries and is written to disk: the data
files' product, behaviour, user profile and task, and the result file's header and records.

The checks' key lists (`PersonalWAB.data.schema`, `PersonalWAB.results`) are read from these
types, so each shape is written once. The types describe; they check nothing at run time
(`data.schema` does, on loading).

No `from __future__ import annotations` here: it would hide `NotRequired` from the
`__required_keys__` the key lists are read from.
"""

from typing import Any, Literal, NotRequired, TypedDict, get_args

TaskType = Literal["search", "recommend", "review"]
BehaviourSplit = Literal["history", "train", "test"]
TASK_TYPES: tuple[TaskType, ...] = get_args(TaskType)
BEHAVIOUR_SPLITS: tuple[BehaviourSplit, ...] = get_args(BehaviourSplit)


class Product(TypedDict):
    """A catalogue entry (Amazon Reviews 2023 metadata, as the release keeps it). Several fields
    are null in the official files; `price` is a number, null or the text "None"."""

    main_category: str | None
    title: str
    average_rating: float | None
    rating_number: int | None
    features: list[str] | None
    description: list[str] | None
    price: float | str | None
    store: str | None
    categories: list[str] | None
    details: dict[str, Any]
    parent_asin: str


class Review(TypedDict):
    """What a user wrote about a product, and when (seconds or milliseconds since the epoch, as
    the files have it)."""

    rating: float
    title: str
    text: str
    parent_asin: str
    timestamp: int


class Target(TypedDict):
    """A task's answer: the product and the user's own review of it."""

    product_info: Product
    review: Review


class Behaviour(Target):
    """One purchase with its review in a user's history, and which part of the history it is."""

    split: BehaviourSplit


# A user's profile: the eleven fields the instructions were written from (names with spaces, as in the files).
UserProfile = TypedDict("UserProfile", {
    "Gender": str,
    "Age": str,
    "Occupation": str,
    "Price Sensitivity": str,
    "Shopping Interest": str,
    "Brand Preference": str,
    "Diversity Preference": str,
    "Interaction Complexity": str,
    "Tone and Style": str,
    "Item Reference": str,
    "Focus Aspect": str,
})


class Task(TypedDict):
    """One instruction of `user_instructions.json`: who asks, what, when, and the answer."""

    user_id: str
    task: str
    type: TaskType
    timestamp: int
    target: Target


class TaskSummary(TypedDict):
    """A record's `info.task`: enough of its task to recognise it in the split."""

    user_id: str
    task: str
    type: TaskType
    timestamp: int
    target: str  # the target product's parent_asin


class EpisodeNotes(TypedDict, total=False):
    """What went wrong on the agent model's side of a task run, kept in the record's `info`."""

    format_error: str  # replies that were not usable, 10 times in a row
    interec_update: str  # InteRecAgent's memory update was not a JSON object
    puma_function: str  # PUMA's model named no web function


class UsageRecord(TypedDict):
    """A record's `info.usage`: the agent model's tokens per call and what they cost (USD)."""

    completion_tokens: list[int]
    prompt_tokens: list[int]
    total_tokens: list[int]
    completion_price: float
    prompt_price: float
    total_price: float
    extra_calls: NotRequired[int]  # calls that are not steps (replies asked again, reflections, memory updates)
    extra_price: NotRequired[float]


class RecordInfo(EpisodeNotes):
    """A record's `info`: the task, the web function calls, and what the run cost."""

    task: TaskSummary
    actions: list[dict[str, Any]]
    user_cost: float
    usage: UsageRecord
    leak_guard: NotRequired[list[dict[str, Any]]]  # user messages the leak guard masked
    steps: NotRequired[int]  # actions sent to the environment, where they differ from the model calls
    error: NotRequired[str]  # the task ended in an error: resume runs it again
    cache_hits: NotRequired[int]  # calls the response cache answered (a run with --cache)
    cache_saved_usd: NotRequired[float]  # their cost, counted in `usage` and `user_cost` but not paid
    failure: NotRequired[str]  # why the task run failed, a label of `PersonalWAB.failures` (`none`: solved)


class Record(TypedDict):
    """One task run of a result file: the score of each attempt (action/result accuracy),
    what happened (`info`, `traj`), and which trial it was."""

    task_id: int
    action_acc: list[float]
    res_acc: list[float]
    info: RecordInfo
    traj: list[dict[str, Any]]
    trial: int


class ProtocolRecord(TypedDict):
    """`run_args.protocol`: the texts a run used and its departures from the release."""

    texts: str
    departures: list[str]
    standard: bool


class ShardPlan(TypedDict):
    """Which tasks a shard ran: `selected` tasks were chosen by the run's range and order, and
    `task_ids` (in run order) are the shard's part of them (`PersonalWAB.shards`)."""

    selected: int
    task_ids: list[int]


class RunArgs(TypedDict, total=False):
    """A result file's `run_args`: the run's resolved settings (every field of `RunConfig`) and
    what the run records beside them. Only the keys read outside the runner are named here;
    files of older versions lack some, hence no key is required."""

    task_split: str
    start_index: int
    end_index: int
    model: str
    agent_strategy: str
    max_steps: int
    num_trials: int
    search_backend: str
    data_dir: str
    data_source: str
    data_fingerprint: str
    project_version: str
    protocol: ProtocolRecord
    protocol_texts_digest: str
    embedding_backend: str
    recommender_backend: str  # SASRec's: onnx (the build's export, checked against PyTorch) or torch
    memory_embedding_backend: str  # what computes the memory caches' vectors, where memory ranks by MiniLM
    user_simulator_note: str
    cost_note: str
    agent_settings: dict[str, Any]
    shard: str | None  # `I/N` of a shard (`--shard`), None for a whole run
    shard_plan: ShardPlan  # a shard's tasks
    run_name: str | None  # `--run_name`
    tag: list[str] | None  # `--tag KEY=VALUE`, in the order given
    solved_threshold: float  # best Result Acc from which a trial counts as solved (pass^k)
    grader_version: str  # the digest of the scoring code (`PersonalWAB.envs.pwab.scoring.grader_version`)
    regraded: dict[str, Any]  # re-scored under the current grader: the grader it was scored by, records changed
    strict: bool  # the strict protocol: privileged inputs removed


# Per task type and "overall": total_count, avg_interaction_times, avg_action_acc, avg_res_acc.
Statistics = dict[str, dict[str, float]]

# The first element of a finished result file (names with spaces, as the release writes them).
Header = TypedDict("Header", {
    "run_args": RunArgs,
    "total cost": float,
    "results": Statistics,
    "total user cost": NotRequired[float],
    "trials": NotRequired[dict[str, Any]],  # the spread across trials (`PersonalWAB.metrics.trial_statistics`)
    "audit": NotRequired[dict[str, Any]],  # the run's privileged inputs (`PersonalWAB.audit.run.run_summary`)
    "cache": NotRequired[dict[str, Any]],  # with a response cache: `hits` (calls it answered), `saved_usd` (not paid)
})


def required_keys(shape: type) -> tuple[str, ...]:
    """The keys a TypedDict requires, in the order it declares them."""
    required = shape.__required_keys__  # type: ignore[attr-defined]
    return tuple(key for key in shape.__annotations__ if key in required)
