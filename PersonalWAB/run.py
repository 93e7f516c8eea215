"""Run an agent over a task split and write a leaderboard result file.

Tasks run on `--max_concurrency` threads that share one data object and one set
of engines. Finished tasks are checkpointed into the result file as they
complete; `--resume_from FILE` skips the tasks that file already holds (tasks
that ended in an error are run again).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from PersonalWAB import __version__
from PersonalWAB.errors import DataError
from PersonalWAB.memory import RELEASE_MEMORY_LENGTH

SYNTHETIC_NOTE = "synthetic data: these numbers are not comparable to the paper's"
CUSTOM_NOTE = ("custom run ({why}): these numbers are not comparable to the paper's tables or the leaderboard; "
               "see README, Fidelity")
UNPRICED_NOTE = "the model has no price in litellm's table; its calls are counted as costing 0"


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
    mem_token_length: int = 768
    data_dir: str | None = None
    search_backend: str = "lucene"
    output: str | None = None
    api_base: str | None = None
    user_api_base: str | None = None
    max_retries: int = 5
    protocol_file: str | None = None
    leak_guard: bool = False


def build_parser() -> argparse.ArgumentParser:
    from PersonalWAB.agents import AGENT_STRATEGIES
    from PersonalWAB.memory import MEMORY_MODES

    p = argparse.ArgumentParser(description="Evaluate an agent on PersonalWAB.")
    d = RunConfig()
    p.add_argument("--env", default=d.env, choices=["pwab"])
    p.add_argument("--model", default=d.model, help="any litellm model string (unused by offline agents)")
    p.add_argument("--user_mode", default=d.user_mode, choices=["no", "naive", "human", "offline"],
                   help="multi-turn user simulator: naive (LLM), human (terminal), offline (rules, no model)")
    p.add_argument("--user_model", default=d.user_model)
    p.add_argument("--agent_strategy", default=d.agent_strategy, choices=AGENT_STRATEGIES)
    p.add_argument("--temperature", type=float, default=d.temperature)
    p.add_argument("--task_split", default=d.task_split, choices=["train", "test"])
    p.add_argument("--agent_memory", default=d.agent_memory, choices=MEMORY_MODES)
    p.add_argument("--memory_length", type=int, default=d.memory_length,
                   help="behaviours in the memory (the release always used 10; another value is a departure)")
    p.add_argument("--max_steps", type=int, default=d.max_steps, help="-1: single-turn; N > 0: multi-turn")
    p.add_argument("--start_index", type=int, default=d.start_index)
    p.add_argument("--end_index", type=int, default=d.end_index, help="exclusive; -1 runs to the end")
    p.add_argument("--resume_from", default=d.resume_from, help="result file whose finished tasks are kept")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--log_dir", default=d.log_dir)
    p.add_argument("--max_concurrency", type=int, default=d.max_concurrency)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--shuffle", action="store_true")
    p.add_argument("--num_trials", type=int, default=d.num_trials)
    p.add_argument("--interec_memory_file", default=d.interec_memory_file)
    p.add_argument("--puma_param_file", default=d.puma_param_file)
    p.add_argument("--puma_function_file", default=d.puma_function_file)
    p.add_argument("--puma_generate", type=int, nargs="?", const=1, default=int(d.puma_generate), choices=[0, 1],
                   help="1: generate PUMA's function and parameters live with --puma_model_path; "
                        "0: read them from --puma_function_file / --puma_param_file")
    p.add_argument("--puma_model_path", default=d.puma_model_path)
    p.add_argument("--mem_token_length", type=int, default=d.mem_token_length)
    p.add_argument("--data_dir", default=d.data_dir,
                   help="data directory (default: official data if placed, else data/synthetic/small)")
    p.add_argument("--search_backend", default=d.search_backend, choices=["lucene", "bm25s"])
    p.add_argument("--output", default=d.output, help="result file path (default: derived from the run args)")
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
    departures = []
    if config.agent_strategy == "heuristic":
        departures.append("agent_strategy heuristic: the project's offline agent, not in the release")
    if config.agent_memory != "none" and config.memory_length != RELEASE_MEMORY_LENGTH:
        departures.append(f"memory_length {config.memory_length}: the release always used {RELEASE_MEMORY_LENGTH}")
    if config.search_backend != "lucene":
        departures.append(f"search_backend {config.search_backend}: the release searched with Lucene")
    if config.user_mode == "offline":
        departures.append("user_mode offline: the project's rule-based user, not the release's LLM user")
    if config.leak_guard:
        departures.append("leak_guard: user messages masked before the agent reads them")
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
    name = (f"step{config.max_steps}_{config.agent_strategy}-{model}-{config.temperature}"
            f"_mem{config.agent_memory}_range{config.start_index}-{end_index}_user{user}_{stamp}.json")
    return Path(config.log_dir) / track / name


def make_record(task_id: int, trial: int, task: dict[str, Any], env: Any, episode: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "task": {
            "user_id": task["user_id"],
            "task": task["task"],
            "type": task["type"],
            "timestamp": task["timestamp"],
            "target": task["target"]["product_info"]["parent_asin"],
        },
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


def run(config: RunConfig, log: Any = print) -> tuple[dict[str, Any], Path, float]:
    """Run the configured evaluation; return the result header, the file path and wall seconds."""
    from PersonalWAB.agents import build_agent
    from PersonalWAB.build import build_artifacts, cache_review_embeddings
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.envs.pwab.engines import shared_engines
    from PersonalWAB.envs.pwab.env import PWABEnv
    from PersonalWAB.envs.user import get_user
    from PersonalWAB.envs.users.offline_user import NOTE as OFFLINE_USER_NOTE
    from PersonalWAB.memory import ReleaseRandomMemory
    from PersonalWAB.paths import default_data_dir
    from PersonalWAB.protocol import load_protocol
    from PersonalWAB.results import ResultWriter, load_result_file
    from PersonalWAB.types import Episode

    if config.user_mode == "human" and config.max_concurrency > 1:
        raise ValueError("--user_mode human talks to one person: use --max_concurrency 1")
    get_user(config.user_mode, config.user_model, config.user_api_base, config.seed)  # fail early on bad settings
    protocol = load_protocol(config.protocol_file)
    data = load_benchmark_data(config.data_dir or default_data_dir())
    for warning in data.warnings:
        log(f"warning: {warning}")
    tasks = data.split(config.task_split)
    end = len(tasks) if config.end_index == -1 else min(config.end_index, len(tasks))
    if not 0 <= config.start_index < end:
        raise ValueError(f"empty task range {config.start_index}-{end} for {len(tasks)} {config.task_split} tasks")
    task_ids = list(range(config.start_index, end))
    if config.shuffle:
        random.Random(config.seed).shuffle(task_ids)

    kept: list[dict[str, Any]] = []
    if config.resume_from:
        _, previous = load_result_file(config.resume_from)
        kept = [r for r in previous if "error" not in r["info"]]
    done_keys = {(r["trial"], r["task_id"]) for r in kept}
    jobs = [(trial, tid) for trial in range(config.num_trials) for tid in task_ids if (trial, tid) not in done_keys]

    output = Path(config.output) if config.output else (
        Path(config.resume_from) if config.resume_from else default_output_path(config, end))
    run_args = {**asdict(config), "data_dir": str(data.data_dir), "data_source": data.source,
                "project_version": __version__, "protocol": protocol_record(protocol, config)}
    if config.user_mode == "offline":
        run_args["user_simulator_note"] = OFFLINE_USER_NOTE
    writer = ResultWriter(output, run_args, kept)

    kinds = {tasks[tid]["type"] for _, tid in jobs}
    build_artifacts(data, (config.search_backend,) if "search" in kinds else (),
                    recommender="recommend" in kinds,
                    memory_embeddings=config.agent_memory in ("relevant", "taskspe"), log=log, protocol=protocol)
    engines = shared_engines(data, config.search_backend, protocol)
    cache_review_embeddings(data, [tasks[tid] for _, tid in jobs])
    random_memory = None
    if config.agent_memory == "random":  # the release's draws, in its task order (shuffle does not change it)
        release_order = [(trial, tid) for trial in range(config.num_trials) for tid in range(config.start_index, end)]
        random_memory = ReleaseRandomMemory(data, tasks, release_order, config.memory_length, config.seed)
    agent = build_agent(config.agent_strategy, data, config, random_memory)

    def run_one(trial: int, task_id: int) -> dict[str, Any]:
        user = get_user(config.user_mode, config.user_model, config.user_api_base, config.seed, config.max_retries)
        env = PWABEnv(engines, config.task_split, user, config.max_steps, protocol=protocol,
                      leak_guard=config.leak_guard, trial=trial)
        try:
            episode = agent.solve(env, task_id)
        except DataError:
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

    resumed = f"; {len(kept)} kept from {config.resume_from}" if config.resume_from else ""
    log(f"running {len(jobs)} task(s) of the {config.task_split} split ({data.source}) "
        f"with {config.agent_strategy}, memory {config.agent_memory}, {protocol.name} texts{resumed}")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, config.max_concurrency)) as pool:
        futures = [pool.submit(run_one, trial, tid) for trial, tid in jobs]
        try:
            for future in as_completed(futures):
                record = future.result()
                writer.add(record)
                if config.verbose:
                    log(f"task {record['task_id']} ({record['info']['task']['type']}): "
                        f"action_acc {record['action_acc']} res_acc {[round(r, 3) for r in record['res_acc']]}")
        except BaseException:
            for future in futures:
                future.cancel()
            writer.flush()
            raise
    header = writer.finalize()
    return header, output, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.results import format_statistics_table

    args = build_parser().parse_args(argv)
    config = RunConfig(**{f.name: getattr(args, f.name) for f in fields(RunConfig)})
    config.puma_generate = bool(config.puma_generate)
    try:
        header, output, wall_s = run(config)
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    source = header["run_args"]["data_source"]
    protocol = header["run_args"]["protocol"]
    print(format_statistics_table(header["results"], title=f"Results ({source}; {wall_s:.1f} s)"))
    if source != "official":
        print(f"note: {SYNTHETIC_NOTE}")
    if not protocol["standard"]:
        print(f"note: {CUSTOM_NOTE.format(why='; '.join(custom_reasons(protocol)))}")
    print(f"result file: {output}")
    return 0
