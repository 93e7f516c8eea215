"""Synthetic result files in the exact leaderboard shape, of official split size, for the
leaderboard tools' tests and benchmark (no run needed to make them)."""

from __future__ import annotations

import json
from pathlib import Path

from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
from PersonalWAB.results import build_header


def full_split_file(path: Path, seed: int, multi_turn: bool) -> None:
    """A full official-size test split in the exact record shape, with small trajectories."""
    kinds = ["search"] * 694 + ["recommend"] * 757 + ["review"] * 723
    records = []
    for task_id, kind in enumerate(kinds):
        attempts = 1 + (task_id + seed) % 3 if multi_turn else 1
        res = [((task_id * 7 + seed * 13 + k) % 101) / 100 for k in range(attempts)]
        action = {"name": FUNCTION_FOR_TASK_TYPE[kind], "arguments": {"query": f"q{task_id}"}}
        records.append({
            "task_id": task_id, "action_acc": [float((task_id + seed) % 17 != 0)] * attempts, "res_acc": res,
            "info": {"task": {"user_id": f"U{task_id % 1000:04d}", "task": f"instruction {task_id}", "type": kind,
                              "timestamp": 1_700_000_000_000 + task_id, "target": f"B{task_id:09d}"},
                     "actions": [action] * attempts, "user_cost": 0.0,
                     "usage": {"completion_tokens": [20] * attempts, "prompt_tokens": [400] * attempts,
                               "total_tokens": [420] * attempts, "completion_price": 0.0002 * attempts,
                               "prompt_price": 0.001 * attempts, "total_price": 0.0012 * attempts}},
            "traj": [{"role": "user", "content": f"instruction {task_id}"},
                     {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {
                         "name": action["name"], "arguments": json.dumps(action["arguments"])}}]},
                     {"role": "tool", "tool_call_id": "c", "name": action["name"], "content": "Product 1: ..."}],
            "trial": 0,
        })
    run_args = {"env": "pwab", "agent_strategy": "function_calling", "model": f"model-{seed}", "user_mode": "no",
                "user_model": "gpt-4o", "agent_memory": "last", "memory_length": 10, "task_split": "test",
                "start_index": 0, "end_index": -1, "num_trials": 1,
                "max_steps": 10 if multi_turn else -1}  # the release's run.py's run_args: labelled from these
    path.write_text(json.dumps([build_header(run_args, records), *records]))
