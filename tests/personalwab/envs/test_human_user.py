"""`--user_mode human`: a person at a terminal plays the user (driven here through a pseudo-terminal)."""

import io
import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from PersonalWAB.envs.users.human_user import PROMPT, HumanUser, InputEnded
from PersonalWAB.protocol import project_protocol
from tests.conftest import HANG_GUARD_S, REPO_ROOT


def test_human_user_reads_lines_and_stops_the_run_on_eof(tiny_data):
    task = tiny_data.split("test")[0]
    lines = iter(["", "cheaper please"])

    def read(prompt):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    out = io.StringIO()
    user = HumanUser(read=read, out=out)
    assert user.reset(task, tiny_data.profile(task["user_id"]), project_protocol()) is None
    assert user.reply("Here are the results") == "cheaper please"
    with pytest.raises(InputEnded, match="end of input"):
        user.reply("Better?")
    shown = out.getvalue()
    assert "AGENT: Here are the results" in shown and "AGENT: Better?" in shown and task["task"] in shown


def read_until(fd, needle, buffer, timeout=120.0):
    deadline = time.monotonic() + timeout
    while needle not in buffer[0]:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out waiting for {needle!r}; got:\n{buffer[0][-2000:]}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 65536).decode(errors="replace")
            except OSError:  # the child closed the terminal
                chunk = ""
            assert chunk, f"the session ended before {needle!r}; got:\n{buffer[0][-2000:]}"
            buffer[0] += chunk
    position = buffer[0].index(needle) + len(needle)
    buffer[0] = buffer[0][position:]


@pytest.mark.slow
def test_human_session_through_a_pseudo_terminal(tiny_data_dir, tiny_engines, tmp_path):
    output = tmp_path / "human.json"
    argv = [sys.executable, str(REPO_ROOT / "run.py"), "--user_mode", "human", "--max_steps", "3",
            "--agent_strategy", "heuristic", "--agent_memory", "none", "--data_dir", str(tiny_data_dir),
            "--search_backend", "lucene", "--end_index", "2", "--out", str(output)]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal session
        os.chdir(REPO_ROOT)
        os.execv(sys.executable, argv)
    buffer = [""]
    try:
        # Task 0 (search): the agent reports its results; one refining reply; the step limit ends it.
        read_until(fd, "AGENT: Here is what I found", buffer)
        read_until(fd, PROMPT, buffer)
        store = tiny_engines.data.split("test")[0]["target"]["product_info"]["store"]
        os.write(fd, f"I want it from {store}\n".encode())
        # Task 1 (recommend): the user is satisfied; the agent stops.
        read_until(fd, PROMPT, buffer)
        os.write(fd, b"Perfect, that's the one\n")
        read_until(fd, "result file:", buffer)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.WEXITSTATUS(status) == 0
    records = {r["task_id"]: r for r in json.loads(output.read_text())[1:]}
    first, second = records[0], records[1]
    assert len(first["action_acc"]) == 2
    refined = first["info"]["actions"][1]["arguments"]["query"]
    assert store.split()[0].lower() in refined.lower()
    assert first["traj"][5]["content"] == f"I want it from {store}"
    assert len(second["action_acc"]) == 1 and second["info"]["actions"][-1]["name"] == "stop"

@pytest.mark.slow
def test_human_mode_stops_at_end_of_input_and_keeps_what_finished(tiny_data_dir, tiny_engines, tmp_path):
    output = tmp_path / "human.json"
    argv = [sys.executable, str(REPO_ROOT / "run.py"), "--user_mode", "human", "--max_steps", "3",
            "--agent_strategy", "heuristic", "--agent_memory", "none", "--data_dir", str(tiny_data_dir),
            "--search_backend", "bm25s", "--end_index", "2", "--out", str(output)]
    done = subprocess.run(argv, input="", capture_output=True, text=True, cwd=REPO_ROOT, timeout=HANG_GUARD_S)
    assert done.returncode == 1, done.stderr
    assert "error: end of input on the user's turn (--user_mode human): the run stops" in done.stderr
    assert f"--resume_from {output}" in done.stderr
    records = json.loads(output.read_text())[1:]
    assert all(not any(turn.get("role") == "user" and turn.get("content") == "" for turn in record["traj"])
               for record in records)  # no empty user reply was recorded
