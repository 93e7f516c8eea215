"""A run prepared and executed (`PersonalWAB.runner.execute`): the line it starts with counts the
tasks and the trials apart."""

from __future__ import annotations

from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run


def test_the_start_line_counts_tasks_and_trials_apart(tiny_data_dir, tiny_engines, tmp_path):
    said: list[str] = []
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(tmp_path / "r.json"), end_index=3, num_trials=2,
                  agent_memory="none"), log=said.append)
    assert any(line.startswith("running 3 task(s) x 2 trials (6 task runs) of the test split") for line in said)
