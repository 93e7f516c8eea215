"""Nothing slow or silent for a new user: unreachable model endpoints stop a
run at once, broken answers are named, the first error of each kind and the format errors are
shown, the leaderboard never mixes tracks or partial runs into one ranking, the construct smoke
--help shows each default once, the construct smoke reuses its cache and the suite runs
without root."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from PersonalWAB.errors import FatalError
from PersonalWAB.leaderboard.__main__ import main as leaderboard_main
from PersonalWAB.leaderboard.summarize import id_ranges, render_markdown, summarize_files, tables
from PersonalWAB.llm import LLMClient, LLMError
from PersonalWAB.progress import RunProgress
from PersonalWAB.results import read_run_file
from PersonalWAB.runner.cli import main
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from devtools.doubles.responders import tool_caller
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
from tests.conftest import HANG_GUARD_S, REPO_ROOT

HELLO = [{"role": "user", "content": "hello"}]


def quiet(_: str) -> None:
    """A log that shows nothing."""


def free_port() -> int:
    """A loopback port where nothing listens (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def llm_run(data_dir: Path, output: Path, api_base: str, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), "--agent_strategy", "function_calling",
            "--model", "scripted", "--api_base", api_base, "--agent_memory", "none", *extra]


class RawAnswer(BaseHTTPRequestHandler):
    """Answers every POST with HTTP 200 and the server's `body` bytes, whatever they are."""

    def log_message(self, *_: object) -> None:
        """Silent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = self.server.body  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def raw_server():
    """Start a loopback server answering a fixed body; stopped after the test."""
    servers = []

    def start(body: bytes) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), RawAnswer)
        server.daemon_threads = True
        server.body = body  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# -- unreachable endpoints, transport failures, unreadable answers -------------------------------

def test_endpoint_refusing_connections_stops_the_run_before_any_task(tiny_data_dir, tiny_engines, tmp_path,
                                                                      capsys):
    base = f"http://127.0.0.1:{free_port()}/v1"
    output = tmp_path / "r.json"
    code = main(llm_run(tiny_data_dir, output, base, "--end_index", "6"))
    error = capsys.readouterr().err
    assert code == 1
    assert f"model endpoint {base} refuses connections" in error and "Nothing was retried" in error
    assert read_run_file(output).records == []  # no task recorded as tried


def test_endpoint_that_does_not_resolve_is_fatal_at_once():
    client = LLMClient("scripted", api_base="http://no-such-host.invalid/v1", max_retries=5, timeout_s=10)
    with pytest.raises(FatalError) as caught:
        client.complete(HELLO)
    assert "model endpoint http://no-such-host.invalid/v1 does not resolve" in str(caught.value)


def test_transport_failures_in_a_row_stop_the_run_resumably(tiny_data_dir, tiny_engines, tmp_path, capsys):
    answered = []

    def answer_twice_then_vanish(request: dict) -> ScriptedReply:
        answered.append(request)
        if len(answered) <= 2:
            return tool_caller(request)
        threading.Thread(target=server.stop, daemon=True).start()  # cut this request, refuse the next ones
        return ScriptedReply(content="never delivered", delay_s=2.0)

    output = tmp_path / "r.json"
    with ScriptedLLMServer(answer_twice_then_vanish) as server:
        code = main(llm_run(tiny_data_dir, output, server.url, "--end_index", "12", "--max_retries", "0"))
    error = capsys.readouterr().err
    assert code == 1
    assert f"model endpoint {server.url}" in error and "5 requests in a row failed" in error
    assert "--resume_from" in error
    records = read_run_file(output).records
    assert len(records) == 6  # 2 finished, then 4 errored before the 5th failure stopped the run
    assert sum("error" not in r["info"] for r in records) == 2


def test_server_gone_after_answering_is_retried_not_fatal():
    with ScriptedLLMServer([ScriptedReply(content="hi")]) as server:
        client = LLMClient("scripted", api_base=server.url, max_retries=1, backoff_s=0.001)
        client.complete(HELLO)
    with pytest.raises(LLMError) as caught:
        client.complete(HELLO)
    assert not isinstance(caught.value, FatalError) and "2 attempt(s)" in str(caught.value)


@pytest.mark.parametrize("body, problem", [
    (b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}', "no choices"),
    (b'{"id": "x", "object": "chat.completion", "choi', "not valid JSON"),
])
def test_unreadable_answer_is_a_transport_error_naming_the_endpoint(raw_server, body, problem):
    base = raw_server(body)
    with pytest.raises(LLMError) as caught:
        LLMClient("scripted", api_base=base, max_retries=1, backoff_s=0.001).complete(HELLO)
    text = str(caught.value)
    assert f"model endpoint {base}" in text and problem in text and "2 attempt(s)" in text
    assert "HTTP 500" not in text and not isinstance(caught.value, FatalError)


@pytest.mark.parametrize("flag, value", [("--api_base", "localhost:8000"), ("--api_base", "ftp://host/v1"),
                                         ("--api_base", "http://"), ("--user_api_base", "127.0.0.1:8000/v1")])
def test_api_base_must_be_an_http_url(tiny_data_dir, tmp_path, capsys, flag, value):
    output = tmp_path / "r.json"
    extra = ["--max_steps", "3", "--user_mode", "naive", "--user_model", "u"] if flag == "--user_api_base" else []
    argv = llm_run(tiny_data_dir, output, "http://127.0.0.1:1/v1", *extra, flag, value)
    assert main(argv) == 2
    assert f"{flag} {value!r}: must be an http:// or https:// URL" in capsys.readouterr().err
    assert not output.exists()


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


@pytest.fixture(scope="module")
def format_error_run(tiny_data_dir, tiny_engines, tmp_path_factory):
    """A run whose model always sends tool arguments that are not a JSON object (3 tasks)."""
    output = tmp_path_factory.mktemp("format") / "r.json"
    with ScriptedLLMServer([ScriptedReply(tool_calls=[("search_product_by_query", "[1, 2]")])]) as server:
        code = main(llm_run(tiny_data_dir, output, server.url, "--end_index", "3"))
    return code, output


def test_format_errors_show_in_the_live_bar(format_error_run):
    code, output = format_error_run
    assert code == 0
    records = read_run_file(output).records
    assert all("format_error" in r["info"] for r in records) and len(records) == 3
    bar = RunProgress(3, records)
    assert "format errors 3" in bar.postfix()
    bar.close()


def test_run_summary_names_the_format_errors(tiny_data_dir, tiny_engines, tmp_path, capsys):
    with ScriptedLLMServer([ScriptedReply(tool_calls=[("search_product_by_query", '{"query": "unterm')])]) as server:
        assert main(llm_run(tiny_data_dir, tmp_path / "r.json", server.url, "--end_index", "2")) == 0
    shown = capsys.readouterr()
    assert "format errors: 2 of 2 task(s)" in shown.out
    assert "loading the model client (litellm)" in shown.err  # the seconds before the first request, shown


def test_validate_and_summarize_count_format_errors(format_error_run, capsys):
    _, output = format_error_run
    capsys.readouterr()
    leaderboard_main(["validate", str(output)])
    assert "3 format errors" in capsys.readouterr().out
    leaderboard_main(["summarize", str(output)])
    table = capsys.readouterr().out
    head = next(line for line in table.splitlines() if line.startswith("| #"))
    row = next(line for line in table.splitlines() if line.startswith("| 1 "))
    cells, names = [c.strip() for c in row.split("|")], [c.strip() for c in head.split("|")]
    assert cells[names.index("Format errors")] == "3"


def test_old_records_without_format_errors_still_validate(tiny_data_dir, tiny_engines, tmp_path, capsys):
    output = tmp_path / "old.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(output), end_index=2), log=quiet)
    capsys.readouterr()
    assert leaderboard_main(["validate", str(output)]) == 0
    assert "VALID (0 errors" in capsys.readouterr().out


# -- the leaderboard: partial runs apart, tracks apart --------------------------------------------

def test_summarize_never_ranks_a_partial_run_with_whole_split_runs(tiny_data_dir, tiny_engines, tmp_path):
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(whole), agent_memory="none"), log=quiet)
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(part), end_index=5), log=quiet)
    rows, _ = summarize_files([whole, part])
    grouped = tables(rows)
    assert len(grouped) == 2
    (whole_title, whole_rows), (part_title, part_rows) = grouped
    assert [r.path for r in whole_rows] == [whole] and [r.path for r in part_rows] == [part]
    assert "partial" not in whole_title and "tasks 0-4 only" in part_title
    assert "ranked only against runs of the same tasks" in render_markdown(rows)
    from PersonalWAB.leaderboard.validate import validate_file

    assert any("partial split: tasks 0-4 of the test split" in line for line in validate_file(part).lines())
    content = json.loads(part.read_text())
    content[0]["run_args"]["end_index"] = True  # read as 1 it would pass for a run of the whole split
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(content))
    report = validate_file(edited)
    assert not report.valid and any("run_args.end_index True is not a task index" in p.message
                                    for p in report.problems)


def test_the_start_line_counts_tasks_and_trials_apart(tiny_data_dir, tiny_engines, tmp_path):
    said: list[str] = []
    run(RunConfig(data_dir=str(tiny_data_dir), out=str(tmp_path / "r.json"), end_index=3, num_trials=2,
                  agent_memory="none"), log=said.append)
    assert any(line.startswith("running 3 task(s) x 2 trials (6 task runs) of the test split") for line in said)


def test_task_id_ranges_are_exact():
    assert id_ranges([3, 0, 1, 2, 7, 9, 8, 12]) == "0-3,7-9,12"
    assert id_ranges([5, 5]) == "5"


# -- the construct smoke twice on one OUT; the suite without root ---------------------------------

@pytest.mark.slow
def test_construct_smoke_runs_twice_on_one_out_and_the_second_calls_no_model(tmp_path):
    env = {**os.environ, "SMOKE_SCALE": "tiny", "SMOKE_USERS": "12"}  # the script's smaller world
    runs = [subprocess.run(["bash", "scripts/construct_smoke.sh", str(tmp_path / "smoke")], cwd=REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=HANG_GUARD_S) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], runs[-1].stderr[-2000:]
    assert "scripted model server stopped after 0 request(s)" in runs[1].stdout
    assert "stopped after 0 request(s)" not in runs[0].stdout
