"""A result file in the logs other tools read: an Inspect log (`inspect view` opens it) and Hugging Face
`.eval_results` entries. The project's result file stays the source of truth: both are written from it,
name it and its SHA-256, and nothing reads them back into a run.

**Inspect** (inspect_ai's own `EvalLog`, written with its `write_eval_log`, format `.eval` or `.json` by
the file's suffix): the run is the eval (task `personalwab/<track>`, the agent's model or
`none/<strategy>` for an agent without one, the run's arguments in its metadata), and each record a
sample: id `<task_id>`, epoch `trial + 1`, input the instruction, target the target ASIN, the whole
trajectory as chat messages (tool calls and tool results included), scores `function_acc`,
`result_acc` and `solved` (`C` / `I`), and in its metadata the task type, user, every attempt's
scores, the failure label and, for a recommendation, NDCG@10 and the reciprocal rank. The results hold
each score's mean, its naive standard error and, per task type, its mean.

**Hugging Face `.eval_results`** (the Hub's documented format, docs/leaderboard.md names the page): a
YAML list, one entry per score (`dataset.id` the Hub benchmark dataset, `dataset.task_id`
`<track>/<type>/<metric>`, `value`, and `notes` saying which run it is and what it ran on).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from PersonalWAB.data.schema import TASK_TYPES
from PersonalWAB.failures import failure_label, react_prefix_of, recommendation_ranking
from PersonalWAB.leaderboard.analysis import is_solved
from PersonalWAB.leaderboard.compare import track
from PersonalWAB.leaderboard.summarize import method_name
from PersonalWAB.metrics import compute_statistics, is_errored, task_score
from PersonalWAB.results import RunFile
from PersonalWAB.schema_types import Record

SCORER = "personalwab"
SCORES = ("function_acc", "result_acc")


def _message(message: dict[str, Any]) -> Any:
    """A trajectory message as inspect_ai's chat message (tool calls with their arguments as objects)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else "" if content is None else json.dumps(content, ensure_ascii=False)
    if role == "system":
        return ChatMessageSystem(content=text)
    if role == "tool":
        return ChatMessageTool(content=text, tool_call_id=message.get("tool_call_id"), function=message.get("name"))
    if role == "assistant":
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            raw = function.get("arguments")
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else raw or {}
                problem = None if isinstance(arguments, dict) else "the arguments are not a JSON object"
            except json.JSONDecodeError as exc:
                arguments, problem = {}, f"the arguments are not JSON ({exc})"
            calls.append(ToolCall(id=str(call.get("id")), function=str(function.get("name")),
                                  arguments=arguments if isinstance(arguments, dict) else {}, parse_error=problem))
        return ChatMessageAssistant(content=text, tool_calls=calls or None)
    return ChatMessageUser(content=text)


def _sample(record: Record, prefix: str) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score

    task = record["info"]["task"]
    function_acc, result_acc = task_score(record["action_acc"], record["res_acc"])
    metadata: dict[str, Any] = {"type": task["type"], "user_id": task["user_id"], "trial": record["trial"],
                                "action_acc": record["action_acc"], "res_acc": record["res_acc"],
                                "failure": record["info"].get("failure") or failure_label(record, prefix)}
    ranking = recommendation_ranking(record, prefix)
    if ranking is not None:
        metadata.update({"ndcg@10": ranking["ndcg@10"], "reciprocal_rank": ranking["rr"]})
    return EvalSample(id=record["task_id"], epoch=record["trial"] + 1, input=task["task"], target=str(task["target"]),
                      messages=[_message(m) for m in record["traj"] if isinstance(m, dict)],
                      scores={"function_acc": Score(value=function_acc), "result_acc": Score(value=result_acc),
                              "solved": Score(value="C" if is_solved(record) else "I")},
                      metadata=metadata, error=None)


def _results(records: list[Record]) -> Any:
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    scored = [r for r in records if not is_errored(r)]
    statistics = compute_statistics(scored)
    scores = []
    for index, name in enumerate(SCORES):
        values = [task_score(r["action_acc"], r["res_acc"])[index] for r in scored]
        metrics = {"mean": EvalMetric(name="mean", value=fmean(values) if values else 0.0),
                   "stderr": EvalMetric(name="stderr", value=stdev(values) / len(values) ** 0.5
                                        if len(values) > 1 else 0.0)}
        key = "avg_action_acc" if name == "function_acc" else "avg_res_acc"
        for kind in TASK_TYPES:
            if statistics.get(kind, {}).get("total_count"):
                metrics[kind] = EvalMetric(name=kind, value=statistics[kind][key])
        scores.append(EvalScore(name=name, scorer=SCORER, scored_samples=len(values),
                                unscored_samples=len(records) - len(values), metrics=metrics))
    return EvalResults(total_samples=len(records), completed_samples=len(scored), scores=scores)


def inspect_log(parsed: RunFile) -> Any:
    """The run as inspect_ai's `EvalLog`."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec

    run_args = parsed.run_args
    raw = parsed.path.read_bytes()
    created = datetime.fromtimestamp(parsed.path.stat().st_mtime, tz=UTC).isoformat()
    prefix = react_prefix_of(run_args)
    records = parsed.records
    model = str(run_args.get("model") or f"none/{run_args.get('agent_strategy', 'unknown')}")
    spec = EvalSpec(created=created, task=f"personalwab/{track(run_args) or 'unknown-track'}",
                    task_id=hashlib.sha256(raw).hexdigest()[:22], run_id=parsed.path.stem,
                    dataset=EvalDataset(name=f"PersonalWAB {run_args.get('task_split', 'test')} split "
                                             f"({run_args.get('data_source', 'official')})",
                                        samples=len({r["task_id"] for r in records}),
                                        sample_ids=sorted({r["task_id"] for r in records})),
                    model=model, config=EvalConfig(epochs=int(run_args.get("num_trials", 1) or 1)),
                    metadata={"result_file": str(parsed.path), "result_file_sha256": hashlib.sha256(raw).hexdigest(),
                              "method": method_name(run_args, parsed.path), "run_args": run_args})
    return EvalLog(status="success" if parsed.header is not None else "started", eval=spec, results=_results(records),
                   samples=[_sample(record, prefix) for record in records])


def inspect_log_bytes(parsed: RunFile, suffix: str) -> bytes:
    """The Inspect log's bytes as inspect_ai writes them (`.eval`: its zip format; `.json`: JSON)."""
    from inspect_ai.log import write_eval_log

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"log{suffix}"
        write_eval_log(inspect_log(parsed), str(path), format="json" if suffix == ".json" else "eval")
        return path.read_bytes()


def eval_results_yaml(parsed: RunFile, dataset_id: str) -> str:
    """The run's scores as Hugging Face `.eval_results` entries (a YAML list)."""
    import yaml

    run_args = parsed.run_args
    statistics = compute_statistics([r for r in parsed.records if not is_errored(r)])
    track_name = track(run_args) or "unknown-track"
    notes = (f"{method_name(run_args, parsed.path)}; {run_args.get('data_source', 'official')} data, "
             f"{run_args.get('task_split', 'test')} split; from {parsed.path.name} (sha256 "
             f"{hashlib.sha256(parsed.path.read_bytes()).hexdigest()[:16]}); accuracy as a fraction in [0, 1]")
    entries = [{"dataset": {"id": dataset_id, "task_id": f"{track_name}/{group}/{label}"},
                "value": round(statistics[group][key], 6), "notes": notes}
               for group in (*TASK_TYPES, "overall") if statistics.get(group, {}).get("total_count")
               for key, label in (("avg_action_acc", "function_acc"), ("avg_res_acc", "result_acc"))]
    return str(yaml.safe_dump(entries, sort_keys=False, allow_unicode=True))
