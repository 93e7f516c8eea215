"""A run in two steps: `prepare` checks everything and plans the work without writing a
file (a `RunPlan`); `execute` builds what the tasks need, claims the result file and runs
the tasks, checkpointing each record as it finishes (a `RunOutcome`)."""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from PersonalWAB import __version__
from PersonalWAB.agents.registry import agent_settings
from PersonalWAB.errors import DataError, FatalError
from PersonalWAB.metrics import record_paid_usd
from PersonalWAB.pricing import USER_FLAG, parse_rate, usd_text, warn_hosted_prices
from PersonalWAB.progress import log_line, set_quiet
from PersonalWAB.response_cache import ResponseCache, cache_folder, task_scope
from PersonalWAB.results import ResultWriter
from PersonalWAB.runner.checks import SettingsError, check_settings, output_target, setting_warnings
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.labels import UNPRICED_NOTE, protocol_record
from PersonalWAB.runner.pool import finished_records
from PersonalWAB.runner.records import default_output_path, make_record
from PersonalWAB.runner.resume import kept_and_left, resumes_in_place
from PersonalWAB.runner.trace import trace_lines
from PersonalWAB.schema_types import Header, Record, RunArgs, Task
from PersonalWAB.shards import Shard, task_selection

if TYPE_CHECKING:
    from PersonalWAB.data.loader import BenchmarkData
    from PersonalWAB.protocol import Protocol

CONCURRENCY_HINT_TASKS = 20  # a model run of more tasks than this, one at a time, gets a hint
# how the result file is claimed: a derived name made unique, a named file that must not exist, or replaced
Claim = Literal["unique", "new", "replace"]


@dataclass
class RunPlan:
    """A checked run: its tasks, the records kept from --resume_from and where results go.

    `prepare` builds it without writing anything; `execute` fills in `writer` once it has
    claimed the result file, so whoever stops a run knows what was saved and where."""

    config: RunConfig
    data: BenchmarkData
    tasks: list[Task]
    jobs: list[tuple[int, int]]
    kept: list[Record]
    run_args: RunArgs
    output: Path
    claim: Claim
    protocol: Protocol  # the texts the run shows models
    end: int  # the task index the run stops before
    writer: ResultWriter | None = None


@dataclass
class RunOutcome:
    """A finished run: its header, where the file is, the wall time of its tasks and all records."""

    header: Header
    output: Path
    wall_s: float
    records: list[Record]


class BudgetReached(RuntimeError):
    """The model calls of a run reached the cost budget given to `execute`; its finished tasks
    are checkpointed and a resume runs the rest."""

    def __init__(self, spent: float, budget: float):
        super().__init__(f"the run's model calls cost {usd_text(spent)}, reaching its budget of {usd_text(budget)}")
        self.spent = spent
        self.budget = budget


def prepare(config: RunConfig, log: Callable[[str], None] = log_line, check_keys: bool = True) -> RunPlan:
    """Check every setting (the provider keys unless `check_keys` is False: a plan that will
    not be executed), load the data and the records to keep; nothing is written."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.envs.users import get_user
    from PersonalWAB.engines.recommender import exported as exported_recommender
    from PersonalWAB.engines.text_embedding import default_backend, memory_backend
    from PersonalWAB.envs.pwab.scoring import grader_version
    from PersonalWAB.memory import memory_mode
    from PersonalWAB.envs.users.offline_user import NOTE as OFFLINE_USER_NOTE
    from PersonalWAB.paths import default_data_dir
    from PersonalWAB.protocol import load_protocol

    check_settings(config, keys=check_keys)
    for warning in setting_warnings(config):
        log(f"warning: {warning}")
    set_quiet(config.quiet)
    warn_hosted_prices(config, log)
    get_user(config.user_mode, config.user_model, config.user_api_base, config.seed)  # fail early on bad settings
    try:
        embedding_backend = default_backend()
        recommender_backend = exported_recommender.backend()
        ranked = memory_mode(config.agent_memory).embeddings
        memory_embedding_backend = memory_backend(config.embedding_precision) if ranked else None
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    protocol = load_protocol(config.protocol_file)
    if config.search_backend == "lucene":
        from PersonalWAB.engines.search.jvm import start_jvm_early

        start_jvm_early()
    data = load_benchmark_data(config.data_dir or default_data_dir())
    for warning in data.warnings:
        log(f"warning: {warning}")
    tasks = data.split(config.task_split)
    end = config.task_end(len(tasks))
    if config.start_index >= end:
        raise SettingsError(f"--start_index {config.start_index}: the {config.task_split} split has only "
                            f"{len(tasks)} tasks")
    task_ids = task_selection(config.start_index, end, config.shuffle, config.seed)
    selected = len(task_ids)
    if config.shard:
        task_ids = Shard.parse(config.shard).take_some(task_ids, "selected task(s)")
    # RunArgs names only the settings read outside the runner: the rest are RunConfig's fields
    run_args = cast(RunArgs, {**config.settings(), "data_dir": str(data.data_dir), "data_source": data.source,
                "data_fingerprint": data.fingerprint, "project_version": __version__,
                "protocol": protocol_record(protocol, config), "protocol_texts_digest": protocol.texts_digest,
                "embedding_backend": embedding_backend, "recommender_backend": recommender_backend,
                "grader_version": grader_version()})
    if memory_embedding_backend:
        run_args["memory_embedding_backend"] = memory_embedding_backend
    if config.shard:  # which tasks of the selection the shard holds: what a merge checks the shards against
        run_args["shard_plan"] = {"selected": selected, "task_ids": task_ids}
    if config.user_mode == "offline":
        run_args["user_simulator_note"] = OFFLINE_USER_NOTE
    settings = agent_settings(config)
    if settings is not None:
        run_args["agent_settings"] = settings
    kept, jobs = kept_and_left(config, run_args, tasks, task_ids, log)

    output = output_target(config)
    if output is None:
        return RunPlan(config, data, tasks, jobs, kept, run_args, default_output_path(config, end), "unique",
                       protocol, end)
    return RunPlan(config, data, tasks, jobs, kept, run_args, output,
                   "replace" if resumes_in_place(config, output) or config.overwrite else "new", protocol, end)


def jobs_text(jobs: list[tuple[int, int]], trials: int) -> str:
    """How many task runs are to run, in words: "40 task(s)", or "40 task(s) x 2 trials (80 task runs)"."""
    tasks = len({task_id for _, task_id in jobs})
    if trials == 1:
        return f"{len(jobs)} task(s)"
    return f"{tasks} task(s) x {trials} trials ({len(jobs)} task runs)" if len(jobs) == tasks * trials else \
        f"{len(jobs)} task runs of {tasks} task(s) x {trials} trials"


def concurrency_hint(config: RunConfig, jobs: int) -> str | None:
    """A hint for a model run of many tasks one at a time: an API model serves several at once
    and the scores stay the same (not so for InteRecAgent memory, which each task updates)."""
    from PersonalWAB.memory import memory_mode

    if not config.model or config.max_concurrency != 1 or jobs <= CONCURRENCY_HINT_TASKS \
            or memory_mode(config.agent_memory).interec_store:
        return None
    return (f"hint: {jobs} tasks run one at a time (--max_concurrency 1); a hosted API model takes several at once "
            "with the same scores, e.g. --max_concurrency 8 (docs/running.md)")


def execute(plan: RunPlan, log: Callable[[str], None] = log_line, max_usd: float | None = None) -> RunOutcome:
    """Build what the tasks need, claim the result file and run the tasks, checkpointing as they finish.

    The result file and the file being resumed are locked first, for the run's life: a run
    that shares one with a live run stops here (DataError naming its pid).

    `max_usd`: once the tasks this call ran paid that much for their calls (the agent's and
    the user's, less what the response cache answered), no task starts any more; the tasks in
    flight finish and are kept (their calls are paid for), then BudgetReached is raised when
    tasks are left. Models without a price count as 0."""
    from PersonalWAB.memory.embeddings import ranking_precision
    from PersonalWAB.trace import tracing

    writer = ResultWriter(plan.output, plan.run_args, plan.kept)
    try:
        writer.hold(*([plan.output] if plan.claim != "unique" else []),
                    *([plan.config.resume_from] if plan.config.resume_from else []))
        with ranking_precision(plan.config.embedding_precision), \
                tracing(plan.config.trace_file, split=plan.config.task_split, output=str(plan.output)):
            return _run_tasks(plan, writer, log, max_usd)
    finally:
        writer.release()


def _run_tasks(plan: RunPlan, writer: ResultWriter, log: Callable[[str], None],
               max_usd: float | None) -> RunOutcome:
    """`execute` with its files locked."""
    from PersonalWAB.agents.registry import build_agent
    from PersonalWAB.build import build_artifacts, cache_review_embeddings
    from PersonalWAB.engines.shared import shared_engines
    from PersonalWAB.envs.pwab.env import PWABEnv
    from PersonalWAB.envs.users import get_user
    from PersonalWAB.progress import FirstErrors, RunProgress, stage
    from PersonalWAB.scratch import remove_stale
    from PersonalWAB.types import Episode

    config, data, tasks, run_args, protocol = plan.config, plan.data, plan.tasks, plan.run_args, plan.protocol
    folder = cache_folder(config.cache)
    cache = ResponseCache(folder, warn=lambda line: log(f"warning: {line}")) if folder is not None else None
    for path in remove_stale(plan.output.parent):
        log(f"removed {path}, left by a run that was killed")
    kinds = {tasks[tid]["type"] for _, tid in plan.jobs}
    from PersonalWAB.memory import memory_mode

    ranked_memory = memory_mode(config.agent_memory).embeddings  # its row ranks behaviours by MiniLM
    users = {tasks[tid]["user_id"] for _, tid in plan.jobs}
    some_users = ranked_memory and len(users) < len(data.histories)  # encode theirs only, unless built
    build_artifacts(data, (config.search_backend,) if "search" in kinds else (),
                    recommender="recommend" in kinds, memory_embeddings=ranked_memory and not some_users,
                    log=log, protocol=protocol, embedding_precision=config.embedding_precision)
    if some_users:
        from PersonalWAB.memory.embeddings import shared_behaviour_embeddings

        shared_behaviour_embeddings(data, protocol, precision=config.embedding_precision).prepare_users(
            users, [tasks[tid]["task"] for _, tid in plan.jobs], log=log)
    engines = shared_engines(data, config.search_backend, protocol)
    engines.check(search="search" in kinds, recommender="recommend" in kinds)
    cache_review_embeddings(data, [tasks[tid] for _, tid in plan.jobs])
    agent = build_agent(data, config)
    if config.model or config.user_model:
        from PersonalWAB.llm import warm_up

        with stage("loading the model client (litellm)"):
            warm_up()
    first_errors = FirstErrors(log)
    user_rate = parse_rate(config.user_price_per_mtok, USER_FLAG)

    def run_task(trial: int, task_id: int) -> Record:
        user = get_user(config.user_mode, config.user_model, config.user_api_base, config.seed, config.max_retries,
                        user_rate, config.request_timeout)
        env = PWABEnv(engines, config.task_split, user, config.max_steps, protocol=protocol,
                      leak_guard=config.guards_user_messages, trial=trial)
        try:
            episode = agent.solve(env, task_id)
        except (DataError, FatalError):
            raise
        except Exception as exc:  # an agent/API failure is recorded; resume retries the task
            # what the episode did before failing (calls made, their cost) is kept
            episode = getattr(exc, "episode", None) or Episode()
            episode.error = f"{type(exc).__name__}: {exc}"
            first_errors.report(task_id, exc)
            if config.verbose:
                traceback.print_exc()
        if episode.usage.price_unknown:
            run_args["cost_note"] = UNPRICED_NOTE
        if user is not None:
            episode.user_cost = user.cost
        return make_record(task_id, trial, tasks[task_id], env, episode)

    over_budget = threading.Event()  # no task starts once set: the ones not started are left for a resume
    paid = [0.0]  # what the tasks of this call paid, counted as each ends (before its worker takes the next)
    paying = threading.Lock()

    def run_one(trial: int, task_id: int) -> Record | None:
        if over_budget.is_set():
            return None
        with task_scope(cache, trial, task_id) as scope:
            record = run_task(trial, task_id)
        if scope is not None:
            record["info"]["cache_hits"], record["info"]["cache_saved_usd"] = scope.hits, scope.saved_usd
        with paying:
            paid[0] += record_paid_usd(record)
            if max_usd is not None and paid[0] >= max_usd:
                over_budget.set()
        return record

    plan.output = writer.start(unique=plan.claim == "unique", replace=plan.claim == "replace")
    plan.writer = writer
    resumed = f"; {len(plan.kept)} kept from {config.resume_from}" if config.resume_from else ""
    shard = f" (shard {config.shard})" if config.shard else ""
    log(f"running {jobs_text(plan.jobs, config.num_trials)}{shard} of the {config.task_split} split ({data.source}) "
        f"with {config.agent_strategy}, memory {config.agent_memory}, {protocol.name} texts{resumed}; "
        f"results in {plan.output}")
    start = time.perf_counter()
    finished, told = 0, False
    with RunProgress(len(plan.jobs) + len(plan.kept), plan.kept) as bar:
        try:
            for record in finished_records(plan.jobs, run_one, config.max_concurrency):
                if record is None:  # not started: the budget was spent
                    continue
                finished += 1
                writer.add(record)
                bar.update(record)
                if config.verbose:
                    log("\n".join([f"task {record['task_id']} ({record['info']['task']['type']}, trial "
                                    f"{record['trial']}):", *trace_lines(record),
                                    f"  action_acc {record['action_acc']} "
                                    f"res_acc {[round(r, 3) for r in record['res_acc']]}"]))
                if max_usd is not None and over_budget.is_set() and finished < len(plan.jobs) and not told:
                    told = True
                    log(f"the budget of {usd_text(max_usd)} is spent ({usd_text(paid[0])}): no more tasks start; the "
                        "tasks in flight finish and are kept")
            if max_usd is not None and over_budget.is_set() and finished < len(plan.jobs):
                raise BudgetReached(paid[0], max_usd)
        except BaseException:
            writer.save_before_stop()
            raise
    header = writer.finalize()
    return RunOutcome(header, plan.output, time.perf_counter() - start, writer.records)


def run(config: RunConfig, log: Callable[[str], None] = log_line) -> tuple[Header, Path, float]:
    """Run the configured evaluation; return the result header, the file path and wall seconds."""
    outcome = execute(prepare(config, log), log)
    return outcome.header, outcome.output, outcome.wall_s
