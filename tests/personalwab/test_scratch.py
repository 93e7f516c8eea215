"""Scratch files and the one writer every command's outputs go through (`PersonalWAB.scratch`):
never replaces a FIFO or a device, refuses a name too long for its scratch file before writing
anything, names the target on a full disk, its lock says what is wrong with a lock path that is no
file, and the scratch a killed run left behind is removed."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from pathlib import Path

import pytest

from PersonalWAB.outputs import output_problem
from PersonalWAB.data.layout import write_atomic
from PersonalWAB.errors import DataError
from PersonalWAB.memory.interec import write_memory_file
from PersonalWAB.protocol.pack import write_pack
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from PersonalWAB.scratch import SCRATCH_NAME_OVERHEAD, RunLock, atomic_write_bytes, atomic_write_text
from PUMA.modeling import write_json
from PUMA.recipe import write_record
from tests.conftest import make_fifo


WRITERS = {
    "layout.write_atomic (data synthetic, construct)": lambda p: write_atomic(p, b"{}"),
    "protocol pack (data protocol --out)": lambda p: write_pack({}, p),
    "PUMA write_json (PUMA.data, PUMA.score)": lambda p: write_json(p, {}),
    "interec memory file (init_interecagent_memory --out)": lambda p: write_memory_file(p, {}),
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_refuses_a_fifo_and_leaves_it(tmp_path: Path, writer: str) -> None:
    fifo = make_fifo(tmp_path)
    with pytest.raises(DataError, match="is a FIFO"):
        WRITERS[writer](fifo)
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_puma_step_record_beside_a_fifo_is_refused(tmp_path: Path) -> None:
    from PUMA.recipe import get_recipe, record_path

    output = tmp_path / "scores.json"
    os.mkfifo(record_path(output))
    with pytest.raises(DataError, match="is a FIFO"):
        write_record(output, "score", get_recipe("release"), {})
    assert record_path(output).is_fifo()


def test_a_name_too_long_for_its_scratch_file_is_refused_before_writing(tmp_path: Path) -> None:
    target = tmp_path / ("r" * 236 + ".json")  # 241 characters: fits alone, not with its scratch suffix
    problem = output_problem(target, "--out")
    assert problem is not None and "241 bytes" in problem and f"at most {255 - SCRATCH_NAME_OVERHEAD}" in problem
    with pytest.raises(DataError, match="241 bytes"):
        atomic_write_text(target, "{}", exclusive=True)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_names_the_target_and_leaves_no_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "result.json"
    target.write_text("old")

    def full(self: Path, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError) as raised:
        atomic_write_bytes(target, b"new")
    assert raised.value.filename == str(target) and raised.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_exclusive_write_leaves_nothing_when_the_scratch_write_fails(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self: Path, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError):
        atomic_write_bytes(tmp_path / "result.json", b"header", exclusive=True)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []  # no header left behind to block a re-run


def test_a_lock_that_is_a_fifo_is_named(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    make_fifo(tmp_path, "result.json.lock")
    with pytest.raises(DataError, match=r"result\.json\.lock: is a FIFO \(named pipe\), not the lock file of"):
        RunLock(target).acquire()


def test_a_lock_that_cannot_be_written_is_removed_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "result.json"

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as raised:
        RunLock(target).acquire()
    monkeypatch.undo()
    assert raised.value.filename == str(target) + ".lock" and "cannot write the lock" in str(raised.value)
    assert not (tmp_path / "result.json.lock").exists()


def quiet(_: str) -> None:
    pass


def test_stale_scratch_of_killed_runs_is_removed(tiny_data_dir, tiny_engines, tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale_file = tmp_path / f".r.json.{gone.pid}.tmp"
    stale_file.write_text("[")
    live_file = tmp_path / f".other.json.{os.getpid()}.tmp"
    live_file.write_text("[")
    stale_index = tiny_data_dir / "indexes" / "lucene" / f".0123abcd-4567ef.{gone.pid}.build-x1y2"
    (stale_index / "collection").mkdir(parents=True)
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(tmp_path / "r.json"), end_index=3), log=quiet)
    assert not stale_file.exists() and not stale_index.exists()
    assert live_file.exists()


def test_an_atomic_write_never_replaces_a_fifo_or_device(fifo):
    with pytest.raises(DataError, match="is a FIFO"):
        atomic_write_text(fifo, "[]")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(DataError, match="is a device"):
        atomic_write_text(Path("/dev/null"), "[]")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
