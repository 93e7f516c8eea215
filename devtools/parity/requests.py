"""The `first_request` and `multiturn_user` parity checks: the release's run.py and this
project's run.py, each against its own local scripted model server playing the same
deterministic model, compared request body by request body.

Requests are told apart by their model name (the agent's and the user simulator's differ)
and tied to tasks by the first user message (`USER <user_id>: ...`); runs use one thread,
so tasks arrive in order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.parity.compare import (Tally, body_difference, canonical, fields_difference,
                                               other_fields, score_verdict)
from devtools.doubles.responders import sensible_call
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply

ASK_USER = "Could you tell me a little more about what you are looking for?"
USER_REPLY = "Something a little cheaper would suit me better, in a darker colour."
MEMORY_UPDATE_REPLY = json.dumps({"like": [], "dislike": [], "expect": []})
MULTITURN_STEPS = 3
ASIN_TOKEN = re.compile(r"\b[A-Z0-9]{10}\b")


@dataclass(frozen=True)
class Variant:
    strategy: str
    memory: str


VARIANTS = {
    "fc_last": Variant("function_calling", "last"),
    "fc_relevant": Variant("function_calling", "relevant"),
    "fc_recmind": Variant("function_calling", "recmind"),
    "recmind": Variant("recmind", "recmind"),
    "fc_interecagent": Variant("function_calling", "interecagent"),
    "fc_taskspe": Variant("function_calling", "taskspe"),
    "react_last": Variant("react", "last"),
}
MULTITURN_VARIANT = Variant("function_calling", "none")


def first_user_content(body: dict[str, Any]) -> str:
    message = next((m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"), None)
    content = message.get("content") if message else None
    return content if isinstance(content, str) else ""


def is_task_request(body: dict[str, Any], agent_model: str) -> bool:
    """An agent's request about a task: its first user message is the `USER <id>: ...` observation."""
    return body.get("model") == agent_model and first_user_content(body).startswith("USER ")


def agent_turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


def is_first_request(body: dict[str, Any], agent_model: str) -> bool:
    return is_task_request(body, agent_model) and agent_turns(body) == 0


class ParityModel:
    """The deterministic model both runs talk to. As the agent: the call the instruction asks for
    (single-turn); in multi-turn, a question to the user first, then that call, then `stop`. As the
    user simulator: one fixed reply. Anything else (InteRecAgent's memory update, a reflection): an
    empty like/dislike/expect JSON object."""

    def __init__(self, agent_model: str, user_model: str, multiturn: bool):
        self.agent_model, self.user_model, self.multiturn = agent_model, user_model, multiturn

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        if body.get("model") == self.user_model:
            return ScriptedReply(content=USER_REPLY)
        if not is_task_request(body, self.agent_model):
            return ScriptedReply(content=MEMORY_UPDATE_REPLY)
        instruction = first_user_content(body).split(": ", 1)[-1].split("\n", 1)[0]
        name, arguments = sensible_call(instruction)
        turn = agent_turns(body) if self.multiturn else 1
        if turn == 0:
            name, arguments = "respond", {"content": ASK_USER}
        elif turn >= 2:
            name, arguments = "stop", {}
        if not body.get("tools"):  # ReAct: the action in the text format the release's prompt asks for
            shown = arguments.get("content", "") if name == "respond" else json.dumps(arguments)
            return ScriptedReply(content=f"Thought:\nI know what to do.\nAction:\n{name}\nArguments:\n{shown}")
        if name == "respond":
            return ScriptedReply(content=ASK_USER)
        return ScriptedReply(tool_calls=[(name, json.dumps(arguments))])


@dataclass
class RunSetup:
    """What both runs of one configuration share."""

    data_dir: Path
    split: str
    task_count: int
    agent_model: str
    user_model: str
    repo_root: Path
    work_dir: Path
    protocol_file: str | None
    interec_memory_file: Path | None
    function_file: Path | None
    timeout_s: float
    catalogue: frozenset[str] = frozenset()  # every product ASIN, to find those a prompt names


def shared_args(setup: RunSetup, variant: Variant, multiturn: bool) -> list[str]:
    args = ["--model", setup.agent_model, "--agent_strategy", variant.strategy, "--agent_memory", variant.memory,
            "--task_split", setup.split, "--start_index", "0", "--end_index", str(setup.task_count),
            "--max_concurrency", "1"]
    if multiturn:
        return args + ["--max_steps", str(MULTITURN_STEPS), "--user_mode", "naive", "--user_model", setup.user_model]
    return args + ["--max_steps", "-1", "--user_mode", "no"]


def file_args(setup: RunSetup, variant: Variant, folder: Path) -> list[str]:
    """Memory and function files; each run gets its own copy of the InteRecAgent file (both rewrite it)."""
    args: list[str] = []
    if variant.memory == "interecagent":
        copy = folder / "interec_memory.json"
        shutil.copyfile(setup.interec_memory_file, copy)
        args += ["--interec_memory_file", str(copy)]
    if variant.memory == "taskspe":
        args += ["--puma_function_file", str(setup.function_file)]
    return args


def run_both(setup: RunSetup, runner: Any, label: str, variant: Variant,
             multiturn: bool) -> dict[str, Any]:
    """Both run.py's at once, each against its own scripted server; their request bodies and exit status."""
    from devtools.parity.mirror import finish, launch, reaped

    model = ParityModel(setup.agent_model, setup.user_model, multiturn)
    folders = {side: setup.work_dir / label / side for side in ("release", "project")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    logs = {side: folder / "run.log" for side, folder in folders.items()}
    common = shared_args(setup, variant, multiturn)
    with ScriptedLLMServer(model, max_lifetime_s=setup.timeout_s + 60) as release_server, \
            ScriptedLLMServer(model, max_lifetime_s=setup.timeout_s + 60) as project_server, reaped() as running:
        release_argv = common + file_args(setup, variant, folders["release"]) + ["--log_dir", "results"]
        running["release"] = runner.start("run", logs["release"], base_url=release_server.url,
                                          release_argv=release_argv, cwd=folders["release"])
        project_argv = common + file_args(setup, variant, folders["project"]) + [
            "--data_dir", str(setup.data_dir), "--api_base", project_server.url, "--memory_length", "10",
            "--out", str(folders["project"] / "result.json"), "--log_dir", str(folders["project"] / "results")]
        if multiturn:
            project_argv += ["--user_api_base", project_server.url]
        if setup.protocol_file:
            project_argv += ["--protocol_file", setup.protocol_file]
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "PYTHONPATH")}
        running["project"] = launch([sys.executable, str(setup.repo_root / "run.py"), *project_argv],
                                    logs["project"], env, cwd=folders["project"])
        status = {"project": finish(running["project"], f"project run.py ({label})", logs["project"], setup.timeout_s),
                  "release": runner.finish(running["release"], f"release run.py ({label})", logs["release"],
                                           must_succeed=False)}
        requests = {"release": list(release_server.requests), "project": list(project_server.requests)}
    for side, folder in folders.items():  # kept with --work_dir, for a closer look
        (folder / "requests.json").write_text(json.dumps(requests[side], indent=1, ensure_ascii=False),
                                              encoding="utf-8")
    results = {"release": sorted((folders["release"] / "results").rglob("*.json")),
               "project": [folders["project"] / "result.json"]}
    return {"requests": requests, "status": status, "logs": {k: str(v) for k, v in logs.items()},
            "result_files": {side: str(files[-1]) if files and files[-1].is_file() else None
                             for side, files in results.items()}}


def by_task(requests: list[dict[str, Any]], tasks: list[dict[str, Any]], agent_model: str,
            user_model: str) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """Requests grouped per task index: `agent` (the first one first) and `user` (simulator) requests.

    A first agent request opens the next task whose `USER <user_id>: <instruction>` header it
    carries (any later task of that user when the instruction is not shown verbatim); an
    identical repeat of it is a retry. A user-simulator request belongs to the open task, or to
    the next one when only the next task's instruction is in it (an opening line asked for
    before the agent's first request)."""
    grouped: dict[int, dict[str, list[dict[str, Any]]]] = {}
    current = -1

    def bucket(index: int) -> dict[str, list[dict[str, Any]]]:
        return grouped.setdefault(index, {"agent": [], "user": [], "other": []})

    def text_of(body: dict[str, Any]) -> str:
        return "\n".join(str(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict))

    for body in requests:
        if is_first_request(body, agent_model):
            opened = bucket(current)["agent"][:1] if current >= 0 else []
            if opened and canonical(opened[0]) == canonical(body):
                continue  # the same first request again: a retry
            header = first_user_content(body)
            later = range(current + 1, len(tasks))
            exact = [i for i in later if header.startswith(f"USER {tasks[i]['user_id']}: {tasks[i]['task']}")]
            same_user = [i for i in later if header.startswith(f"USER {tasks[i]['user_id']}:")]
            current = (exact or same_user or [current + 1])[0]
            bucket(current)["agent"].append(body)
        elif is_task_request(body, agent_model):
            bucket(current)["agent"].append(body)
        elif body.get("model") == user_model:
            index = current
            text = text_of(body)
            if current + 1 < len(tasks) and tasks[current + 1]["task"] in text and (
                    current < 0 or tasks[current]["task"] not in text):
                index = current + 1
            bucket(index)["user"].append(body)
        else:
            bucket(current)["other"].append(body)
    return grouped


def first_agent_request(grouped: dict[int, Any], index: int) -> dict[str, Any] | None:
    agent = grouped.get(index, {}).get("agent", [])
    return agent[0] if agent else None


def named_products(body: dict[str, Any], catalogue: frozenset[str]) -> list[str]:
    """The catalogue ASINs the system message names, in order: which memories were chosen, and their
    order, whatever the format they are written in."""
    system = next((m.get("content") for m in body.get("messages") or [] if m.get("role") == "system"), "")
    return [token for token in ASIN_TOKEN.findall(system or "") if token in catalogue]


def compare_first_requests(tasks: list[dict[str, Any]], release: dict[int, Any], project: dict[int, Any],
                           later_tasks_of_user: set[int] | None = None,
                           catalogue: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Per task: the first agent request's messages and tools, and the products its system message
    names (memory selection); other body fields apart."""
    whole, messages, tools, before_update, memory = Tally(), Tally(), Tally(), Tally(), Tally()
    fields = FieldTally()
    details = []
    for index, task in enumerate(tasks):
        a, b = first_agent_request(release, index), first_agent_request(project, index)
        diff = body_difference(a, b)
        where = {"task": index, "type": task["type"], **diff}
        whole.add(task["type"], not diff, where)
        if later_tasks_of_user is not None and index not in later_tasks_of_user:
            before_update.add(task["type"], not diff, where)
        if a is not None and b is not None:
            messages.add(task["type"], "messages" not in diff,
                         {"task": index, "type": task["type"], "messages": diff.get("messages")})
            tools.add(task["type"], "tools" not in diff,
                      {"task": index, "type": task["type"], "tools": diff.get("tools")})
            named = named_products(a, catalogue), named_products(b, catalogue)
            memory.add(task["type"], named[0] == named[1],
                       {"task": index, "type": task["type"], "release": named[0], "project": named[1]})
            fields.add(task, index, a, b)
        if diff:
            details.append(where)
    result = {"requests": whole, "messages": messages, "tools": tools, "memory_products": memory,
              "other_fields": fields.tally,
              "other_field_values": fields.values, "details": details}
    if later_tasks_of_user is not None:
        result["first_task_of_user"] = before_update
    return result


class FieldTally:
    """Body fields besides messages and tools (temperature, max_tokens, tool_choice, ...), per request pair."""

    def __init__(self) -> None:
        self.tally = Tally()
        self.values: dict[str, Any] = {}  # per differing field, the first pair of values met

    def add(self, task: dict[str, Any], index: int, release: dict[str, Any], project: dict[str, Any]) -> None:
        extra = fields_difference(other_fields(release), other_fields(project))
        self.tally.add(task["type"], not extra, {"task": index, **{k: str(v) for k, v in extra.items()}})
        for key, values in extra.items():
            self.values.setdefault(key, values)


def compare_request_lists(tasks: list[dict[str, Any]], release: dict[int, Any], project: dict[int, Any],
                          kind: str) -> dict[str, Any]:
    """Per task: all requests of one kind (`user`: the user simulator's; `agent`: the agent's; `other`:
    e.g. InteRecAgent's memory update), in order; messages and tools, other fields apart."""
    whole = Tally()
    fields = FieldTally()
    details = []
    counts = {"release": 0, "project": 0}
    for index, task in enumerate(tasks):
        a = release.get(index, {}).get(kind, [])
        b = project.get(index, {}).get(kind, [])
        counts["release"] += len(a)
        counts["project"] += len(b)
        diff = None
        for j, (x, y) in enumerate(zip(a, b)):
            found = body_difference(x, y)
            fields.add(task, index, x, y)
            if found and diff is None:
                diff = f"request {j}: " + "; ".join(f"{part}: {text}" for part, text in found.items())
        if diff is None and len(a) != len(b):
            diff = f"{len(a)} requests vs {len(b)}"
        whole.add(task["type"], diff is None, {"task": index, "type": task["type"], "diff": diff})
        if diff:
            details.append({"task": index, "type": task["type"], "diff": diff,
                            "release_requests": len(a), "project_requests": len(b)})
    return {"requests": whole, "other_fields": fields.tally, "other_field_values": fields.values,
            "request_counts": counts, "details": details}


def records_by_task(path: str | None) -> dict[int, dict[str, Any]] | None:
    if not path:
        return None
    try:
        records = json.loads(Path(path).read_text(encoding="utf-8"))[1:]
    except (OSError, ValueError, IndexError):
        return None
    return {r["task_id"]: r for r in records if isinstance(r, dict) and "task_id" in r}


def compare_outcomes(tasks: list[dict[str, Any]], result_files: dict[str, str | None]) -> dict[str, Tally]:
    """Per task, from both result files: the attempts' scores, and the number of agent model calls."""
    release, project = records_by_task(result_files["release"]), records_by_task(result_files["project"])
    scores, calls = Tally(), Tally()
    if release is None or project is None:
        return {}
    for index, task in enumerate(tasks):
        a, b = release.get(index), project.get(index)
        if a is None or b is None:
            missing = {"task": index, "type": task["type"], "missing": "release" if a is None else "project"}
            scores.add(task["type"], False, missing)
            calls.add(task["type"], False, missing)
            continue
        pairs = list(zip(a["action_acc"], a["res_acc"])), list(zip(b["action_acc"], b["res_acc"]))
        same = len(pairs[0]) == len(pairs[1]) and all(
            score_verdict(list(x), list(y), task["type"] == "review") != "differs" for x, y in zip(*pairs))
        scores.add(task["type"], same, {"task": index, "type": task["type"], "release": pairs[0], "project": pairs[1]})
        counts = [len(r["info"].get("usage", {}).get("completion_tokens", [])) for r in (a, b)]
        calls.add(task["type"], counts[0] == counts[1], {"task": index, "type": task["type"], "calls": counts})
    return {"scores": scores, "model_calls": calls}


def later_tasks(tasks: list[dict[str, Any]]) -> set[int]:
    """Tasks whose user had an earlier task in the run (InteRecAgent memory was updated before them)."""
    seen: set[str] = set()
    later = set()
    for index, task in enumerate(tasks):
        if task["user_id"] in seen:
            later.add(index)
        seen.add(task["user_id"])
    return later


def run_failures(run: dict[str, Any]) -> dict[str, Any]:
    from devtools.parity.mirror import log_tail

    return {side: {"exit": status, "log": run["logs"][side], "tail": log_tail(Path(run["logs"][side]), 8)}
            for side, status in run["status"].items() if status != 0}


def load_catalogue(data_dir: Path) -> frozenset[str]:
    """Every product ASIN of the data (the release's product files, read as the release reads them)."""
    asins: set[str] = set()
    for part in sorted(Path(data_dir).glob("all_products_part_*.json")):
        asins.update(json.loads(part.read_text(encoding="utf-8")))
    return frozenset(asins)


def interec_memory_file(settings: Any, work: Path) -> Path:
    """The user's file, else one written by this project's initialiser (both runs get a copy)."""
    if settings.interec_memory_file:
        return Path(settings.interec_memory_file)
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory.interec import initial_memory, write_memory_file

    path = work / "interec_memory.json"
    write_memory_file(path, initial_memory(load_benchmark_data(settings.data_dir)))
    return path


def function_file(settings: Any, tasks: list[dict[str, Any]], work: Path) -> Path:
    """The user's file, else every instruction of the split mapped to the heuristic's choice
    (the release looks every instruction up and takes the first element of its list)."""
    if settings.puma_function_file:
        return Path(settings.puma_function_file)
    from PersonalWAB.agents.heuristic import choose_function

    path = work / "function_file.json"
    path.write_text(json.dumps({t["task"]: [choose_function(t["task"])] for t in tasks}), encoding="utf-8")
    return path


def run_setup(session: Any) -> RunSetup:
    """What both runs of every configuration of a session share (a `check.Session`)."""
    settings = session.settings
    variants = settings.variant_names
    return RunSetup(data_dir=Path(settings.data_dir), split=settings.split, task_count=len(session.tasks),
                    agent_model=settings.agent_model, user_model=settings.user_model, repo_root=session.repo_root,
                    work_dir=session.work, protocol_file=settings.protocol_file,
                    interec_memory_file=interec_memory_file(settings, session.work)
                    if "fc_interecagent" in variants else None,
                    function_file=function_file(settings, session.split_tasks, session.work)
                    if "fc_taskspe" in variants else None,
                    timeout_s=settings.timeout_s, catalogue=load_catalogue(Path(settings.data_dir)))


def first_request_result(setup: RunSetup, tasks: list[dict[str, Any]], name: str, run: dict[str, Any]
                         ) -> dict[str, Any]:
    """One configuration's comparison from the two runs' requests and result files."""
    variant = VARIANTS[name]
    grouped = {side: by_task(reqs, tasks, setup.agent_model, setup.user_model)
               for side, reqs in run["requests"].items()}
    result = compare_first_requests(tasks, grouped["release"], grouped["project"],
                                    later_tasks(tasks) if variant.memory == "interecagent" else None,
                                    setup.catalogue)
    if variant.memory == "interecagent":
        result["memory_update"] = compare_request_lists(tasks, grouped["release"], grouped["project"], "other")
    result.update(compare_outcomes(tasks, run["result_files"]))
    result["failures"] = run_failures(run)
    return result


def multiturn_result(setup: RunSetup, tasks: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """The multi-turn comparison: the user's requests, the agent's, the outcomes."""
    grouped = {side: by_task(reqs, tasks, setup.agent_model, setup.user_model)
               for side, reqs in run["requests"].items()}
    result = compare_request_lists(tasks, grouped["release"], grouped["project"], "user")
    result["agent_requests"] = compare_request_lists(tasks, grouped["release"], grouped["project"], "agent")
    result.update(compare_outcomes(tasks, run["result_files"]))
    result["failures"] = run_failures(run)
    return result


def summary_lines(label: str, result: dict[str, Any]) -> list[str]:
    lines = [result["requests"].line(f"{label}: tasks")]
    for part in ("first_task_of_user", "messages", "tools", "memory_products", "other_fields", "scores", "model_calls"):
        if part in result and result[part].compared:
            lines.append(result[part].line(f"  {part}"))
    if result.get("other_field_values"):
        lines.append(f"  other fields (release vs project): {json.dumps(result['other_field_values'])[:300]}")
    if "request_counts" in result:
        lines.append(f"  requests in all: release {result['request_counts']['release']}, "
                     f"project {result['request_counts']['project']}")
    for part in ("memory_update", "agent_requests"):
        if part in result:
            lines.extend("  " + line for line in summary_lines(part, result[part]))
    for side, failure in result.get("failures", {}).items():
        lines.append(f"  the {side} run failed (exit {failure['exit']}; log {failure['log']}):")
        lines.extend(f"    | {line}" for line in failure["tail"].splitlines())
    return lines


def report(result: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.to_dict() if isinstance(v, Tally) else report(v) if isinstance(v, dict) and "requests" in v else v)
            for k, v in result.items()}


def all_identical(result: dict[str, Any]) -> bool:
    """Everything compared is identical (requests, other fields, scores, calls) and both runs finished."""
    return not result.get("failures") and all(
        v.all_identical if isinstance(v, Tally) else all_identical(v)
        for v in result.values() if isinstance(v, Tally) or (isinstance(v, dict) and "requests" in v))
