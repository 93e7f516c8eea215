"""Step 7 from files, as the release's `test.py` (without `--evaluate_dpo`) computes it.

For every task of the split (default `test`):
- the predicted function is the FIRST entry of the function file's list for the instruction,
  compared as it is: `search_product_by_query` means search, `get_recommendations_by_history`
  recommend, and anything else counts as review;
- a function of the wrong type gives Tool Accuracy 0 and Result 0, the right one Tool
  Accuracy 1;
- with the right function EVERY candidate of the parameter file's list is sent as the
  parameter (no `Say:` or `stop` reading; step 4's `score_jobs` with `--parsing strict`):
  - search / recommend: the result is `1 - i/len(results)` for the first result whose
    text contains the target ASIN, and a candidate whose results hold the target replaces
    the score so far, while one whose results do not leaves it as it is: the task scores
    the LAST candidate that found the target (0 when none did);
  - review: the task scores the raw MiniLM cosine (not clipped) of the LAST candidate; an
    empty candidate is the review "".
Recommend candidates are read as their ASINs, each once, in first-occurrence order (the
release's `list(set(...))` order follows the hash seed; `bug_fixes` in PUMA/configs/release.yaml).

Printed: the release's table (per task type and overall: Total, Tool Accuracy Avg, Result
Avg). Written (`--out`): the summary and every task's scores (the function read,
Tool Accuracy, Result and each candidate's score), with its record (`*.puma_run.json`).

Where the release's script would stop with an error this one reports it or carries on: an
instruction missing from a file is an error naming it; a value that is a string, not a list,
is read as a one-element list (the release's generation always writes lists); a task type
with no tasks shows no average (the release divides by zero).

`scripts/fast_test.sh` runs this under `RECIPE=release` (the default); `RECIPE=improved`
evaluates the files through `run.py --agent_strategy puma` instead (the improved agent's
reading of outputs and the environment's scoring).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.engines.search import BACKENDS as SEARCH_BACKENDS
from PersonalWAB.settings import setting
from PUMA.recipe import RECIPE_HELP
from PersonalWAB.schema_types import Task

TASK_TYPES = ("search", "recommend", "review")
_ROW_NAMES = {"search": "Search", "recommend": "Recommend", "review": "Review", "overall": "Overall"}


@dataclass
class FastTestConfig:
    """Step 7 from files: its settings."""

    function_file: str = setting("PUMA/output/function_test.json", "function predictions (instruction -> list; "
                                 "the first is read)")
    param_file: str = setting("PUMA/output/param_test.json", "parameter outputs (instruction -> list)")
    output_file: str = setting("PUMA/output/fast_test_scores.json", "JSON file with the summary and every task's "
                               "scores (its record beside it)", flag="out", aliases=("output_file",), metavar="FILE")
    data_dir: str | None = setting(None, "the benchmark data whose tasks and engines score the outputs",
                                   default_text="the official data when placed, else the bundled synthetic data")
    task_split: str = setting("test", "the split to evaluate")
    search_backend: str = setting("lucene", "search engine of the search function (bm25s needs no Java)",
                                  choices=SEARCH_BACKENDS)
    recipe: str = setting("release", f"{RECIPE_HELP}; this step computes the release's test.py, so only a recipe "
                          "whose agent reads outputs as the release does (agent puma_parsing strict) runs it",
                          metavar="NAME|FILE")
    protocol_file: str | None = setting(None, "protocol pack whose texts render the function results",
                                        default_text="the release pack when placed, else the project's")


def predicted_type(function_output: Any) -> str:
    """The task type the release reads off a function output (compared as it is)."""
    from PersonalWAB.data.schema import RECOMMEND, SEARCH

    return "search" if function_output == SEARCH else "recommend" if function_output == RECOMMEND else "review"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _entry(outputs: dict[str, Any], instruction: str, what: str) -> Any:
    if instruction not in outputs:
        raise ValueError(f"the {what} file has no entry for the instruction {instruction[:80]!r}")
    return outputs[instruction]


def task_result(task_type: str, candidate_scores: list[float]) -> float:
    """The task's Result from its candidates' scores, in the parameter file's order."""
    if task_type == "review":
        return candidate_scores[-1] if candidate_scores else 0.0
    score = 0.0
    for candidate_score in candidate_scores:
        if candidate_score > 0:  # the candidate's results hold the target
            score = candidate_score
    return score


def evaluate(engines: Any, tasks: list[Task], function_outputs: dict[str, Any],
             param_outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Every task's row: instruction, type, function (the output read), function_acc,
    result_acc and candidate_scores (empty for a wrong function), every candidate read and
    scored as the release's test.py does (strict, raw cosine)."""
    from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
    from PUMA.candidate_scores import score_jobs

    rows: list[dict[str, Any]] = []
    jobs: list[tuple[Task, str, str]] = []
    where: dict[tuple[int, str], int] = {}  # (task index, candidate) -> job
    for index, task in enumerate(tasks):
        listed = _as_list(_entry(function_outputs, task["task"], "function"))
        if not listed:
            raise ValueError(f"the function file's list for {task['task'][:80]!r} is empty")
        right = predicted_type(listed[0]) == task["type"]
        candidates = [c for c in _as_list(_entry(param_outputs, task["task"], "param")) if isinstance(c, str)] \
            if right else []
        for candidate in candidates:
            if (index, candidate) not in where:
                where[(index, candidate)] = len(jobs)
                jobs.append((task, FUNCTION_FOR_TASK_TYPE[task["type"]], candidate))
        rows.append({"index": index, "instruction": task["task"], "type": task["type"], "function": listed[0],
                     "function_acc": 1.0 if right else 0.0, "candidates": candidates})
    scores = score_jobs(engines, jobs, "strict", "raw_cosine")
    for row in rows:
        candidates = row.pop("candidates")
        row["candidate_scores"] = [scores[where[(row["index"], c)]] for c in candidates]
        row["result_acc"] = task_result(row["type"], row["candidate_scores"]) if row["function_acc"] else 0.0
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task type and overall: total, tool_accuracy and result (None for no tasks)."""
    summary = {}
    for name in (*TASK_TYPES, "overall"):
        chosen = [r for r in rows if name in ("overall", r["type"])]
        n = len(chosen)
        summary[name] = {"total": n,
                         "tool_accuracy": sum(r["function_acc"] for r in chosen) / n if n else None,
                         "result": sum(r["result_acc"] for r in chosen) / n if n else None}
    return summary


def format_table(summary: dict[str, dict[str, Any]]) -> str:
    """The release's grid table: Task Type, Total, Tool Accuracy Avg, Result Avg."""
    headers = ["Task Type", "Total", "Tool Accuracy Avg", "Result Avg"]
    body = [[_ROW_NAMES[name], str(row["total"]),
             *("-" if row[key] is None else f"{row[key]:.6g}" for key in ("tool_accuracy", "result"))]
            for name, row in summary.items()]
    widths = [max(len(r[i]) for r in [headers, *body]) for i in range(len(headers))]

    def line(fill: str) -> str:
        return "+" + "+".join(fill * (w + 2) for w in widths) + "+"

    def cells(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                 for i, (v, w) in enumerate(zip(values, widths))) + " |"

    out = [line("-"), cells(headers), line("=")]
    for values in body:
        out += [cells(values), line("-")]
    return "\n".join(out)


def fast_test(config: FastTestConfig, log: Callable[[str], None] = print) -> Path:
    from PUMA.modeling import read_json, write_json
    from PUMA.recipe import AGENT, check_inputs, get_recipe, write_record
    from PUMA.candidate_scores import load_engines, scoring_facts

    recipe = get_recipe(config.recipe)
    parsing = recipe.value(AGENT, "puma_parsing")
    if parsing != "strict":
        raise ValueError(f"PUMA.fast_test computes what the release's test.py computes, which reads outputs as the "
                         f"release's agent does (strict); --recipe {recipe.name}'s agent reads them as puma_parsing "
                         f"{parsing}: evaluate the files through run.py (RECIPE={recipe.name} scripts/fast_test.sh)")
    inputs = {"--function_file": config.function_file, "--param_file": config.param_file}
    check_inputs(recipe, inputs)
    function_outputs, param_outputs = read_json(config.function_file), read_json(config.param_file)
    for file, content in ((config.function_file, function_outputs), (config.param_file, param_outputs)):
        if not isinstance(content, dict):
            raise ValueError(f"{file}: expected a JSON object mapping instruction text to a list of outputs")
    _, engines, tasks = load_engines(config.data_dir, config.search_backend, config.protocol_file,
                                     config.task_split, log)
    rows = evaluate(engines, tasks, function_outputs, param_outputs)
    summary = summarize(rows)
    path = write_json(config.output_file, {"recipe": recipe.name, "split": config.task_split,
                                           "summary": summary, "tasks": rows})
    write_record(path, "fast_test", recipe, config, inputs, summary=summary, **scoring_facts("strict", "raw_cosine"),
                 task_result="search/recommend: the last candidate whose results hold the target; review: the "
                             "last candidate's cosine (as the release's test.py)")
    log(format_table(summary))
    log(f"{path}: the scores of {len(rows)} {config.task_split} tasks")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    fast_test(parse_step(FastTestConfig, argv, "python -m PUMA.fast_test", __doc__, "fast_test"))
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
