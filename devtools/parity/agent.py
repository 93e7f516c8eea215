"""The `agent_paths` item of the `puma` check: the release's PUMA agent (its run.py,
`--agent_strategy puma`, outputs read from `--puma_function_file` and `--puma_param_file`) and
this project's (`run.py --agent_strategy puma --recipe release`) given the same scripted
model outputs, single-turn and multi-turn (`--max_steps 3`, the LLM user played by a scripted
server), so that every way the release's agent reads an output is exercised: exact function
names and names it does not know, `Say:` messages, `stop`, ASIN lists in the forms an LLM writes
them, empty outputs, reviews (`PATHS`).

Each path takes one task of the test split, in order from the first (`assign`); a task whose
instruction came earlier repeats that task's path (the files are keyed by instruction). The
path on which the release's agent crashes (a function name it does not know with a parameter:
its action is never set; the project's fix is a listed bug fix) goes last, so every other task
has run when the release's run dies.

Compared per task: every action sent to the environment (name and arguments, recorded inside
each process), its observation and scores, the number of steps, and the scores in the two
result files. A recommend action whose ASINs the two read in another order (the release's
`list(set(...))`, the project's first-occurrence order: a listed bug fix) counts as the
declared order only when proved: the project, given that task's output rewritten in the
release's order, sends the release's action and gets its observation and scores.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from devtools.parity.compare import Tally, canonical, first_difference, score_verdict
from devtools.parity.requests import USER_REPLY
from devtools.parity.scoring import ORDER_NOTE, Target, recommend_lists, target_of
from devtools.parity.mirror import ParityError, finish, launch, log_tail
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply

SEARCH, RECOMMEND, REVIEW = "search_product_by_query", "get_recommendations_by_history", "add_product_review"
FUNCTION_OF_TYPE = {"search": SEARCH, "recommend": RECOMMEND, "review": REVIEW}
USER_MODEL = "gpt-4o"  # the release's LLM user takes gpt-4 names only
MULTITURN_STEPS = 3
CRASH_NOTE = "release crashed on an unknown function with a parameter (listed bug fix); project: a message, (0, 0)"


@dataclass(frozen=True)
class AgentPath:
    """One scripted output pair: the function output (the function file holds it as the first
    entry of a list, as the release's files do) and the parameter output. `kind`: the task type
    it needs (None: any; `function` None: the task's own function). `reading`: the branch of the
    release's agent it takes."""

    name: str
    reading: str
    param: Callable[[Target, dict[str, list[str]]], str]
    kind: str | None = None
    function: str | None = None


def _asins(lists: dict[str, list[str]]) -> list[str]:
    """The ASINs of a list that hits in both orders (else any list of the pool)."""
    text = next((found[0] for name in ("both", "project", "release", "neither") if (found := lists.get(name))), "")
    return [part.strip() for part in text.split(",") if part.strip()]


def _half(text: str) -> str:
    words = text.split()
    return " ".join(words[: max(1, len(words) // 2)])


PATHS: tuple[AgentPath, ...] = (
    AgentPath("search: the title", "search", lambda t, _: t.title, "search"),
    AgentPath("search: half the title", "search", lambda t, _: _half(t.title), "search"),
    AgentPath("search: a leading space", "search", lambda t, _: " " + t.title, "search"),
    AgentPath("search: a trailing line break", "search", lambda t, _: t.title + "\n", "search"),
    AgentPath("search: empty", "search", lambda t, _: "", "search"),
    AgentPath("recommend: hits in both orders", "recommend", lambda t, ls: ", ".join(_asins(ls)), "recommend"),
    AgentPath("recommend: hits in the project's order only", "recommend",
              lambda t, ls: (ls.get("project") or [t.asin])[0], "recommend"),
    AgentPath("recommend: no spaces", "recommend", lambda t, ls: ",".join(_asins(ls)), "recommend"),
    AgentPath("recommend: a Python list", "recommend", lambda t, ls: str(_asins(ls)), "recommend"),
    AgentPath("recommend: double quotes", "recommend", lambda t, ls: ", ".join(f'"{a}"' for a in _asins(ls)),
              "recommend"),
    AgentPath("recommend: words around the list", "recommend",
              lambda t, ls: "Here are the products: " + ", ".join(_asins(ls)) + ". Enjoy!", "recommend"),
    AgentPath("recommend: repeated and empty items", "recommend",
              lambda t, ls: ", ".join([*_asins(ls)[:2], "", *_asins(ls)]) + ",", "recommend"),
    AgentPath("recommend: the target alone", "recommend", lambda t, _: t.asin, "recommend"),
    AgentPath("recommend: empty", "recommend", lambda t, _: "", "recommend"),
    AgentPath("review: the real review", "review", lambda t, _: t.review, "review"),
    AgentPath("review: a trailing line break", "review", lambda t, _: _half(t.review) + "\n", "review"),
    AgentPath("review: empty", "review", lambda t, _: "", "review"),
    AgentPath("function: another type's, exact", "search", lambda t, _: t.title, "recommend", SEARCH),
    AgentPath("say: a message", "say", lambda t, _: "Say: Which colour would you like?"),
    AgentPath("say: no space after the colon", "say", lambda t, _: "Say:which size do you need?"),
    AgentPath("say: the marker twice", "say", lambda t, _: "Say: one thing. Say: another thing."),
    AgentPath("say: a leading space", "search", lambda t, _: " Say: anything else?", "search"),
    AgentPath("say: lower case", "search", lambda t, _: "say: anything else?", "search"),
    AgentPath("stop", "stop", lambda t, _: "stop"),
    AgentPath("stop: a word it begins", "stop", lambda t, _: "stopping here, thanks"),
    AgentPath("stop: capitalised", "search", lambda t, _: "Stop", "search"),
    AgentPath("stop: a leading space", "search", lambda t, _: " stop", "search"),
    AgentPath("function: not exact, then a message", "say", lambda t, _: "Say: tell me more",
              function="Search_product_by_query()"),
    AgentPath("function: unknown, then stop", "stop", lambda t, _: "stop", function="buy_product"),
    AgentPath("function: empty, then a message", "say", lambda t, _: "Say: hello", function=""),
    AgentPath("function: not exact, then a parameter", "crash", lambda t, _: t.title,
              function="search_product_by_query "),
)
READINGS = ("search", "recommend", "review", "say", "stop", "crash")  # every branch of the release's agent
TYPE_OF_FUNCTION = {function: kind for kind, function in FUNCTION_OF_TYPE.items()}


def release_reading(function: str, param: str) -> str:
    """The branch of the release's agent an output pair takes: the parameter read first (a
    `Say:` message, then anything starting with `stop`), then the function by its exact name;
    any other name leaves the action unset (`crash`)."""
    if param.startswith("Say:"):
        return "say"
    if param.startswith("stop"):
        return "stop"
    return TYPE_OF_FUNCTION.get(function, "crash")


def assign(tasks: list[dict[str, Any]], paths: tuple[AgentPath, ...] = PATHS) -> list[tuple[int, AgentPath]]:
    """(task index, path) for the first tasks of the split: each path on the next task of its type
    (a task no waiting path fits repeats the first any-type path), the crash path on the last;
    a task whose instruction came earlier takes that task's path."""
    waiting = [p for p in paths if p.reading != "crash"]
    last = [p for p in paths if p.reading == "crash"]
    filler = next(p for p in paths if p.kind is None and p.reading != "crash")
    chosen: list[tuple[int, AgentPath]] = []
    by_instruction: dict[str, AgentPath] = {}
    for index, task in enumerate(tasks):
        if not waiting and not last:
            break
        if task["task"] in by_instruction:
            chosen.append((index, by_instruction[task["task"]]))
            continue
        if waiting:
            path = next((p for p in waiting if p.kind in (None, task["type"])), filler)
            if path in waiting:
                waiting.remove(path)
        else:
            path = last.pop(0)
        by_instruction[task["task"]] = path
        chosen.append((index, path))
    if waiting or last:
        raise ValueError(f"the test split has too few tasks for the agent paths ({len(waiting) + len(last)} "
                         "left without a task)")
    return chosen


def scripted_outputs(chosen: list[tuple[int, AgentPath]], tasks: list[dict[str, Any]],
                     targets: dict[str, Target], lists: dict[str, dict[str, list[str]]]
                     ) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The function file (instruction -> [function output]) and the parameter file
    (instruction -> parameter output) both agents read."""
    functions: dict[str, list[str]] = {}
    params: dict[str, str] = {}
    for index, path in chosen:
        task = tasks[index]
        instruction = task["task"]
        functions[instruction] = [FUNCTION_OF_TYPE[task["type"]] if path.function is None else path.function]
        params[instruction] = path.param(targets[instruction], lists.get(instruction, {}))
        reading = release_reading(functions[instruction][0], params[instruction])
        if reading != path.reading:
            raise ValueError(f"agent path {path.name!r} on task {index}: the release reads it as {reading!r}, "
                             f"not {path.reading!r}")
    return functions, params


# --- running both sides --------------------------------------------------------------------------------------------
def turn_args(multiturn: bool, end_index: int) -> list[str]:
    args = ["--agent_strategy", "puma", "--agent_memory", "none", "--task_split", "test", "--start_index", "0",
            "--end_index", str(end_index), "--max_concurrency", "1"]
    if multiturn:
        return args + ["--max_steps", str(MULTITURN_STEPS), "--user_mode", "naive", "--user_model", USER_MODEL]
    return args + ["--max_steps", "-1", "--user_mode", "no"]


def result_records(path: Path | None) -> dict[int, list[list[float]]]:
    """task id -> [action_acc list, res_acc list] from a result file (a header record, if any, skipped)."""
    if path is None or not path.is_file():
        return {}
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {int(r["task_id"]): [[float(x) for x in r["action_acc"]], [float(x) for x in r["res_acc"]]]
            for r in rows if isinstance(r, dict) and "task_id" in r}


def project_observation(repo_root: Path, data_dir: Path, function_file: Path, param_file: Path, end_index: int,
                        work: Path, multiturn: bool = False, user_api_base: str | None = None,
                        protocol_file: str | None = None, timeout_s: float = 3600) -> dict[str, Any]:
    """The project's run.py (`--recipe release`) on the scripted files: every env step (its
    `--trace_file`) and the result file's scores per task."""
    from PersonalWAB import trace

    work.mkdir(parents=True, exist_ok=True)
    record, result, log_path = work / "trace.jsonl", work / "result.json", work / "run.log"
    record.unlink(missing_ok=True)  # a trace is appended to: this run's alone
    args = [*turn_args(multiturn, end_index), "--data_dir", str(data_dir), "--recipe", "release",
            "--puma_function_file", str(function_file), "--puma_param_file", str(param_file),
            "--out", str(result), "--overwrite", "--log_dir", str(work / "results"), "--trace_file", str(record)]
    if multiturn:
        args += ["--user_api_base", str(user_api_base)]
    if protocol_file:
        args += ["--protocol_file", protocol_file]
    environment = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL",)}
    environment.update(PYTHONPATH=str(repo_root), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    status = finish(launch([sys.executable, str(repo_root / "run.py"), *args], log_path, environment,
                           cwd=repo_root), "project run.py (agent paths)", log_path, timeout_s)
    if status != 0:
        raise ParityError(f"project run.py (agent paths) failed (exit {status}); last lines of {log_path}:\n"
                          f"{log_tail(log_path)}")
    return {"steps": trace.read(record, "step") if record.exists() else [], "scores": result_records(result)}


def release_observation(runner: Any, function_file: Path, param_file: Path, end_index: int, work: Path,
                        multiturn: bool = False, user_base_url: str | None = None) -> dict[str, Any]:
    """The release's run.py (`--agent_strategy puma --puma_generate 0`) on the same files, through
    the worker: every env step (recorded in its process), the scores of its result file (its
    per-task checkpoint when the run died) and whether its agent crashed."""
    work.mkdir(parents=True, exist_ok=True)
    record, log_path = work / "steps.json", work / "run.log"
    shutil.rmtree(work / "results", ignore_errors=True)  # the release's run.py resumes from a file of the same name
    status = runner.finish(runner.start(
        "run", log_path, record_env=record, base_url=user_base_url,
        release_argv=[*turn_args(multiturn, end_index), "--env", "pwab", "--model", "finetune/llama",
                      "--puma_generate", "0", "--puma_function_file", str(function_file),
                      "--puma_param_file", str(param_file), "--log_dir", str(work / "results")], cwd=work),
        "release run.py (agent paths)", log_path, must_succeed=False)
    files = sorted((work / "results").rglob("*.json"))
    text = log_path.read_text(encoding="utf-8", errors="replace")
    return {"steps": json.loads(record.read_text(encoding="utf-8")).get("steps", []) if record.exists() else [],
            "scores": result_records(files[-1] if files else None), "exit": status,
            "crashed": status != 0 and "UnboundLocalError" in text, "log_tail": log_tail(log_path, 4)}


# --- comparison ----------------------------------------------------------------------------------------------------
def steps_by_task(steps: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for step in steps:
        grouped.setdefault(int(step["task_index"]), []).append(step)
    return grouped


def step_difference(release: dict[str, Any], project: dict[str, Any], review: bool) -> str | None:
    """The first part of two steps that differs (`action`, `observation`, `scores`), None when
    none does; `floored` when only a negative review cosine the project keeps at 0 does."""
    if canonical(release["action"]) != canonical(project["action"]):
        return "action"
    if release["observation"] != project["observation"]:
        return "observation"
    verdict = score_verdict(release["res"], project["res"], review)
    return None if verdict == "identical" else "floored" if verdict == "floored" else "scores"


def order_only(release: dict[str, Any], project: dict[str, Any], proof: dict[str, Any] | None, review: bool) -> bool:
    """The two recommend actions hold the same ASINs in other orders, and the project, given the
    release's order, sent the release's action and got its observation and scores."""
    a, b = release["action"], project["action"]
    if a.get("name") != RECOMMEND or b.get("name") != RECOMMEND or proof is None:
        return False
    same_items = sorted(a["arguments"].get("product_sequence", [])) == \
        sorted(b["arguments"].get("product_sequence", []))
    return same_items and step_difference(release, proof, review) in (None, "floored")


def compare_agent(chosen: list[tuple[int, AgentPath]], tasks: list[dict[str, Any]], release: dict[str, Any],
                  project: dict[str, Any], proof: dict[str, Any] | None = None) -> Tally:
    """Per task of `chosen`: every step (action, observation, scores), the number of steps and
    the result file's scores; the crash path: the release's run died there and the project sent
    the function output as a message scored (0, 0). `proof`: the project's single-turn run with
    the recommend outputs rewritten in the release's order."""
    tally = Tally()
    theirs, ours = steps_by_task(release["steps"]), steps_by_task(project["steps"])
    proofs = steps_by_task(proof["steps"]) if proof else {}
    hits: dict[str, int] = {}
    for index, path in chosen:
        review = tasks[index]["type"] == "review"
        where = {"task": index, "path": path.name}
        a, b = theirs.get(index, []), ours.get(index, [])
        if path.reading == "crash":
            first = b[0] if b else {}
            same = release.get("crashed") and not a and index not in release["scores"] and \
                first.get("action") == {"name": "respond", "arguments": {"content": path.function}} and \
                first.get("res") == [0.0, 0.0]
            if same:
                tally.note(CRASH_NOTE)
            tally.add(path.reading, bool(same), None if same else {**where, "release_crashed": release.get("crashed"),
                                                                   "release_steps": len(a), "project_first": first})
            continue
        difference = None if len(a) == len(b) else {"steps": [len(a), len(b)]}
        reordered = False
        for number, (x, y) in enumerate(zip(a, b)):
            if x["res"][1] > 0 and y["res"][1] > 0:
                hits[path.reading] = hits.get(path.reading, 0) + 1
            part = step_difference(x, y, review)
            if part == "action" and order_only(x, y, (proofs.get(index) or [None])[0], review):
                reordered = True
                continue
            if part == "floored":
                tally.note("negative review cosine floored at 0")
            elif part is not None and difference is None:
                difference = {"step": number, "part": part, "diff": first_difference(
                    json.dumps(x[part if part != "scores" else "res"], default=str),
                    json.dumps(y[part if part != "scores" else "res"], default=str))}
        scores = release["scores"].get(index), project["scores"].get(index)
        if reordered:  # its steps' scores were compared with the project's in the release's order
            tally.note(ORDER_NOTE)
        elif difference is None and not same_scores(scores[0], scores[1], review):
            difference = {"part": "result file scores", "release": scores[0], "project": scores[1]}
        tally.add(path.reading, difference is None, None if difference is None else {**where, **difference})
    for index in sorted((set(theirs) | set(ours)) - {i for i, _ in chosen}):  # tasks repeating an earlier path
        a, b = theirs.get(index, []), ours.get(index, [])
        review = tasks[index]["type"] == "review"
        parts = [part for x, y in zip(a, b) for part in [step_difference(x, y, review)]
                 if part not in (None, "floored")]
        same = len(a) == len(b) and not parts
        tally.add("repeated path", same, None if same else {"task": index, "steps": [len(a), len(b)],
                                                            "parts": parts[:3]})
    tally.facts["steps (release, project)"] = [len(release["steps"]), len(project["steps"])]
    tally.facts["steps with Result Acc above 0 on both sides"] = hits
    return tally


def same_scores(release: list[list[float]] | None, project: list[list[float]] | None, review: bool) -> bool:
    """The attempts' (Function Acc, Result Acc) of one task in the two result files."""
    if release is None or project is None:
        return release == project
    pairs = list(zip(*release)), list(zip(*project))
    return len(pairs[0]) == len(pairs[1]) and all(
        score_verdict(list(x), list(y), review) != "differs" for x, y in zip(*pairs))


def rewritten_params(params: dict[str, str], tasks: list[dict[str, Any]], release: dict[str, Any],
                     project: dict[str, Any]) -> dict[str, str]:
    """The parameter file with each recommend output the two sides read in other orders
    rewritten in the release's (as its first step sent it)."""
    theirs, ours = steps_by_task(release["steps"]), steps_by_task(project["steps"])
    rewritten = dict(params)
    for index, steps in theirs.items():
        a, b = steps[0]["action"], (ours.get(index) or [{}])[0].get("action", {})
        if a.get("name") == RECOMMEND and b.get("name") == RECOMMEND and a != b:
            rewritten[tasks[index]["task"]] = ", ".join(a["arguments"].get("product_sequence", []))
    return rewritten


def user_server(timeout_s: float) -> ScriptedLLMServer:
    """The LLM user of the multi-turn runs: the harness's fixed reply to every message."""
    return ScriptedLLMServer(lambda body: ScriptedReply(content=USER_REPLY), max_lifetime_s=timeout_s + 60)


def agent_paths(setup: Any, runner: Any, log: Callable[[str], None]) -> None:
    """The item (module docstring): results `agent_paths single-turn` and `agent_paths multi-turn`
    in `setup.results` (a `parity_puma.PumaSetup`)."""
    from devtools.parity.puma_context import release_set_orders
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.recommender.engine import SASRecRecommender

    data = load_benchmark_data(setup.data_dir)
    tasks = data.split("test")
    try:
        chosen = assign(tasks)
    except ValueError as exc:
        raise ParityError(f"--data_dir {setup.data_dir}: {exc}") from None
    end_index = chosen[-1][0] + 1
    log(f"puma agent paths: {len(PATHS)} scripted outputs on the first {end_index} test tasks, both agents, "
        "single- and multi-turn ...")

    def history(task: dict[str, Any]) -> list[str]:
        return [b["product_info"]["parent_asin"] for b in data.behaviours_before(task["user_id"], task["timestamp"])]

    targets = {tasks[i]["task"]: target_of(tasks[i], history) for i, _ in chosen}
    recommender = SASRecRecommender(data.artifacts.checkpoint, data.artifacts.item_map)
    lists = recommend_lists([targets[tasks[i]["task"]] for i, p in chosen if p.reading == "recommend"], recommender,
                            lambda texts: release_set_orders(setup, runner, texts))
    functions, params = scripted_outputs(chosen, tasks, targets, lists)
    work = setup.work / "agent_paths"
    work.mkdir(parents=True, exist_ok=True)
    function_file, param_file = work / "functions.json", work / "params.json"
    function_file.write_text(json.dumps(functions, indent=1), encoding="utf-8")
    param_file.write_text(json.dumps(params, indent=1), encoding="utf-8")
    observed: dict[str, dict[str, Any]] = {}
    for mode in ("single-turn", "multi-turn"):
        multiturn = mode == "multi-turn"
        with user_server(setup.timeout_s) as theirs_user, user_server(setup.timeout_s) as ours_user, \
                ThreadPoolExecutor(1) as pool:
            ours = pool.submit(project_observation, setup.repo_root, setup.data_dir, function_file, param_file,
                               end_index, work / f"project_{mode}", multiturn, ours_user.url, setup.protocol_file,
                               setup.timeout_s)
            theirs = release_observation(runner, function_file, param_file, end_index, work / f"release_{mode}",
                                         multiturn, theirs_user.url if multiturn else None)
            observed[mode] = {"release": theirs, "project": ours.result()}
    single = observed["single-turn"]
    rewritten = rewritten_params(params, tasks, single["release"], single["project"])
    proof = None
    if rewritten != params:
        log("puma agent paths: the recommend outputs again, in the release's ASIN order ...")
        proof_file = work / "params_release_order.json"
        proof_file.write_text(json.dumps(rewritten, indent=1), encoding="utf-8")
        proof = project_observation(setup.repo_root, setup.data_dir, function_file, proof_file, end_index,
                                    work / "project_release_order", protocol_file=setup.protocol_file,
                                    timeout_s=setup.timeout_s)
    for mode, sides in observed.items():
        tally = compare_agent(chosen, tasks, sides["release"], sides["project"], proof)
        tally.facts["paths"] = f"{len(PATHS)} on {end_index} tasks; readings {', '.join(READINGS)}"
        tally.facts["release run"] = f"exit {sides['release']['exit']}" + (
            " (its agent crashed on the last task, as expected)" if sides["release"]["crashed"] else
            f"; last lines: {sides['release']['log_tail']}")
        setup.results[f"agent_paths {mode}"] = tally
