"""`pwab audit [FILE...] [--data_dir DIR]`: the leakage audit of a data folder and the privileged
inputs of runs, per task (docs/audit.md). Text for a reader, or JSON (`--format json`) with every
task. Exit status 0, or 2 for bad input (nothing to audit, a file that is invalid or unreadable)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from PersonalWAB.outputs import FILE, parse_command, write_output
from PersonalWAB.settings import setting

EXIT_OK, EXIT_USAGE = 0, 2
SHOWN_TASKS = 10


@dataclass
class AuditSettings:
    """`audit`: the leakage audit of a data folder and of result files."""

    files: list[str] | None = setting(None, "result files whose runs to audit (none: the data alone)",
                                      positional=True, nargs="*", metavar="FILE")
    data_dir: str | None = setting(None, "the data folder to audit (and the runs' data: the review-span check of "
                                         "user messages needs it)", metavar="DIR")
    format: str = setting("text", "text (a reader's summary) or json (every count, every task)",
                          choices=["text", "json"])
    out: str | None = setting(None, "write the audit to this file", metavar="FILE", default_text="stdout")


def file_audit(path: str, data: Any | None) -> dict[str, Any]:
    """One result file's audit: its summary (as its header holds it) and each task's privileged inputs."""
    from PersonalWAB.audit.run import RunTexts, run_summary, task_privileges
    from PersonalWAB.leaderboard.validate import read_valid
    from PersonalWAB.results import RunFile

    parsed = cast(RunFile, read_valid(path, data).result)  # the one reader: an invalid file is refused
    split = data.split(str(parsed.run_args.get("task_split", "test"))) if data is not None else None
    texts = RunTexts.of(parsed.run_args)
    tasks = []
    for record in parsed.records:
        task = split[record["task_id"]] if split is not None else None
        privileges = task_privileges(record, parsed.run_args, texts, task)
        if any(value for key, value in privileges.items() if key not in ("leak_guard_masked",)):
            tasks.append({"task_id": record["task_id"], "trial": record["trial"], **privileges})
    summary = run_summary(parsed.run_args, parsed.records)
    if data is not None:
        named = [t for t in tasks if t["user_messages_naming_target"]]
        summary["privileged_inputs"]["user_messages_naming_target"] = {
            "tasks": len(named), "count": sum(t["user_messages_naming_target"] for t in named),
            "with": "the target's ASIN or a copied review span (the run's data)"}
    return {"file": str(path), "summary": summary, "tasks": tasks}


def render_text(data_findings: list[Any] | None, runs: list[dict[str, Any]]) -> str:
    from PersonalWAB.audit.run import privileged_flags

    lines = []
    if data_findings is not None:
        lines += ["Data audit:", *(f"  {finding.line()}" for finding in data_findings), ""]
    for run in runs:
        summary = run["summary"]
        counts = summary["privileged_inputs"]
        lines.append(f"Run audit of {run['file']} (strict protocol: {'yes' if summary['strict'] else 'no'}):")
        lines += [f"  {key}: {value['count']} in {value['tasks']} task run(s)" for key, value in counts.items()]
        lines.append(f"  removed: {', '.join(summary['removed']) or 'nothing'}; remaining: "
                     f"{', '.join(summary['remaining']) or 'nothing'}")
        lines += [f"  {line}" for line in privileged_flags(summary)]
        shown = ", ".join(str(t["task_id"]) for t in run["tasks"][:SHOWN_TASKS])
        if run["tasks"]:
            lines.append(f"  tasks with a privileged input: {shown}"
                         + (f" ... ({len(run['tasks'])})" if len(run["tasks"]) > SHOWN_TASKS else ""))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.audit.data import data_audit
    from PersonalWAB.leaderboard.commands import _load_data

    args = parse_command([AuditSettings], argv, {"out": FILE},
                         description="The leakage audit of a data folder and the privileged inputs of runs.")[0]
    if not args.files and not args.data_dir:
        print("error: nothing to audit: give --data_dir DIR, result files, or both", file=sys.stderr)
        return EXIT_USAGE
    data = _load_data(args.data_dir)
    findings = data_audit(data) if data is not None else None
    runs = [file_audit(path, data) for path in args.files or []]
    if args.format == "json":
        text = json.dumps({"data": {f.kind: f.to_json() for f in findings} if findings is not None else None,
                           "runs": runs}, indent=2, ensure_ascii=False) + "\n"
    else:
        text = render_text(findings, runs)
    if args.out:
        write_output(Path(args.out), text)
    else:
        sys.stdout.write(text)
    return EXIT_OK
