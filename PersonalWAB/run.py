"""Run an agent over a task split and write a leaderboard result file.

Tasks run on `--max_concurrency` threads that share one data object and one set
of engines. Finished tasks are checkpointed into the result file as they
complete; `--resume_from FILE` skips the tasks that file already holds (tasks
that ended in an error are run again) once it has checked that the file belongs
to this run.

Exit status of `main`: 0 all tasks ran; 1 a fatal model error stopped the run
(missing or refused key, unknown model); 2 a setting or input file is wrong
(nothing was written); 3 some tasks ended in an error (resume to run them
again); 130 interrupted (Ctrl-C). Every stop after the result file was claimed
prints the `--resume_from` command that finishes the run.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import random
import re
import shlex
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from PersonalWAB import __version__
from PersonalWAB.errors import DataError, FatalError
from PersonalWAB.memory import RELEASE_MEMORY_LENGTH
from PersonalWAB.progress import log_line

SYNTHETIC_NOTE = "synthetic data: these numbers are not comparable to the paper's"
OTHER_DATA_NOTE = ("{source} data, not the official benchmark: these numbers compare only with runs on the same "
                   "data, not with the paper's")
CUSTOM_NOTE = ("custom run ({why}): these numbers are not comparable to the paper's tables or the leaderboard; "
               "see docs/fidelity.md")
UNPRICED_NOTE = "the model has no price in litellm's table; its calls are counted as costing 0"
EXIT_FATAL, EXIT_SETTINGS, EXIT_TASK_ERRORS, EXIT_INTERRUPTED = 1, 2, 3, 130
STORE_TRUE_FLAGS = ("verbose", "shuffle", "overwrite")


@dataclass
class RunConfig:
    env: str = "pwab"
    model: str | None = None
    user_mode: str = "no"
    user_model: str | None = None
    agent_strategy: str = "heuristic"
    temperature: float = 0.0
    task_split: str = "test"
    agent_memory: str = "last"
    memory_length: int = 10
    max_steps: int = -1
    start_index: int = 0
    end_index: int = -1
    resume_from: str | None = None
    verbose: bool = False
    log_dir: str = "results"
    max_concurrency: int = 1
    seed: int = 2024
    shuffle: bool = False
    num_trials: int = 1
    interec_memory_file: str | None = None
    puma_param_file: str | None = None
    puma_function_file: str | None = None
    puma_generate: bool = False
    puma_model_path: str | None = None
    puma_recipe: str = "release"
    puma_dtype: str = "auto"
    mem_token_length: int = 768
    data_dir: str | None = None
    search_backend: str = "lucene"
    output: str | None = None
    api_base: str | None = None
    user_api_base: str | None = None
    max_retries: int = 5
    overwrite: bool = False
    protocol_file: str | None = None
    leak_guard: bool = False


def build_parser() -> argparse.ArgumentParser:
    from PersonalWAB.agents.registry import STRATEGIES
    from PersonalWAB.envs.users import USER_MODES
    from PersonalWAB.memory import MEMORY_MODES

    p = argparse.ArgumentParser(description="Evaluate an agent on PersonalWAB.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    d = RunConfig()
    p.add_argument("--env", default=d.env, choices=["pwab"], help="benchmark environment")
    p.add_argument("--model", default=d.model,
                   help="the agent's model, any litellm model string (LLM strategies only; offline agents "
                        "refuse it)")
    p.add_argument("--user_mode", default=d.user_mode, choices=USER_MODES,
                   help="simulated user of the multi-turn track: naive (LLM), human (terminal), offline "
                        "(rules, no model); no: single-turn")
    p.add_argument("--user_model", default=d.user_model, help="the naive user's model (litellm model string)")
    p.add_argument("--agent_strategy", default=d.agent_strategy, metavar="STRATEGY",
                   help=f"agent: one of {', '.join(STRATEGIES)} (heuristic: offline, no model; puma: "
                        "function/parameter files or a fine-tuned model; the others need --model), or your own: "
                        "package.module:ClassName, or the name of a 'pwab.agents' entry point (docs/agents.md)")
    p.add_argument("--temperature", type=float, default=d.temperature, help="sampling temperature of the agent's model")
    p.add_argument("--task_split", default=d.task_split, choices=["train", "test"], help="task split to run")
    p.add_argument("--agent_memory", default=d.agent_memory, choices=MEMORY_MODES,
                   help="which of the user's past behaviours go into the agent's prompt")
    p.add_argument("--memory_length", type=int, default=d.memory_length,
                   help="behaviours in the memory (the release always used 10, whatever its scripts said; "
                        "another value is a departure)")
    p.add_argument("--max_steps", type=int, default=d.max_steps,
                   help="-1: single-turn track; N > 0: multi-turn track with N agent steps per task")
    p.add_argument("--start_index", type=int, default=d.start_index, help="first task of the split to run")
    p.add_argument("--end_index", type=int, default=d.end_index, help="task to stop before; -1 runs to the end")
    p.add_argument("--resume_from", default=d.resume_from,
                   help="result file of an unfinished run with the same settings: its finished tasks are kept "
                        "and the file is completed in place (unless --output)")
    p.add_argument("--verbose", action="store_true", help="print each task's scores and error tracebacks")
    p.add_argument("--log_dir", default=d.log_dir,
                   help="folder of derived result names ({singleturn,multiturn}/step..._MMDDHHMM.json)")
    p.add_argument("--max_concurrency", type=int, default=d.max_concurrency, help="tasks run at once (threads)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of random memory, shuffling and the offline user")
    p.add_argument("--shuffle", action="store_true", help="run the tasks in a seeded random order")
    p.add_argument("--num_trials", type=int, default=d.num_trials, help="runs of every task")
    p.add_argument("--interec_memory_file", default=d.interec_memory_file,
                   help="InteRecAgent memory store (for --agent_memory interecagent)")
    p.add_argument("--puma_param_file", default=d.puma_param_file, help="PUMA parameter outputs per instruction")
    p.add_argument("--puma_function_file", default=d.puma_function_file, help="PUMA function outputs per instruction")
    p.add_argument("--puma_generate", type=int, nargs="?", const=1, default=int(d.puma_generate), choices=[0, 1],
                   help="1: generate PUMA's function and parameters live with --puma_model_path; "
                        "0: read them from --puma_function_file / --puma_param_file")
    p.add_argument("--puma_model_path", default=d.puma_model_path,
                   help="fine-tuned model (merged, or a LoRA adapter folder) for --puma_generate")
    p.add_argument("--puma_recipe", default=d.puma_recipe, choices=["release", "improved"],
                   help="how the puma agent reads its model (PUMA/recipe.py): release = the release's evaluation "
                        "prompt and rules; improved = the training prompt, predicted-type memory (a departure)")
    p.add_argument("--puma_dtype", default=d.puma_dtype, choices=["auto", "float32", "bfloat16", "float16"],
                   help="live generation precision; auto: the recipe's on a GPU (release fp16, improved bf16), "
                        "float32 on a CPU")
    p.add_argument("--mem_token_length", type=int, default=d.mem_token_length,
                   help="tokens of task-specific memory in PUMA's prompt")
    p.add_argument("--data_dir", default=d.data_dir,
                   help="data directory (default: official data if placed, else data/synthetic/small)")
    p.add_argument("--search_backend", default=d.search_backend, choices=["lucene", "bm25s"],
                   help="search engine behind search_product_by_query (lucene is the official one)")
    p.add_argument("--output", default=d.output,
                   help="result file path (default: a new name under --log_dir derived from the settings)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument("--api_base", default=d.api_base,
                   help="base URL of an OpenAI-compatible server (vLLM, Ollama, ...) for the agent's model")
    p.add_argument("--user_api_base", default=d.user_api_base, help="the same for the user simulator's model")
    p.add_argument("--max_retries", type=int, default=d.max_retries,
                   help="retries of a model call on rate limits, timeouts and server errors")
    p.add_argument("--protocol_file", default=d.protocol_file,
                   help="release protocol pack (default: PersonalWAB/envs/pwab/data/release_protocol.json when "
                        "placed; without one the project's own texts are used and the run is custom)")
    p.add_argument("--leak_guard", action="store_true",
                   help="mask the target ASIN and copied review spans in user messages (a departure from the release)")
    return p


def protocol_departures(config: RunConfig) -> list[str]:
    """Every setting of this run that departs from what the release does (the texts aside)."""
    from PersonalWAB.agents.registry import builtin

    departures = []
    entry = builtin(config.agent_strategy)
    if entry is None:  # a custom agent is never the paper's
        departures.append(f"agent_strategy {config.agent_strategy}: a custom agent, not in the release")
    elif not entry.in_release:
        departures.append(f"agent_strategy {config.agent_strategy}: the project's offline agent, not in the release")
    if config.agent_memory != "none" and config.memory_length != RELEASE_MEMORY_LENGTH:
        departures.append(f"memory_length {config.memory_length}: the release always used {RELEASE_MEMORY_LENGTH}")
    if config.search_backend != "lucene":
        departures.append(f"search_backend {config.search_backend}: the release searched with Lucene")
    if config.user_mode == "offline":
        departures.append("user_mode offline: the project's rule-based user, not the release's LLM user")
    if config.leak_guard:
        departures.append("leak_guard: user messages masked before the agent reads them")
    if entry is not None and entry.departures:
        departures += entry.load("departures")(config)
    return departures


def custom_reasons(record: dict[str, Any]) -> list[str]:
    """Why a run's `protocol` record makes it custom ([] for a standard run)."""
    from PersonalWAB.protocol.spec import RELEASE_SHORT

    texts = [] if record.get("texts") == f"release@{RELEASE_SHORT}" else [f"{record.get('texts')} texts"]
    return texts + list(record.get("departures") or [])


def protocol_record(protocol: Any, config: RunConfig) -> dict[str, Any]:
    """`run_args.protocol`: the texts used and every departure; standard only with the
    pinned release's texts and none."""
    departures = protocol_departures(config)
    return {"texts": protocol.name, "departures": departures,
            "standard": protocol.is_pinned_release and not departures}


def default_output_path(config: RunConfig, end_index: int) -> Path:
    track = "singleturn" if config.max_steps == -1 else "multiturn"
    model = (config.model or "offline").replace("/", "_")
    user = (config.user_model or ("none" if config.user_mode == "no" else config.user_mode)).replace("/", "_")
    stamp = datetime.now().strftime("%m%d%H%M")
    strategy = re.sub(r"[^\w.-]", "_", config.agent_strategy)  # a custom agent's module:Class
    name = (f"step{config.max_steps}_{strategy}-{model}-{config.temperature}"
            f"_mem{config.agent_memory}_range{config.start_index}-{end_index}_user{user}_{stamp}.json")
    return Path(config.log_dir) / track / name


def make_record(task_id: int, trial: int, task: dict[str, Any], env: Any, episode: Any) -> dict[str, Any]:
    from PersonalWAB.results import task_summary

    info: dict[str, Any] = {
        "task": task_summary(task),
        "actions": [a for a in episode.actions if a["name"] != "respond"],
        "user_cost": episode.user_cost,
        "usage": episode.usage.to_dict(),
    }
    if env.leak_flags:
        info["leak_guard"] = env.leak_flags
    info.update(episode.notes)
    if episode.error:
        info["error"] = episode.error
    return {
        "task_id": task_id,
        "action_acc": [a.function_acc for a in env.attempts],
        "res_acc": [a.result_acc for a in env.attempts],
        "info": info,
        "traj": episode.traj,
        "trial": trial,
    }


@dataclass
class RunPlan:
    """A checked run: its tasks, the records kept from --resume_from and where results go.

    `prepare` builds it without writing anything; `execute` fills in `writer` once it has
    claimed the result file, so whoever stops a run knows what was saved and where."""

    config: RunConfig
    data: Any
    tasks: list[dict[str, Any]]
    jobs: list[tuple[int, int]]
    kept: list[dict[str, Any]]
    run_args: dict[str, Any]
    output: Path
    claim: str  # "unique" (a derived name), "new" (--output, must not exist) or "replace"
    protocol: Any  # the texts the run shows models (`PersonalWAB.protocol.Protocol`)
    end: int  # the task index the run stops before
    writer: Any = None


@dataclass
class RunOutcome:
    """A finished run: its header, where the file is, the wall time of its tasks and all records."""

    header: dict[str, Any]
    output: Path
    wall_s: float
    records: list[dict[str, Any]]


def prepare(config: RunConfig, log: Callable[[str], None] = log_line) -> RunPlan:
    """Check every setting, load the data and the records to keep; nothing is written."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.envs.users import get_user
    from PersonalWAB.engines.text_embedding import default_backend
    from PersonalWAB.envs.users.offline_user import NOTE as OFFLINE_USER_NOTE
    from PersonalWAB.paths import default_data_dir
    from PersonalWAB.protocol import load_protocol
    from PersonalWAB.results import resumable_records
    from PersonalWAB.run_checks import SettingsError, check_settings, output_target

    check_settings(config)
    get_user(config.user_mode, config.user_model, config.user_api_base, config.seed)  # fail early on bad settings
    try:
        embedding_backend = default_backend()
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    protocol = load_protocol(config.protocol_file)
    if config.search_backend == "lucene":
        from PersonalWAB.engines.search.engine import start_jvm_early

        start_jvm_early()
    data = load_benchmark_data(config.data_dir or default_data_dir())
    for warning in data.warnings:
        log(f"warning: {warning}")
    tasks = data.split(config.task_split)
    end = len(tasks) if config.end_index == -1 else min(config.end_index, len(tasks))
    if config.start_index >= end:
        raise SettingsError(f"--start_index {config.start_index}: the {config.task_split} split has only "
                            f"{len(tasks)} tasks")
    task_ids = list(range(config.start_index, end))
    if config.shuffle:
        random.Random(config.seed).shuffle(task_ids)
    run_args = {**asdict(config), "data_dir": str(data.data_dir), "data_source": data.source,
                "data_fingerprint": data.fingerprint, "project_version": __version__,
                "protocol": protocol_record(protocol, config), "embedding_backend": embedding_backend}
    if config.user_mode == "offline":
        run_args["user_simulator_note"] = OFFLINE_USER_NOTE

    kept: list[dict[str, Any]] = []
    if config.resume_from:
        kept, notes = resumable_records(config.resume_from, run_args, tasks, set(task_ids), config.num_trials)
        for note in notes:
            log(f"note: {note}")
    done_keys = {(r["trial"], r["task_id"]) for r in kept}
    jobs = [(trial, tid) for trial in range(config.num_trials) for tid in task_ids if (trial, tid) not in done_keys]

    output = output_target(config)
    if output is None:
        return RunPlan(config, data, tasks, jobs, kept, run_args, default_output_path(config, end), "unique",
                       protocol, end)
    in_place = bool(config.resume_from) and output.resolve() == Path(config.resume_from).resolve()
    return RunPlan(config, data, tasks, jobs, kept, run_args, output,
                   "replace" if in_place or config.overwrite else "new", protocol, end)


def execute(plan: RunPlan, log: Callable[[str], None] = log_line) -> RunOutcome:
    """Build what the tasks need, claim the result file and run the tasks, checkpointing as they finish."""
    from PersonalWAB.agents.registry import build_agent
    from PersonalWAB.build import build_artifacts, cache_review_embeddings
    from PersonalWAB.engines.shared import shared_engines
    from PersonalWAB.envs.pwab.env import PWABEnv
    from PersonalWAB.envs.users import get_user
    from PersonalWAB.progress import RunProgress
    from PersonalWAB.results import ResultWriter
    from PersonalWAB.scratch import remove_stale
    from PersonalWAB.types import Episode

    config, data, tasks, run_args, protocol = plan.config, plan.data, plan.tasks, plan.run_args, plan.protocol
    for path in remove_stale(plan.output.parent):
        log(f"removed {path}, left by a run that was killed")
    kinds = {tasks[tid]["type"] for _, tid in plan.jobs}
    ranked_memory = config.agent_memory in ("relevant", "taskspe")
    users = {tasks[tid]["user_id"] for _, tid in plan.jobs}
    some_users = ranked_memory and len(users) < len(data.histories)  # encode theirs only, unless built
    build_artifacts(data, (config.search_backend,) if "search" in kinds else (),
                    recommender="recommend" in kinds, memory_embeddings=ranked_memory and not some_users,
                    log=log, protocol=protocol)
    if some_users:
        from PersonalWAB.memory.embeddings import shared_behaviour_embeddings

        shared_behaviour_embeddings(data, protocol).prepare_users(
            users, [tasks[tid]["task"] for _, tid in plan.jobs], log=log)
    engines = shared_engines(data, config.search_backend, protocol)
    cache_review_embeddings(data, [tasks[tid] for _, tid in plan.jobs])
    agent = build_agent(data, config)

    def run_one(trial: int, task_id: int) -> dict[str, Any]:
        user = get_user(config.user_mode, config.user_model, config.user_api_base, config.seed, config.max_retries)
        env = PWABEnv(engines, config.task_split, user, config.max_steps, protocol=protocol,
                      leak_guard=config.leak_guard, trial=trial)
        try:
            episode = agent.solve(env, task_id)
        except (DataError, FatalError):
            raise
        except Exception as exc:  # an agent/API failure is recorded; resume retries the task
            # what the episode did before failing (calls made, their cost) is kept
            episode = getattr(exc, "episode", None) or Episode()
            episode.error = f"{type(exc).__name__}: {exc}"
            if config.verbose:
                traceback.print_exc()
        if episode.usage.price_unknown:
            run_args["cost_note"] = UNPRICED_NOTE
        if user is not None:
            episode.user_cost = user.cost
        return make_record(task_id, trial, tasks[task_id], env, episode)

    writer = ResultWriter(plan.output, run_args, plan.kept)
    plan.output = writer.start(unique=plan.claim == "unique", replace=plan.claim == "replace")
    plan.writer = writer
    resumed = f"; {len(plan.kept)} kept from {config.resume_from}" if config.resume_from else ""
    log(f"running {len(plan.jobs)} task(s) of the {config.task_split} split ({data.source}) "
        f"with {config.agent_strategy}, memory {config.agent_memory}, {protocol.name} texts{resumed}; "
        f"results in {plan.output}")
    start = time.perf_counter()
    with RunProgress(len(plan.jobs) + len(plan.kept), plan.kept) as bar:
        try:
            for record in finished_records(plan.jobs, run_one, config.max_concurrency):
                writer.add(record)
                bar.update(record)
                if config.verbose:
                    log(f"task {record['task_id']} ({record['info']['task']['type']}): "
                        f"action_acc {record['action_acc']} res_acc {[round(r, 3) for r in record['res_acc']]}")
        except BaseException:
            writer.flush()
            raise
    header = writer.finalize()
    return RunOutcome(header, plan.output, time.perf_counter() - start, writer.records)


def finished_records(jobs: list[tuple[int, int]], run_one: Callable[[int, int], dict[str, Any]],
                     workers: int) -> Iterator[dict[str, Any]]:
    """Run the jobs on `workers` threads and yield each record as it finishes.

    The threads are daemons and the caller only ever waits on a queue, so Ctrl-C (or a
    fatal error) stops the run at once: tasks still in flight are abandoned, not awaited
    (they are unfinished and run again on resume). An exception a task lets through
    (data errors, fatal model errors, an interrupt) is raised here and stops the rest.
    """
    pending: queue.Queue[tuple[int, int]] = queue.Queue()
    for job in jobs:
        pending.put(job)
    done: queue.Queue[tuple[dict[str, Any] | None, BaseException | None]] = queue.Queue()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                trial, task_id = pending.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((run_one(trial, task_id), None))
            except BaseException as exc:  # handed to the caller, which stops the run
                done.put((None, exc))
                return

    for number in range(min(workers, len(jobs))):
        threading.Thread(target=work, name=f"task-worker-{number}", daemon=True).start()
    try:
        for _ in jobs:
            record, failure = done.get()
            if failure is not None:
                raise failure
            yield record
    finally:
        stop.set()


def resume_command(config: RunConfig, output: Path) -> str:
    """The run.py command line that finishes this run: its non-default settings and --resume_from."""
    defaults = RunConfig()
    words = ["python", "run.py"]
    for item in fields(RunConfig):
        value = getattr(config, item.name)
        if item.name in ("resume_from", "output", "overwrite") or value == getattr(defaults, item.name):
            continue
        if item.name in STORE_TRUE_FLAGS:
            words.append(f"--{item.name}")
        else:
            words += [f"--{item.name}", str(int(value) if isinstance(value, bool) else value)]
    return shlex.join(words + ["--resume_from", str(output)])


def run(config: RunConfig, log: Callable[[str], None] = log_line) -> tuple[dict[str, Any], Path, float]:
    """Run the configured evaluation; return the result header, the file path and wall seconds."""
    outcome = execute(prepare(config, log), log)
    return outcome.header, outcome.output, outcome.wall_s


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.results import count_errors, format_statistics_table
    from PersonalWAB.trials import TRIALS_KEY, format_trial_table

    args = build_parser().parse_args(argv)
    config = RunConfig(**{f.name: getattr(args, f.name) for f in fields(RunConfig)})
    config.puma_generate = bool(config.puma_generate)
    try:
        plan = prepare(config)
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    try:
        outcome = execute(plan)
    except KeyboardInterrupt:
        _report_stop(plan, "interrupted")
        return EXIT_INTERRUPTED
    except FatalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _report_stop(plan, "stopped")
        return EXIT_FATAL
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        _report_stop(plan, "stopped")
        return EXIT_SETTINGS
    source = outcome.header["run_args"]["data_source"]
    errors = count_errors(outcome.records)
    print(format_statistics_table(outcome.header["results"], title=f"Results ({source}; {outcome.wall_s:.1f} s)",
                                  errors=errors))
    if TRIALS_KEY in outcome.header:
        print(format_trial_table(outcome.header[TRIALS_KEY]))
    if source.startswith("synthetic"):
        print(f"note: {SYNTHETIC_NOTE}")
    elif source != "official":
        print(f"note: {OTHER_DATA_NOTE.format(source=source)}")
    record = outcome.header["run_args"]["protocol"]
    if not record["standard"]:
        print(f"note: {CUSTOM_NOTE.format(why='; '.join(custom_reasons(record)))}")
    print(f"result file: {outcome.output}")
    if errors["overall"]:
        print(f"{errors['overall']} task(s) ended in an error and score 0 until run again (rows marked under "
              f"'errored'); finish them with:\n  {resume_command(config, outcome.output)}", file=sys.stderr)
        return EXIT_TASK_ERRORS
    return 0


def cli() -> None:
    """`python run.py`: `main`, then leave without the interpreter's shutdown. Everything the
    run keeps is on disk by then, and the shutdown has nothing left to save: after a finished
    run it only tears down the loaded data and the JVM (~1 s on `full`, 40% of a short run's
    wall time); after Ctrl-C or a fatal error it would wait for the tasks still in flight and
    the library threads they use (a model call can take minutes)."""
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _report_stop(plan: RunPlan, how: str) -> None:
    """Say what a stopped run kept and the command that finishes it."""
    if plan.writer is None:
        print(f"{how} before any task ran; no result file was written", file=sys.stderr)
        return
    done, total = len(plan.writer.records), len(plan.kept) + len(plan.jobs)
    print(f"{how}: {done} of {total} task(s) finished and kept in {plan.output}; finish the run with:\n"
          f"  {resume_command(plan.config, plan.output)}", file=sys.stderr)
