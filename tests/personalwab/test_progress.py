"""Progress a person can follow in a log as on a terminal: bars become lines when stderr is
not a terminal, `--quiet` silences them, a one-time build is announced before it starts, and a
run shows the first error of each kind and its format errors."""

from __future__ import annotations

import pytest

from PersonalWAB.progress import RunProgress, announce_build, duration_text, progress_bar, set_quiet, stage
from PersonalWAB.results import read_run_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply


@pytest.fixture(autouse=True)
def loud():
    set_quiet(False)
    yield
    set_quiet(False)


def test_a_bar_writes_whole_lines_when_stderr_is_not_a_terminal(capsys):
    with progress_bar(total=3, desc="things", unit="thing") as bar:
        for _ in range(3):
            bar.update(1)
    with stage("an opaque step"):
        pass
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith("\n")
    lines = err.splitlines()
    assert lines[0].startswith("things:   0% 0/3") and any(line.startswith("things: 100% 3/3") for line in lines)
    assert lines[-1].startswith("an opaque step: 00:0")


def test_the_run_bar_keeps_its_numbers_on_one_line(capsys):
    with RunProgress(total=2, kept=[]) as progress:
        progress.update({"action_acc": [1.0], "res_acc": [1.0], "info": {}})
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("tasks: ") and "Function Acc 1.000, Result Acc 1.000" in lines[-1]


def test_quiet_shows_no_progress(capsys):
    set_quiet(True)
    with progress_bar(total=2, desc="things") as bar:
        bar.update(2)
    with stage("an opaque step"):
        pass
    assert capsys.readouterr().err == ""


def test_a_build_is_announced_with_its_size_estimate_and_command(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    said: list[str] = []
    announce_build("the lucene search index", 38_000, "products", 3800.0, "pwab build --data_dir d", said.append)
    announce_build("a quick thing", 10, "items", 3800.0, "pwab build --data_dir d", said.append)  # under 5 s
    assert said == ["one-time build: the lucene search index, 38,000 products, about 10 s on this machine's 2 idle "
                    "CPU cores (more when they are busy); kept for later runs; to build it ahead: "
                    "pwab build --data_dir d"]


def test_durations_read_at_a_glance():
    assert [duration_text(s) for s in (0.2, 42, 2700, 9000)] == ["1 s", "42 s", "45 min", "2.5 h"]


def test_a_long_encoding_says_the_time_left_at_its_first_chunk_pace(capsys):
    import numpy as np

    from PersonalWAB.memory.embeddings import CHUNK, PACE_CHUNKS, encode_sorted

    class ZeroEncoder:
        def encode(self, texts):
            return np.zeros((len(texts), 384), dtype=np.float32)

    texts = [f"behaviour {i} " * (1 + i % 7) for i in range(PACE_CHUNKS * CHUNK + 1)]
    encode_sorted(ZeroEncoder(), texts, "things", progress=False, prebuild="pwab build --data_dir d")
    encode_sorted(ZeroEncoder(), texts[:CHUNK], "few things", progress=False, prebuild="pwab build --data_dir d")
    lines = [line for line in capsys.readouterr().out.splitlines() if " left at the pace of " in line]
    assert len(lines) == 1 and lines[0].startswith("embedding things: about ")
    assert lines[0].endswith(f"left at the pace of its first {CHUNK} texts on this machine")


# -- what a run shows: the first error of each kind, format errors -------------------------------

def test_first_error_of_each_kind_is_logged_once_without_verbose(tiny_data_dir, tiny_engines, tmp_path):
    lines: list[str] = []
    with ScriptedLLMServer([ScriptedReply(status=500, content="overloaded")]) as server:
        config = RunConfig(data_dir=str(tiny_data_dir), out=str(tmp_path / "r.json"), end_index=4,
                           agent_strategy="function_calling", model="scripted", api_base=server.url,
                           agent_memory="none", max_retries=0)
        header, _, _ = run(config, log=lines.append)
    first = [line for line in lines if "first of its kind" in line]
    assert len(first) == 1 and "overloaded" in first[0] and "task 0" in first[0]
    assert header["results"]["overall"]["total_count"] == 4


def test_format_errors_show_in_the_live_bar(format_error_run):
    code, output = format_error_run
    assert code == 0
    records = read_run_file(output).records
    assert all("format_error" in r["info"] for r in records) and len(records) == 3
    bar = RunProgress(3, records)
    assert "format errors 3" in bar.postfix()
    bar.close()
