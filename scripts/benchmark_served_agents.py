"""The API agents against a local model no one scripted: SmolLM2-135M-Instruct served on the CPU as an
OpenAI-compatible endpoint (`scripts/serve_local_model.sh`, llama-cpp-python's server), and `function_calling`,
`react`, `recmind` and the multi-turn track's LLM user run against it on a fixed subset of the test split.

    python scripts/benchmark_served_agents.py                  # 20 tasks of synthetic small, every run below
    python scripts/benchmark_served_agents.py --tasks 5 --runs react
    python scripts/benchmark_served_agents.py --runs multiturn_llm_user   # again; the other runs' rows are kept

For each run: Function Acc and Result Acc (the result file's header), format errors (tasks ended after
replies whose tool call or ReAct arguments did not parse: counted, scored as they stand) and errored tasks,
the model calls and prompt tokens, and the wall time per task. Every result file is validated with `pwab
leaderboard validate`. The server is started (and stopped) by this script unless `--api_base` names one
already running. Figures go to `--out` (JSON) and a markdown table beside it; runs of an earlier report at
`--out` with the same tasks, data, model and reply budget that this invocation does not redo are kept in
both, marked with when and how they were made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.settings import parse, resolved, setting  # noqa: E402
from scripts.doc_block import write_block  # noqa: E402

DOC_BLOCK = ("served-agents", "scripts/benchmark_served_agents.py")  # its markers in --doc (doc_block.py)

# run name -> its run.py flags (besides the model, endpoint, tasks and output)
RUNS: dict[str, list[str]] = {
    "function_calling": ["--agent_strategy", "function_calling", "--agent_memory", "last", "--memory_length", "10"],
    "react": ["--agent_strategy", "react", "--agent_memory", "last", "--memory_length", "10"],
    "recmind": ["--agent_strategy", "recmind", "--agent_memory", "recmind", "--memory_length", "50"],
    "multiturn_llm_user": ["--agent_strategy", "function_calling", "--agent_memory", "last", "--memory_length", "10",
                           "--max_steps", "5", "--user_mode", "naive"],
}


@dataclass
class ServedSettings:
    """Which runs, on which tasks, against which server."""

    data_dir: str = setting("data/synthetic/small", "benchmark data (its test split's first --tasks tasks)")
    tasks: int = setting(20, "tasks of the test split each run takes (the first ones)")
    runs: str = setting(",".join(RUNS), f"comma-separated runs ({', '.join(RUNS)})")
    model: str = setting("smollm2-135m", "the model name the server answers to")
    api_base: str | None = setting(None, "an OpenAI-compatible server already running (default: start "
                                   "scripts/serve_local_model.sh on --port, and stop it at the end)")
    port: int = setting(8738, "the port of the server this script starts")
    max_tokens: int = setting(256, "most tokens of an agent's reply (run.py --max_tokens)")
    request_timeout: float = setting(600.0, "seconds a model call may take (run.py --request_timeout)")
    doc: str = setting("docs/running.md", "markdown file whose served-agents block gets the table; empty: none")
    out: str = setting("data/served_agents/served_agents.json", "JSON file of the figures (a markdown table "
                       "beside it); the result files go to its folder")


def wait_for(api_base: str, process: subprocess.Popen | None, limit_s: float = 300.0) -> None:
    """Until the server lists its models (or its process ended, or `limit_s` passed)."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the model server ended with exit status {process.returncode} before it answered")
        try:
            with urllib.request.urlopen(f"{api_base}/models", timeout=5):
                return
        except OSError:
            time.sleep(2)
    raise RuntimeError(f"{api_base}: no answer within {limit_s:.0f} s")


def run_flags(s: ServedSettings, name: str, api_base: str, out: Path) -> list[str]:
    model = f"openai/{s.model}"
    flags = [*RUNS[name], "--data_dir", s.data_dir, "--model", model, "--api_base", api_base, "--end_index",
             str(s.tasks), "--price_per_mtok", "0,0", "--max_tokens", str(s.max_tokens), "--request_timeout",
             str(s.request_timeout), "--out", str(out), "--overwrite", "--quiet"]
    if "--user_mode" in RUNS[name]:
        flags += ["--user_model", model, "--user_api_base", api_base, "--user_price_per_mtok", "0,0"]
    return flags


def figures(path: Path, seconds: float) -> dict[str, Any]:
    from PersonalWAB.metrics import count_errors, count_format_errors
    from PersonalWAB.results import read_run_file

    parsed = read_run_file(path)
    records = parsed.records
    usage = [r["info"].get("usage", {}) for r in records]
    steps = sum(len(u.get("prompt_tokens", [])) for u in usage)
    retries = sum(u.get("extra_calls", 0) for u in usage)
    header = parsed.header or {}
    overall = (header.get("results") or {}).get("overall", {})
    return {"tasks": len(records), "function_acc": overall.get("avg_action_acc"),
            "result_acc": overall.get("avg_res_acc"), "avg_steps": overall.get("avg_interaction_times"),
            "format_errors": count_format_errors(records), "errored": count_errors(records)["overall"],
            "model_calls": steps + retries, "calls_not_steps": retries,
            "prompt_tokens": sum(sum(u.get("prompt_tokens", [])) for u in usage),
            "completion_tokens": sum(sum(u.get("completion_tokens", [])) for u in usage),
            "seconds": round(seconds, 1), "seconds_per_task": round(seconds / max(len(records), 1), 1),
            "by_type": {t: {k: v for k, v in (header.get("results") or {}).get(t, {}).items()}
                        for t in ("search", "recommend", "review")}}


COMPARABLE = ("data_dir", "tasks", "model", "max_tokens", "request_timeout")  # settings a kept run must share


def kept_runs(out: Path, settings: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The runs of the earlier report at `out` that this invocation does not redo, when that report
    was made with the same tasks, data, model and reply budget; each says when and how it was made."""
    if not out.is_file():
        return {}
    try:
        earlier = json.loads(out.read_text(encoding="utf-8"))
        if any(earlier["settings"].get(k) != settings.get(k) for k in COMPARABLE):
            return {}
        origin = {"date": earlier["date"], "command": earlier["command"], "load_mean": earlier["load_mean"]}
        return {name: {**origin, **run, "kept": True} for name, run in earlier["runs"].items()
                if name in RUNS and name not in names}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"--out {out}: not a report of this script ({error}); give another --out") from None


def table(report: dict[str, Any]) -> str:
    lines = [f"Measured {report['date']}: {report['tasks']} tasks of the test split of {report['data_dir']}, model "
             f"{report['model']} served by llama-cpp-python on {report['machine']} (mean load "
             f"{report['load_mean']:.2f}), `{report['command']}`:"]
    kept = {(f["date"], f["command"], f["load_mean"]) for f in report["runs"].values() if f.get("kept")}
    for when, command, load in sorted(kept):
        lines.append(f"rows marked * are kept from an earlier run of the same settings ({when}, mean load "
                     f"{load:.2f}, `{command}`);")
    lines += ["", "| run | tasks | Function Acc | Result Acc | format errors | errored | model calls (asked again) | "
              "prompt tokens of steps | s / task |", "|---|---|---|---|---|---|---|---|---|"]
    for name, f in sorted(report["runs"].items(), key=lambda item: list(RUNS).index(item[0])):
        name = f"{name} *" if f.get("kept") else name
        if "error" in f:
            lines.append(f"| {name} | failed: {f['error']} |  |  |  |  |  |  |  |")
            continue
        lines.append(f"| {name} | {f['tasks']} | {f['function_acc']:.3f} | {f['result_acc']:.3f} | "
                     f"{f['format_errors']} | {f['errored']} | {f['model_calls']} ({f['calls_not_steps']}) | "
                     f"{f['prompt_tokens']} | "
                     f"{f['seconds_per_task']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    s = parse(ServedSettings, argv, prog="scripts/benchmark_served_agents.py", description=__doc__)
    names = [n for n in s.runs.split(",") if n]
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        raise ValueError(f"--runs: {unknown[0]!r} is not one of {', '.join(RUNS)}")
    out = Path(s.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    server = None
    api_base = s.api_base
    if api_base is None:
        api_base = f"http://127.0.0.1:{s.port}/v1"
        print(f"starting the model server at {api_base}", flush=True)
        server = subprocess.Popen(["bash", str(REPO / "scripts" / "serve_local_model.sh"), str(s.port)], cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    loads: list[float] = []
    if s.doc and not Path(s.doc).is_file():
        raise ValueError(f"--doc {s.doc}: no such file")
    args = sys.argv[1:] if argv is None else argv
    report: dict[str, Any] = {"settings": resolved(s), "tasks": s.tasks, "data_dir": s.data_dir, "model": s.model,
                              "machine": f"{os.cpu_count()} cores", "date": date.today().isoformat(),
                              "command": " ".join(["python scripts/benchmark_served_agents.py", *args]), "runs": {}}
    kept = kept_runs(out, report["settings"], names)
    try:
        wait_for(api_base, server)
        for name in names:
            result = out.parent / f"{name}.json"
            command = [sys.executable, "run.py", *run_flags(s, name, api_base, result)]
            print(f"== {name}: {' '.join(command[1:])}", flush=True)
            start = time.monotonic()
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
            status = subprocess.run(command, cwd=REPO).returncode
            seconds = time.monotonic() - start
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
            if not result.is_file():
                report["runs"][name] = {"error": f"run.py exit status {status}, no result file"}
                continue
            valid = subprocess.run([sys.executable, "-m", "PersonalWAB.cli", "leaderboard", "validate", str(result),
                                    "--data_dir", s.data_dir], cwd=REPO).returncode
            report["runs"][name] = {**figures(result, seconds), "run_exit_status": status, "valid": valid == 0,
                                    "result_file": str(result)}
            print(f"== {name}: {report['runs'][name]['seconds_per_task']} s per task", flush=True)
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait()
    report["load_mean"] = sum(loads) / max(len(loads), 1)
    report["runs"].update(kept)
    out.write_text(json.dumps(report, indent=1) + "\n")
    text = table(report)
    out.with_suffix(".md").write_text(text)
    if s.doc:
        write_block(Path(s.doc), *DOC_BLOCK, text)
    print(text)
    return 0 if all(r.get("valid") for r in report["runs"].values()) else 1


if __name__ == "__main__":
    sys.exit(run_command(main, bad_input=(ValueError, OSError)))
