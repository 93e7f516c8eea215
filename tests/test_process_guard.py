"""The suite's guard against a test that leaves a process running (tests/conftest.py), shown able to fail."""

from __future__ import annotations

import subprocess
import sys
import time

from PersonalWAB.scratch import pid_alive
from tests.conftest import HANG_GUARD_S, _started_here, end_leftovers

SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"


def test_the_guard_finds_and_ends_an_orphan_a_test_left_running(tmp_path):
    """The shell that started the sleeper exits at once, so the sleeper is handed to init: only
    the mark it inherited says where it came from."""
    before = _started_here()
    pid_file = tmp_path / "pid"
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{SLEEPER}" {pid_file} &'], check=True, timeout=HANG_GUARD_S)
    deadline = time.monotonic() + HANG_GUARD_S
    while not (pid_file.exists() and pid_file.read_text()):  # the sleeper runs (state, not time)
        assert time.monotonic() < deadline, "hung: the sleeper never started"
        time.sleep(0.05)
    orphan = int(pid_file.read_text())
    left = end_leftovers(before, grace_s=0)
    assert len(left) == 1 and left[0].startswith(f"pid {orphan}: ") and "time.sleep(600)" in left[0]
    assert not pid_alive(orphan)
    assert end_leftovers(before, grace_s=0) == []
