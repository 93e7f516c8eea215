"""scripts/construct_smoke.sh: the construction smoke run twice on one output folder, the second
time answered from its cache without a model call."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import HANG_GUARD_S, REPO_ROOT


@pytest.mark.slow
def test_construct_smoke_runs_twice_on_one_out_and_the_second_calls_no_model(tmp_path):
    env = {**os.environ, "SMOKE_SCALE": "tiny", "SMOKE_USERS": "12"}  # the script's smaller world
    runs = [subprocess.run(["bash", "scripts/construct_smoke.sh", str(tmp_path / "smoke")], cwd=REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=HANG_GUARD_S) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], runs[-1].stderr[-2000:]
    assert "scripted model server stopped after 0 request(s)" in runs[1].stdout
    assert "stopped after 0 request(s)" not in runs[0].stdout
