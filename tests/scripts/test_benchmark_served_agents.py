"""The served-agents report keeps the runs an invocation does not redo, when they are comparable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripts.benchmark_served_agents import kept_runs, table

SETTINGS = {"data_dir": "data/synthetic/small", "tasks": 10, "model": "smollm2-135m", "max_tokens": 128,
            "request_timeout": 600.0, "runs": "function_calling,react"}


def run(function_acc: float) -> dict:
    return {"tasks": 10, "function_acc": function_acc, "result_acc": 0.1, "format_errors": 0, "errored": 0,
            "model_calls": 10, "calls_not_steps": 0, "prompt_tokens": 5000, "seconds_per_task": 20.0}


def earlier_report(path: Path, **settings: object) -> Path:
    path.write_text(json.dumps({"settings": {**SETTINGS, **settings}, "date": "2026-11-27", "load_mean": 2.5,
                                "command": "python scripts/benchmark_served_agents.py --tasks 10",
                                "runs": {"function_calling": run(0.5), "react": run(0.0)}}))
    return path


def test_runs_not_redone_are_kept_and_marked_with_their_origin(tmp_path: Path):
    out = earlier_report(tmp_path / "served.json")
    kept = kept_runs(out, SETTINGS, ["react"])
    assert list(kept) == ["function_calling"]
    assert kept["function_calling"]["function_acc"] == 0.5 and kept["function_calling"]["date"] == "2026-11-27"
    report = {"date": "2026-11-28", "tasks": 10, "data_dir": "data/synthetic/small", "model": "smollm2-135m",
              "machine": "2 cores", "load_mean": 1.2,
              "command": "python scripts/benchmark_served_agents.py --runs react",
              "runs": {"react": run(0.2), **kept}}
    text = table(report)
    assert "| function_calling * | 10 | 0.500 |" in text and "| react | 10 | 0.200 |" in text
    assert "kept from an earlier run of the same settings (2026-11-27, mean load 2.50" in text
    assert text.index("function_calling *") < text.index("| react |")  # rows in the runs' own order


def test_a_report_of_other_settings_is_not_mixed_in(tmp_path: Path):
    assert kept_runs(earlier_report(tmp_path / "served.json", tasks=20), SETTINGS, ["react"]) == {}
    assert kept_runs(tmp_path / "absent.json", SETTINGS, ["react"]) == {}


def test_a_file_that_is_no_report_is_named(tmp_path: Path):
    bad = tmp_path / "served.json"
    bad.write_text(json.dumps({"runs": []}))
    with pytest.raises(ValueError, match="served.json: not a report of this script"):
        kept_runs(bad, SETTINGS, ["react"])
