"""Result files (`PersonalWAB.results`): reading, checkpointing, the header and what resume
compares; one live run per file (its lock), and a write that fails keeps the last whole checkpoint
and says how to resume."""

import errno
import json
import os
import pathlib
import re
import subprocess
import time
from pathlib import Path

import pytest

import PersonalWAB.results as results
from PersonalWAB.errors import DataError
from PersonalWAB.metrics import compute_statistics, format_statistics_table, task_score
from PersonalWAB.results import (
    CheckpointWriteError,
    ResultWriter,
    load_result_file,
    read_run_file,
    resume_mismatches,
)
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig, run_resume_keys
from PersonalWAB.runner.execute import run
from PersonalWAB.scratch import RunLock
from tests.conftest import HANG_GUARD_S, interrupt_heuristic_agent_at


def record(task_id, kind, action_acc, res_acc, calls=1, trial=0, price=0.0):
    return {
        "task_id": task_id,
        "action_acc": action_acc,
        "res_acc": res_acc,
        "info": {
            "task": {"user_id": "U", "task": f"t{task_id}", "type": kind, "timestamp": 1, "target": "B0"},
            "actions": [],
            "user_cost": 0.0,
            "usage": {"completion_tokens": [0] * calls, "prompt_tokens": [0] * calls, "total_tokens": [0] * calls,
                      "completion_price": 0.0, "prompt_price": price, "total_price": price},
        },
        "traj": [],
        "trial": trial,
    }


def quiet(_: str) -> None:
    pass


def cli(data_dir, output, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), *extra]


def printed_command(text: str) -> list[str]:
    """The run.py arguments of the resume command a stopped run printed."""
    line = next(line for line in text.splitlines() if "python run.py" in line)
    words = line.split()
    return words[words.index("run.py") + 1:]


def test_task_score_takes_best_valid_attempt():
    assert task_score([0, 1, 1], [0.9, 0.2, 0.6]) == (1.0, 0.6)
    assert task_score([0, 0], [0.9, 0.8]) == (0.0, 0.0)
    assert task_score([], []) == (0.0, 0.0)


def test_statistics_per_type_and_overall():
    records = [
        record(0, "search", [1], [0.8], calls=1),
        record(1, "search", [0], [0.0], calls=3),
        record(2, "recommend", [1, 1], [0.1, 0.5], calls=2),
        record(3, "review", [], [], calls=0),
    ]
    stats = compute_statistics(records)
    assert stats["search"] == {"total_count": 2, "avg_interaction_times": 2.0, "avg_action_acc": 0.5,
                               "avg_res_acc": 0.4}
    assert stats["recommend"]["avg_res_acc"] == 0.5
    assert stats["review"]["avg_action_acc"] == 0.0
    assert stats["overall"]["total_count"] == 4
    assert stats["overall"]["avg_res_acc"] == pytest.approx((0.8 + 0.5) / 4)
    table = format_statistics_table(stats)
    assert "search" in table and "overall" in table


def test_writer_checkpoints_then_finalizes_sorted(tmp_path):
    path = tmp_path / "r.json"
    writer = ResultWriter(path, {"model": "m"}, flush_interval_s=0.0)
    writer.add(record(2, "search", [1], [1.0], price=0.5))
    writer.add(record(0, "review", [1], [0.5]))
    header, records = load_result_file(path)
    assert header is None and [r["task_id"] for r in records] == [2, 0]
    final = writer.finalize()
    header, records = load_result_file(path)
    assert header == final and [r["task_id"] for r in records] == [0, 2]
    assert header["total cost"] == 0.5
    assert header["results"]["overall"]["total_count"] == 2


def test_a_record_finished_inside_the_pause_is_written_when_it_ends(tmp_path):
    """The other tasks may wait minutes on a model: the finished one is on disk without them."""
    path = tmp_path / "r.json"
    writer = ResultWriter(path, {"model": "m"}, flush_interval_s=0.2)
    writer.start()
    writer.add(record(0, "search", [1], [1.0]))  # inside the first pause: not written yet
    deadline = time.monotonic() + HANG_GUARD_S
    while not load_result_file(path)[1]:
        assert time.monotonic() < deadline, "hung: the finished record was never written"
        time.sleep(0.05)
    assert [r["task_id"] for r in load_result_file(path)[1]] == [0]
    writer.add(record(1, "search", [1], [1.0]))
    final = writer.finalize()
    writer._flush_deferred()  # a checkpoint the pause had scheduled, firing late: it must not replace the file
    writer.release()
    assert load_result_file(path)[0] == final


def test_load_result_file_errors_name_the_problem(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"task_id": 0, "action_acc": [1]')
    with pytest.raises(DataError, match="bad.json: not valid JSON"):
        load_result_file(bad)
    bad.write_text("{}")
    with pytest.raises(DataError, match="JSON list"):
        load_result_file(bad)
    incomplete = record(5, "search", [1], [1.0])
    del incomplete["traj"]
    bad.write_text(json.dumps([incomplete]))
    with pytest.raises(DataError, match=r"element 0 \(task 5\): missing key 'traj'"):
        load_result_file(bad)
    with pytest.raises(DataError, match="not found"):
        load_result_file(tmp_path / "missing.json")


def test_resume_keys_are_compared_when_both_runs_record_them():
    keys = run_resume_keys()  # marked on the settings (and PUMA's own), plus what the runner derives
    assert {"task_split", "data_fingerprint", "agent_strategy", "model", "agent_memory", "max_steps",
            "start_index", "end_index", "protocol", "puma_param_file", "recipe", "mem_token_length"} <= set(keys)
    assert not {"verbose", "out", "max_concurrency", "log_dir", "resume_from"} & set(keys)
    assert resume_mismatches({"protocol": "release@23ff65c", "seed": 1}, {"protocol": "project", "seed": 1},
                             keys) == ["protocol: 'release@23ff65c' in the file, 'project' now"]
    assert resume_mismatches({"seed": 1}, {"seed": 1, "protocol": "project"}, keys) == []  # older files lack newer keys


def test_a_checkpoint_holds_its_run_args_and_a_claimed_name_is_never_reused(tmp_path):
    path = tmp_path / "r.json"
    first = ResultWriter(path, {"seed": 1})
    assert first.start(unique=True) == path
    second = ResultWriter(path, {"seed": 2})
    assert second.start(unique=True) == tmp_path / "r-2.json"
    assert read_run_file(path).run_args == {"seed": 1} and read_run_file(path).header is None
    with pytest.raises(DataError, match="already exists; pass --overwrite"):
        ResultWriter(path, {"seed": 3}).start()
    assert read_run_file(path).run_args == {"seed": 1}
    first.release()  # its run is over: the file may be replaced
    ResultWriter(path, {"seed": 3}).start(replace=True)
    assert read_run_file(path).run_args == {"seed": 3}


def test_a_name_is_claimed_whole_where_hard_links_are_refused(tmp_path, monkeypatch):
    from PersonalWAB import scratch

    def refuse(source, target):
        raise PermissionError(1, "Operation not permitted")  # what a FAT or FUSE mount answers

    monkeypatch.setattr(scratch.os, "link", refuse)
    path = tmp_path / "r.json"
    scratch.atomic_write_text(path, '{"a": 1}', exclusive=True)
    assert path.read_text() == '{"a": 1}'
    with pytest.raises(FileExistsError):
        scratch.atomic_write_text(path, '{"a": 2}', exclusive=True)
    assert path.read_text() == '{"a": 1}' and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_text_utf8_cannot_encode_is_checkpointed_as_a_json_escape(tmp_path):
    path = tmp_path / "r.json"
    broken = record(0, "review", [1], [0.5])
    broken["traj"] = [{"role": "assistant", "content": "half an emoji \ud83d"}]
    writer = ResultWriter(path, {"seed": 1}, flush_interval_s=0.0)
    writer.add(broken)
    writer.finalize()
    assert load_result_file(path)[1][0]["traj"] == broken["traj"]


def test_a_checkpoint_names_its_run(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    interrupt_heuristic_agent_at(monkeypatch, 2)
    output = tmp_path / "r.json"
    with pytest.raises(KeyboardInterrupt):
        run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=5), log=quiet)
    parsed = read_run_file(output)
    assert parsed.header is None and parsed.run_args["end_index"] == 5 and len(parsed.records) == 2
    assert parsed.run_args["data_fingerprint"]


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


@pytest.fixture(scope="module")
def finished(tiny_data_dir, tmp_path_factory) -> Path:
    """A finished run of four tasks with the project's texts."""
    output = tmp_path_factory.mktemp("labels") / "r.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=4), log=quiet)
    return output


# -- resume with other texts ---------------------------------------------------------------------

def test_resume_with_other_texts_is_refused_naming_both(finished, fake_pack, tiny_data_dir, tmp_path, capsys):
    before = finished.read_bytes()
    output = tmp_path / "other.json"
    code = main(["--data_dir", str(tiny_data_dir), "--end_index", "4", "--resume_from", str(finished),
                 "--out", str(output), "--protocol_file", str(fake_pack)])
    error = capsys.readouterr().err
    assert code == 2 and "protocol: 'project' (texts digest" in error and "'release@unpinned' (texts digest" in error
    assert finished.read_bytes() == before and not output.exists()


def test_texts_of_the_same_name_but_another_digest_differ():
    previous = {"protocol": {"texts": "release@unpinned"}, "protocol_texts_digest": "aaaa"}
    current = {"protocol": {"texts": "release@unpinned"}, "protocol_texts_digest": "bbbb"}
    assert resume_mismatches(previous, current, run_resume_keys()) == [
        "protocol: 'release@unpinned' (texts digest aaaa) in the file, 'release@unpinned' (texts digest bbbb) now"]
    older = {"protocol": {"texts": "release@unpinned"}}  # written before the digest was recorded
    assert resume_mismatches(older, current, run_resume_keys()) == []
