"""What a run writes: one record per task run (with its failure label, `PersonalWAB.failures`),
and the result file's name when the settings name none."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from PersonalWAB.failures import failure_label
from PersonalWAB.results import task_summary
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.schema_types import Record, RecordInfo, Task

if TYPE_CHECKING:
    from PersonalWAB.envs.pwab.env import PWABEnv
    from PersonalWAB.types import Episode


def default_output_path(config: RunConfig, end_index: int) -> Path:
    """`<log_dir>/<track>/step..._MMDDHHMM.json`, named after the settings (the writer adds
    `-N` when two runs of the same minute share it)."""
    track = "singleturn" if config.max_steps == -1 else "multiturn"
    model = (config.model or "offline").replace("/", "_")
    user = (config.user_model or ("none" if config.user_mode == "no" else config.user_mode)).replace("/", "_")
    stamp = datetime.now().strftime("%m%d%H%M")
    strategy = re.sub(r"[^\w.-]", "_", config.agent_strategy)  # a custom agent's module:Class
    name = (f"step{config.max_steps}_{strategy}-{model}-{config.temperature}"
            f"_mem{config.agent_memory}_range{config.start_index}-{end_index}_user{user}_{stamp}.json")
    return Path(config.log_dir) / track / name


def make_record(task_id: int, trial: int, task: Task, env: PWABEnv, episode: Episode) -> Record:
    """The result file's record of one task run: its attempts' scores, what the agent did and
    what it cost (`episode`), and the error that ended it, if any."""
    info: RecordInfo = {
        "task": task_summary(task),
        "actions": [a for a in episode.actions if a["name"] != "respond"],
        "user_cost": episode.user_cost,
        "usage": episode.usage.to_dict(),
    }
    if env.steps != episode.usage.calls:  # an agent that does not make one model call per action
        info["steps"] = env.steps
    if env.leak_flags:
        info["leak_guard"] = env.leak_flags
    info.update(episode.notes)
    if episode.error:
        info["error"] = episode.error
    record: Record = {
        "task_id": task_id,
        "action_acc": [a.function_acc for a in env.attempts],
        "res_acc": [a.result_acc for a in env.attempts],
        "info": info,
        "traj": episode.traj,
        "trial": trial,
    }
    info["failure"] = failure_label(record, env.protocol.text("react.api_output"), env.data.products)
    return record
