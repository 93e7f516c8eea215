"""The `observations` parity check: the same actions through the release's environment and
this project's, on the same data, compared observation by observation and score by score.

For every task of the split: the first observation (reset), then, each on a fresh episode,
the offline heuristic agent's action and a fixed set of edge cases (empty and stop-word
queries, odd recommendation inputs, empty and perfect reviews, bad argument names, unknown
functions, stop, respond, details lookups, the wrong function for the task type).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from collections.abc import Callable
from typing import Any

from devtools.parity.check import Outcome, Session
from devtools.parity.compare import Tally, first_difference, score_verdict, shorten

UNKNOWN_ASIN = "B000PARITY0"
STOPWORD_QUERY = "the and of to a"
LISTED_ASIN = re.compile(r"Parent Asin: ([A-Za-z0-9]{10})")
WRONG_FUNCTION = {"search": "add_product_review", "recommend": "search_product_by_query",
                  "review": "search_product_by_query"}


def known_asins(task: dict[str, Any], history: list[dict[str, Any]], item_map: dict[str, int]) -> list[str]:
    """Two ASINs the recommender knows: the user's two latest purchases before the task, else the map's first."""
    mine = [b["product_info"]["parent_asin"] for b in sorted(history, key=lambda b: b["review"]["timestamp"])
            if b["review"]["timestamp"] < task["timestamp"] and b["product_info"]["parent_asin"] in item_map]
    if len(mine) >= 2:
        return mine[-2:]
    return (mine + [asin for asin in item_map if asin not in mine])[:2]


def edge_actions(task: dict[str, Any], history: list[dict[str, Any]],
                 item_map: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    """(kind, action) pairs replayed on every task besides the heuristic agent's action."""
    target = task["target"]["product_info"]
    first, second = known_asins(task, history, item_map)
    wrong = WRONG_FUNCTION[task["type"]]
    wrong_arguments = {"review": task["task"]} if wrong == "add_product_review" else {"query": task["task"]}

    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"name": name, "arguments": arguments}

    return [
        ("target_title_query", call("search_product_by_query", query=target["title"])),
        ("empty_query", call("search_product_by_query", query="")),
        ("stopword_query", call("search_product_by_query", query=STOPWORD_QUERY)),
        ("known_unknown_sequence", call("get_recommendations_by_history",
                                        product_sequence=[first, UNKNOWN_ASIN, second])),
        ("string_sequence", call("get_recommendations_by_history", product_sequence=first)),
        ("empty_sequence", call("get_recommendations_by_history", product_sequence=[])),
        ("target_review", call("add_product_review", review=task["target"]["review"]["text"])),
        ("empty_review", call("add_product_review", review="")),
        ("unknown_argument", call("search_product_by_query", query=task["task"], max_results=5)),
        ("missing_argument", call("get_recommendations_by_history")),
        ("unknown_function", call("buy_product", product_asin=target["parent_asin"])),
        ("stop", call("stop")),
        ("respond", call("respond", content="Which colour would you like?")),
        ("details_known", call("get_product_details_by_asin", product_asin=target["parent_asin"])),
        ("details_unknown", call("get_product_details_by_asin", product_asin=UNKNOWN_ASIN)),
        ("wrong_function", call(wrong, **wrong_arguments)),
    ]


def replay(env: Any, index: int, action: dict[str, Any]) -> dict[str, Any]:
    """One action on a fresh episode of this project's environment."""
    env.reset(index)
    try:
        observation, res, done, _ = env.step(action)
    except Exception as exc:  # a crash is a difference to report, not a harness failure
        return {"exception": f"{type(exc).__name__}: {exc}"}
    return {"observation": observation, "score": [float(r) for r in res], "done": bool(done)}


def project_side(data_dir: Path, split: str, indices: list[int], on_jobs: Callable[[list[dict[str, Any]]], None],
                 protocol_file: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The jobs (actions per task) and this project's results; `on_jobs` gets the jobs as soon
    as they are known, so the release can start on them while the project replays."""
    from PersonalWAB.agents.registry import build_agent
    from PersonalWAB.envs.pwab.env import get_env
    from PersonalWAB.protocol import load_protocol
    from PersonalWAB.runner.config import RunConfig
    from tqdm import tqdm

    env = get_env("pwab", user_mode="no", task_split=split, max_steps=-1, data_dir=data_dir,
                  protocol=load_protocol(protocol_file))
    heuristic = build_agent(env.data, RunConfig(agent_strategy="heuristic"))
    item_map = json.loads((Path(data_dir) / "recommender" / "1000_ids.json").read_text(encoding="utf-8"))
    jobs, firsts = [], []
    for index in indices:
        first, info = env.reset(index)
        task = info["task"]
        actions = [("heuristic", heuristic.decide(env, task).to_dict())]
        actions += edge_actions(task, env.data.histories.get(task["user_id"], []), item_map)
        jobs.append({"index": index, "type": task["type"], "kinds": [k for k, _ in actions],
                     "actions": [a for _, a in actions]})
        firsts.append(first)
    on_jobs(jobs)
    results = []
    for job, first in zip(tqdm(jobs, desc="project env"), firsts):
        results.append({"index": job["index"], "first_observation": first,
                        "steps": [replay(env, job["index"], action) for action in job["actions"]]})
    return jobs, results


def step_text(step: dict[str, Any]) -> str:
    return step["observation"] if "observation" in step else f"<raised {step['exception']}>"


def compare_step(task_type: str, action: dict[str, Any], release: dict[str, Any],
                 project: dict[str, Any]) -> dict[str, Any]:
    """One action on both sides: the observation's first difference, the products each lists,
    the scores with their verdict, and done."""
    listed = [LISTED_ASIN.findall(step_text(x)) for x in (release, project)]
    scores = {"release": release.get("score"), "project": project.get("score")}
    if scores["release"] is None or scores["project"] is None:  # one side raised
        verdict = "identical" if scores["release"] == scores["project"] else "differs"
    else:
        cosine = task_type == "review" and action["name"] == "add_product_review"
        verdict = score_verdict(scores["release"], scores["project"], cosine)
    return {"observation_diff": first_difference(step_text(release), step_text(project)),
            "products": {"release": listed[0], "project": listed[1]}, "score": scores, "score_verdict": verdict,
            "done": [release.get("done"), project.get("done")]}


def compare(jobs: list[dict[str, Any]], release: list[dict[str, Any]],
            project: list[dict[str, Any]]) -> dict[str, Any]:
    """Tallies per task, for the first observation, and per action kind: the observation string,
    the products it lists (ASINs in order: a ranking difference, not one of format), the score, done."""
    tasks, firsts = Tally(), Tally()
    kinds: dict[str, dict[str, Tally]] = {}
    details = []
    for job, rel, proj in zip(jobs, release, project):
        task_type, index = job["type"], job["index"]
        diff = first_difference(rel["first_observation"], proj["first_observation"])
        firsts.add(task_type, diff is None, {"task": index, "type": task_type, "diff": diff})
        differences = [{"item": "first_observation", "diff": diff}] if diff else []
        for kind, action, a, b in zip(job["kinds"], job["actions"], rel["steps"], proj["steps"]):
            step = compare_step(task_type, action, a, b)
            # the release's agent loop ends the episode on stop; here the environment does (by design)
            stop_ends_here = action["name"] == "stop" and step["done"] == [False, True]
            same = {"observation": step["observation_diff"] is None,
                    "products": step["products"]["release"] == step["products"]["project"],
                    "score": step["score_verdict"] != "differs",
                    "done": step["done"][0] == step["done"][1] or stop_ends_here}
            shown = {"observation": {"diff": step["observation_diff"]}, "products": step["products"],
                     "score": step["score"], "done": dict(zip(("release", "project"), step["done"]))}
            tallies = kinds.setdefault(kind, {part: Tally() for part in same})
            where = {"task": index, "type": task_type, "action": json.dumps(action)[:200]}
            for part, tally in tallies.items():
                tally.add(task_type, same[part], {**where, **shown[part]})
            if stop_ends_here:
                tallies["done"].note("stop ends the episode in the environment (release: in the agent loop)")
            if step["score_verdict"] == "floored":
                tallies["score"].note("floored negative cosine (by design)")
            if not all(same.values()):
                differences.append({"item": kind, "action": action, **step})
        first_found = differences[0] if differences else {}
        tasks.add(task_type, not differences, {"task": index, "type": task_type, "item": first_found.get("item"),
                                               "diff": first_found.get("diff") or first_found.get("observation_diff")})
        if differences:
            details.append({"task": index, "type": task_type, "differences": differences})
    return {"tasks": tasks, "first_observation": firsts, "kinds": kinds, "details": details}


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = [result["tasks"].line("observations: tasks (every item identical)"),
             result["first_observation"].line("  first observation")]
    for kind, tallies in result["kinds"].items():
        counts = ", ".join(f"{part} {t.identical}/{t.compared}" for part, t in tallies.items())
        noted = "".join(f"; {what}: {n}" for t in tallies.values() for what, n in t.noted.items())
        lines.append(f"  {kind}: {counts}{noted}")
        for part, tally in tallies.items():
            if tally.first_difference:
                lines.append(f"      {part} e.g. {shorten(tally.first_difference, 300)}")
    return lines


def report(result: dict[str, Any]) -> dict[str, Any]:
    return {"tasks": result["tasks"].to_dict(), "first_observation": result["first_observation"].to_dict(),
            "kinds": {k: {part: t.to_dict() for part, t in v.items()} for k, v in result["kinds"].items()},
            "details": result["details"]}


def all_identical(result: dict[str, Any]) -> bool:
    return result["tasks"].all_identical


class ObservationsCheck:
    """The same actions replayed through both environments (the release in a worker process,
    in parallel with this project's): observations, scores and done, per task and action kind."""

    def prepare(self, session: Session) -> list[int]:
        return list(range(len(session.tasks)))

    def run(self, session: Session, indices: list[int]) -> tuple[list[dict[str, Any]], Any, Any]:
        from devtools.parity.mirror import reaped

        settings, work_dir = session.settings, session.work
        session.log(f"observations: replaying {len(indices)} task(s) through both environments ...")
        jobs_path, out_path = work_dir / "observation_jobs.json", work_dir / "release_observations.json"
        log_path = work_dir / "release_observations.log"
        with reaped() as running:
            def start_release(jobs: list[dict[str, Any]]) -> None:
                jobs_path.write_text(json.dumps(jobs), encoding="utf-8")
                running["worker"] = session.runner.start("observations", log_path, split=settings.split,
                                                         jobs=jobs_path, out=out_path)

            jobs, project = project_side(Path(settings.data_dir), settings.split, indices, start_release,
                                         settings.protocol_file)
            session.runner.finish(running["worker"], "release environment", log_path)
        (work_dir / "project_observations.json").write_text(json.dumps(project), encoding="utf-8")  # a closer look
        return jobs, json.loads(out_path.read_text(encoding="utf-8")), project

    def compare(self, session: Session, indices: list[int], ran: tuple[list[dict[str, Any]], Any, Any]) -> Outcome:
        result = compare(*ran)
        return Outcome({"observations": report(result)}, summary_lines(result), all_identical(result))
