"""Every `run.py` setting checked before any file is touched or any work starts.

A run that would fail, or silently do something else than asked (no memory under a
`last` label, a model name on a result that used none, an existing result replaced),
stops here with one line naming the setting and what to do, and `run.py` exits 2.
Checks that need the data (the task range, `--resume_from` belonging to this run)
follow in `PersonalWAB.runner.execute.prepare` once the data is loaded, still before
anything is written.
"""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import urlsplit

from PersonalWAB.outputs import command_inputs, input_problem, output_problem, same_path
from PersonalWAB.envs.users import MULTI_TURN_USERS
from PersonalWAB.pricing import AGENT_FLAG, USER_FLAG, parse_rate
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.resume import resumes_in_place
from PersonalWAB.scratch import not_a_regular_file


class SettingsError(ValueError):
    """A run setting that cannot work; the message names it (run.py exits 2)."""


def check_settings(config: RunConfig, keys: bool = True) -> None:
    """Raise SettingsError for the first setting that cannot work; `keys=False` leaves out the
    provider keys (for a plan that sends nothing, such as a cost estimate)."""
    checks = (_check_numbers, _check_labels, _check_track, _check_agent, _check_endpoints, _check_inputs,
              _check_output, _check_trace)
    for check in checks + ((_check_keys,) if keys else ()):
        problem = check(config)
        if problem:
            raise SettingsError(problem)


def _check_numbers(c: RunConfig) -> str | None:
    if not math.isfinite(c.temperature) or c.temperature < 0:
        return f"--temperature {c.temperature}: must be a finite number >= 0"
    if not math.isfinite(c.request_timeout) or c.request_timeout <= 0:
        return f"--request_timeout {c.request_timeout}: must be a finite number of seconds > 0"
    at_least = {"--max_concurrency": (c.max_concurrency, 1), "--num_trials": (c.num_trials, 1),
                "--max_retries": (c.max_retries, 0), "--start_index": (c.start_index, 0),
                "--max_tokens": (c.max_tokens, 0)}
    for flag, (value, low) in at_least.items():
        if value < low:
            return f"{flag} {value}: must be at least {low}"
    if c.end_index != -1 and c.end_index <= c.start_index:
        return (f"--end_index {c.end_index}: must be -1 (to the end of the split) or greater than "
                f"--start_index {c.start_index}")
    if c.memory_length < 1 and c.agent_memory != "none":
        return (f"--memory_length {c.memory_length} with --agent_memory {c.agent_memory} would put no memory "
                "in the prompt: give a length >= 1, or --agent_memory none")
    if c.memory_tokens is not None and c.memory_tokens < 1:
        return f"--memory_tokens {c.memory_tokens}: a token budget is at least 1 (leave it out for none)"
    return None


def _check_labels(c: RunConfig) -> str | None:
    for tag in c.tag or []:
        key, sep, _ = tag.partition("=")
        if not sep or not key.strip():
            return f"--tag {tag!r}: must be KEY=VALUE, e.g. --tag lr=1e-4"
    if not 0 <= c.solved_threshold <= 1:
        return f"--solved_threshold {c.solved_threshold}: must be a Result Acc in [0, 1]"
    if c.log_to:
        from PersonalWAB.runner.trackers import missing_package

        return missing_package(c.log_to)
    return None


def setting_warnings(c: RunConfig) -> list[str]:
    """Settings that work but spend for nothing: trials of a model sampled greedily repeat
    each other (up to provider nondeterminism) and pay every time."""
    if c.num_trials > 1 and c.temperature == 0 and c.model:
        return [f"--num_trials {c.num_trials} at --temperature 0: greedy sampling gives nearly the same replies in "
                "every trial, so the trials cost more without measuring run-to-run noise; set --temperature "
                "(e.g. 1.0) to sample"]
    return []


def _check_track(c: RunConfig) -> str | None:
    if c.max_steps == 0 or c.max_steps < -1:
        return f"--max_steps {c.max_steps}: -1 is the single-turn track, N > 0 the multi-turn step budget"
    if c.user_mode in MULTI_TURN_USERS and c.max_steps == -1:
        return (f"--user_mode {c.user_mode} plays the user of the multi-turn track: add --max_steps N "
                "(N > 0, e.g. 20), or drop --user_mode for the single-turn track")
    if c.user_mode == "no" and c.max_steps > 0:
        return (f"--max_steps {c.max_steps} (multi-turn) needs a simulated user: add "
                f"--user_mode {' or '.join(MULTI_TURN_USERS)}")
    if c.user_mode == "naive" and not c.user_model:
        return "--user_mode naive needs --user_model (any litellm model string, e.g. gpt-4o-mini)"
    if c.user_model and c.user_mode != "naive":
        return f"--user_model {c.user_model} is used only by --user_mode naive; leave it out"
    if c.user_mode == "human" and c.max_concurrency > 1:
        return "--user_mode human talks to one person: use --max_concurrency 1"
    return None


def _check_agent(c: RunConfig) -> str | None:
    from PersonalWAB.agents.registry import STRATEGIES, builtin

    strategy = c.agent_strategy
    entry = builtin(strategy)
    if entry is None:  # an agent of one's own: importable, with solve(); --model is its own business
        from PersonalWAB.agents.custom import AgentLoadError, resolve_agent_class

        try:
            resolve_agent_class(strategy, STRATEGIES)
        except AgentLoadError as exc:
            return str(exc)
    elif not entry.needs_model:
        if c.model:
            return (f"--model {c.model} is not used by --agent_strategy {strategy}, which calls no API model "
                    "(the result would carry that model's name): leave --model out, or choose an LLM strategy")
    elif not c.model:
        return f"--agent_strategy {strategy} needs --model (any litellm model string, e.g. gpt-4o-mini)"
    if entry is not None and entry.check:
        problem = entry.load("check")(c)
        if problem:
            return problem
    from PersonalWAB.memory import MEMORY_MODES

    mode = MEMORY_MODES.get(c.agent_memory)
    if mode is not None and mode.interec_store and not c.interec_memory_file:
        from PersonalWAB.memory.interec import NEEDS_STORE

        return NEEDS_STORE
    return None


def _check_endpoints(c: RunConfig) -> str | None:
    """--api_base and --user_api_base must be http(s) URLs with a host (a bare host or a typo
    would otherwise surface as a connection error deep inside the model client); the price
    settings must read as 0 or IN,OUT."""
    for flag, value in (("--api_base", c.api_base), ("--user_api_base", c.user_api_base)):
        if value is not None and not is_http_url(value):
            return f"{flag} {value!r}: must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000/v1"
    for flag, rate in ((AGENT_FLAG, c.price_per_mtok), (USER_FLAG, c.user_price_per_mtok)):
        try:
            parse_rate(rate, flag)
        except ValueError as exc:
            return str(exc)
    return None


def is_http_url(value: str) -> bool:
    """An http or https URL with a host name (and, if given, a valid port)."""
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0  # reading the port raises ValueError on a bad one
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and port_ok


def _check_inputs(c: RunConfig) -> str | None:
    puma = c.options("puma")  # its function file is also task-specific memory's input for any agent
    files = {"--resume_from": c.resume_from, "--puma_function_file": puma.puma_function_file,
             "--puma_param_file": puma.puma_param_file, "--interec_memory_file": c.interec_memory_file}
    for flag, value in files.items():
        if not value:
            continue
        if not Path(value).exists():
            return f"{flag} {value}: no such file"
        problem = not_a_regular_file(Path(value))
        if problem:
            return f"{flag} {value}: {problem}; name a regular file"
    return None


# The settings naming a file or folder a run writes as well as reads: a result file resumed in
# place, InteRecAgent's memory (each task updates it), the response cache.
RUN_WRITES = ("out", "resume_from", "interec_memory_file", "cache", "log_dir", "trace_file")


def run_inputs(c: RunConfig) -> list[tuple[str, Path]]:
    """The files and folders a run only reads (never written over: `PersonalWAB.outputs`)."""
    return command_inputs([c, *c.agent_options.values()], writes=RUN_WRITES)


def output_target(c: RunConfig) -> Path | None:
    """The result file the settings name, or None when run.py derives one under --log_dir."""
    if c.out:
        return Path(c.out)
    return Path(c.resume_from) if c.resume_from else None


def _check_output(c: RunConfig) -> str | None:
    target = output_target(c)
    if target is None:
        return output_problem(c.log_dir, "--log_dir", folder=True)
    flag = "--out" if c.out else "--resume_from"
    problem = not_a_regular_file(target)
    if problem:  # a device, FIFO or kernel file would be read, replaced or written into (as root: /dev/null)
        return f"{flag} {target}: {problem}; name a regular result file or a new path"
    problem = input_problem(target, flag, run_inputs(c))
    if problem:
        return problem
    resuming_in_place = resumes_in_place(c, target)
    if resuming_in_place and c.overwrite:
        return "--overwrite would discard the finished tasks --resume_from keeps; drop one of them"
    if target.exists() and not (resuming_in_place or c.overwrite):
        return (f"--out {target}: already exists; pass --overwrite to replace it, --resume_from it to "
                "finish it, or choose another path")
    return output_problem(target, flag)


def _check_trace(c: RunConfig) -> str | None:
    """The trace is appended to: a regular file or a new path, none of the run's other files."""
    if c.trace_file is None:
        return None
    trace = Path(c.trace_file)
    problem = not_a_regular_file(trace)
    if problem:
        return f"--trace_file {trace}: {problem}"
    target = output_target(c)
    if target is not None and same_path(trace, target):
        return f"--trace_file {trace}: is the result file; name a file of its own"
    inputs = run_inputs(c)
    for flag, folder in inputs:  # appended to, a file in the data folder would change the data
        if folder.is_dir() and trace.resolve().is_relative_to(folder.resolve()):
            return (f"--trace_file {trace}: is inside this command's input folder ({flag} {folder}); name a path "
                    "outside it")
    return input_problem(trace, "--trace_file", inputs) or output_problem(trace, "--trace_file")


def _check_keys(c: RunConfig) -> str | None:
    """Missing provider keys, named before anything runs (a call without one would fail every task)."""
    from PersonalWAB.agents.registry import builtin
    from PersonalWAB.llm import missing_key_message, missing_keys

    entry = builtin(c.agent_strategy)
    if c.model and (entry is None or entry.needs_model):  # a custom agent may call no model
        keys = missing_keys(c.model, c.api_base)
        if keys:
            return missing_key_message(c.model, keys, "--model", "--api_base")
    if c.user_mode == "naive" and c.user_model:  # none at all is refused with its own message
        keys = missing_keys(c.user_model, c.user_api_base)
        if keys:
            return missing_key_message(c.user_model, keys, "--user_model", "--user_api_base")
    return None
