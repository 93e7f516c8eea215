"""Outputs that are safe to write: no result is written into a device, FIFO,
folder or kernel file; two live runs never share a result file or a file being resumed; a
failed write keeps the last whole checkpoint; SIGTERM stops a run as Ctrl-C does; resume
keeps only records whose numbers are usable, and a file without the run's settings only
when told."""

from __future__ import annotations

import errno
import json
import math
import os
import pathlib
import re
import stat
import subprocess
from pathlib import Path

import pytest

import PersonalWAB.results as results
from PersonalWAB.errors import DataError
from PersonalWAB.results import CheckpointWriteError, ResultWriter, load_result_file, read_run_file
from PersonalWAB.runner.cli import main
from PersonalWAB.scratch import RunLock, atomic_write_text
from tests.personalwab.test_results import record


def cli(data_dir, output, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), *extra]


def printed_command(text: str) -> list[str]:
    """The run.py arguments of the resume command a stopped run printed."""
    line = next(line for line in text.splitlines() if "python run.py" in line)
    words = line.split()
    return words[words.index("run.py") + 1:]


@pytest.fixture()
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


# -- where a result may be written -----------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--out", "--resume_from"])
@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "proc"])
def test_a_target_that_is_not_a_regular_file_is_refused(flag, kind, tiny_data_dir, fifo, tmp_path, capsys):
    target, reason = {"device": ("/dev/null", "is a device"), "fifo": (fifo, "is a FIFO"),
                      "folder": (tmp_path, "is a folder"),
                      "proc": ("/proc/self/status", "is a kernel file under /proc")}[kind]
    assert main(["--data_dir", str(tiny_data_dir), flag, str(target)]) == 2
    assert f"{flag} {target}: {reason}" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_an_atomic_write_never_replaces_a_fifo_or_device(fifo):
    with pytest.raises(DataError, match="is a FIFO"):
        atomic_write_text(fifo, "[]")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(DataError, match="is a device"):
        atomic_write_text(Path("/dev/null"), "[]")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


# -- one live run per file ---------------------------------------------------------------------------

def test_a_second_writer_is_refused_with_the_first_ones_pid(tmp_path):
    path = tmp_path / "r.json"
    first = ResultWriter(path, {"seed": 1})
    first.start()
    with pytest.raises(DataError, match=rf"in use by another run \(pid {os.getpid()}, lock .*r\.json\.lock\)"):
        ResultWriter(path, {"seed": 2}).start(replace=True)
    assert read_run_file(path).run_args == {"seed": 1}
    first.release()
    assert not (tmp_path / "r.json.lock").exists()
    second = ResultWriter(path, {"seed": 2})
    second.start(replace=True)
    assert read_run_file(path).run_args == {"seed": 2}
    second.release()


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    path = tmp_path / "r.json"
    (tmp_path / "r.json.lock").write_text(f"{gone.pid}\n")  # its holder died without removing it
    writer = ResultWriter(path, {"seed": 1})
    writer.start()
    assert (tmp_path / "r.json.lock").read_text() == f"{os.getpid()}\n"
    writer.release()


@pytest.mark.parametrize("in_place", [True, False])
def test_a_run_sharing_a_file_with_a_live_run_is_refused(in_place, tiny_data_dir, tiny_engines, tmp_path, capsys):
    checkpoint = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, checkpoint, "--end_index", "3")) == 0
    before = checkpoint.read_bytes()
    other = tmp_path / "other.json"
    live = RunLock(checkpoint)  # as the live run holds it
    live.acquire()
    try:
        extra = [] if in_place else ["--out", str(other)]
        code = main(["--data_dir", str(tiny_data_dir), "--end_index", "3", "--resume_from", str(checkpoint), *extra])
    finally:
        live.release()
    assert code == 2 and f"in use by another run (pid {os.getpid()}" in capsys.readouterr().err
    assert checkpoint.read_bytes() == before and not other.exists()
    assert not (tmp_path / "other.json.lock").exists()


# -- a write that fails --------------------------------------------------------------------------------

def test_a_full_disk_keeps_the_last_whole_checkpoint_and_no_scratch(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    writer = ResultWriter(path, {"seed": 1}, flush_interval_s=0.0)
    writer.start()
    writer.add(record(0, "search", [1], [0.5]))
    writer.add(record(1, "search", [0], [0.0]))
    write_bytes = pathlib.Path.write_bytes

    def disk_full(self, data):
        write_bytes(self, data[: len(data) // 2])  # part of it reached the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pathlib.Path, "write_bytes", disk_full)
    with pytest.raises(CheckpointWriteError, match=r"No space left on device.*last whole checkpoint \(2 finished"):
        writer.add(record(2, "search", [1], [1.0]))
    with pytest.raises(CheckpointWriteError):
        writer.finalize()
    monkeypatch.undo()
    assert [r["task_id"] for r in read_run_file(path).records] == [0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.json.lock"]
    writer.release()


def test_a_run_whose_writes_fail_prints_the_resume_command(tiny_data_dir, tiny_engines, tmp_path, monkeypatch,
                                                            capsys):
    write = results._atomic_write_json
    calls = []

    def full_after_the_claim(path, content, exclusive=False):
        calls.append(path)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write(path, content, exclusive)

    monkeypatch.setattr(results, "_atomic_write_json", full_after_the_claim)
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "4")) == 1
    error = capsys.readouterr().err
    assert f"cannot write {output} (No space left on device); it keeps its last whole checkpoint" in error
    assert re.search(r"stopped: \d of 4 task\(s\) finished, 0 of them kept", error) and "Traceback" not in error
    assert error.count("No space left on device") == 1
    assert read_run_file(output).checkpoint is not None and not (tmp_path / "r.json.lock").exists()
    monkeypatch.undo()
    assert main(printed_command(error)) == 0
    assert [r["task_id"] for r in load_result_file(output)[1]] == [0, 1, 2, 3]


# -- what a resume keeps ----------------------------------------------------------------------------------

def test_resume_leaves_out_records_with_unusable_numbers(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "4")) == 0
    content = json.loads(output.read_text())
    content[0] = {"run_args": content[0]["run_args"], "unfinished": True}
    content[1]["res_acc"] = [math.nan] * len(content[1]["res_acc"])
    content[2]["action_acc"] = content[2]["action_acc"] + [1]
    content[3]["res_acc"] = [1.5] * len(content[3]["res_acc"])
    output.write_text(json.dumps(content))  # NaN written as the standard encoder writes it
    capsys.readouterr()
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(output)]) == 0
    printed = capsys.readouterr().out
    for task_id, problem in ((0, "res_acc[0] = nan is not a number in [0, 1]"), (1, "action_acc has"),
                             (2, "res_acc[0] = 1.5 is not a number in [0, 1]")):
        assert f"{output}: task {task_id} trial 0 not kept ({problem}" in printed
    _, records = load_result_file(output)
    assert [r["task_id"] for r in records] == [0, 1, 2, 3]
    assert all(0 <= value <= 1 for r in records for value in r["res_acc"])


def test_a_headerless_file_is_resumed_only_when_told(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "r.json"
    assert main(cli(tiny_data_dir, output, "--end_index", "4")) == 0
    _, records = load_result_file(output)
    output.write_text(json.dumps(records[:2]))
    before = output.read_bytes()
    capsys.readouterr()
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(output)]) == 2
    assert "task records without the run's settings" in capsys.readouterr().err
    assert output.read_bytes() == before
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(output),
                 "--resume_headerless"]) == 0
    assert [r["task_id"] for r in load_result_file(output)[1]] == [0, 1, 2, 3]
