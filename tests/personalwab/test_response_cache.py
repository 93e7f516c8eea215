"""The response cache: a rerun with `--cache` sends nothing and writes the records the first run
wrote; trials still sample on their own; the store survives concurrent processes and SIGKILL."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
from pathlib import Path

import pytest

from PersonalWAB.errors import DataError
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.llm import LLMClient
from PersonalWAB.response_cache import ResponseCache, cache_folder, task_scope
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main
from devtools.doubles.responders import conversation, instruction_of, is_agent_request, sensible_call
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply

TASKS = 4
HELLO = [{"role": "user", "content": "hello"}]
CACHE_FIELDS = ("cache_hits", "cache_saved_usd")


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("PWAB_CACHE", raising=False)


def sampler():
    """Above temperature 0 a seeded draw picks one of several search queries, so every sample
    differs from the last; a served-from-cache answer shows up as a repeat."""
    draws = random.Random(5)

    def reply(request: dict) -> ScriptedReply:
        name, arguments = sensible_call(instruction_of(request))
        if request["temperature"] > 0 and "query" in arguments:
            arguments = {"query": f"{arguments['query']} #{draws.randrange(10**9)}"}
        return ScriptedReply(tool_calls=[(name, json.dumps(arguments))])

    return reply


def run(server: ScriptedLLMServer, data_dir: Path, out: Path, *extra: str) -> int:
    return main(["--agent_strategy", "function_calling", "--model", "gpt-4o-mini", "--api_base", server.url,
                 "--data_dir", str(data_dir), "--end_index", str(TASKS), "--agent_memory", "none",
                 "--temperature", "1", "--num_trials", "2", "--out", str(out), *extra])


def without_cache_fields(records: list[dict]) -> list[dict]:
    return [{**r, "info": {k: v for k, v in r["info"].items() if k not in CACHE_FIELDS}} for r in records]


def test_a_rerun_sends_nothing_and_writes_the_same_records(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    with ScriptedLLMServer(sampler()) as server:
        assert run(server, tiny_data_dir, tmp_path / "first.json", "--cache", str(cache)) == 0
        sent = len(server.requests)
        monkeypatch.setenv("PWAB_CACHE", str(cache))  # the environment variable names the same cache
        assert run(server, tiny_data_dir, tmp_path / "second.json") == 0
        assert len(server.requests) == sent  # the rerun sent nothing
    first_header, first = load_result_file(tmp_path / "first.json")
    second_header, second = load_result_file(tmp_path / "second.json")
    assert without_cache_fields(second) == without_cache_fields(first)
    assert first_header["cache"] == {"hits": 0, "saved_usd": 0.0}
    assert second_header["cache"]["hits"] == sent
    assert second_header["cache"]["saved_usd"] == pytest.approx(first_header["total cost"])
    assert second_header["total cost"] == first_header["total cost"]  # the record says what the calls cost
    assert sum(r["info"]["cache_hits"] for r in second) == sent
    assert validate_file(tmp_path / "second.json").valid


def test_trials_at_temperature_1_are_not_served_from_one_another(tiny_data_dir, tiny_engines, tmp_path):
    with ScriptedLLMServer(sampler()) as server:
        assert run(server, tiny_data_dir, tmp_path / "run.json", "--cache", str(tmp_path / "cache")) == 0
        sent = len(server.requests)
    _, records = load_result_file(tmp_path / "run.json")
    assert sent == 2 * TASKS  # each trial of each task asked the model itself
    assert all(r["info"]["cache_hits"] == 0 for r in records)
    searches = {}
    for record in records:
        for action in record["info"]["actions"]:
            if action["name"] == "search_product_by_query":
                searches.setdefault(record["task_id"], set()).add(action["arguments"]["query"])
    assert searches and all(len(queries) == 2 for queries in searches.values())  # two samples, two answers


def test_a_repeated_request_in_a_task_is_asked_again_and_replayed_in_order(tmp_path):
    replies = [ScriptedReply(content="first"), ScriptedReply(content="second")]
    cache = ResponseCache(tmp_path)
    with ScriptedLLMServer(replies) as server:
        client = LLMClient("scripted-model", api_base=server.url, temperature=1.0)
        for _ in range(2):
            with task_scope(cache, trial=0, task_id=3) as scope:
                answers = [client.complete(HELLO).message["content"] for _ in range(2)]
            assert answers == ["first", "second"]
        assert len(server.requests) == 2 and scope is not None and scope.hits == 2
        with task_scope(cache, trial=1, task_id=3):
            client.complete(HELLO)  # another trial samples for itself
        with task_scope(cache, trial=0, task_id=3):
            client.complete(HELLO, max_tokens=5)  # another sampling setting is another request
        assert len(server.requests) == 4


def test_errors_are_not_cached_and_calls_outside_a_task_are_not(tmp_path):
    cache = ResponseCache(tmp_path)
    with ScriptedLLMServer([ScriptedReply(status=503), ScriptedReply(content="ok")]) as server:
        client = LLMClient("scripted-model", api_base=server.url, max_retries=0)
        with task_scope(cache, trial=0, task_id=0), pytest.raises(Exception, match="HTTP 503"):
            client.complete(HELLO)
        assert len(cache) == 0
        client.complete(HELLO)
        assert len(cache) == 0
        with task_scope(cache, trial=0, task_id=0):
            assert client.complete(HELLO).message["content"] == "ok"
        assert len(cache) == 1


def _write_entries(folder: str, start: int) -> None:
    cache = ResponseCache(folder)
    for i in range(start, start + 40):
        cache.put(f"key-{i}", {"message": {"role": "assistant", "content": str(i)}})


def _write_then_die(folder: str) -> None:
    ResponseCache(folder).put("kept", {"message": {"content": "paid for"}})
    os.kill(os.getpid(), signal.SIGKILL)


def test_processes_share_the_store_and_a_kill_loses_nothing_committed(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_entries, args=(str(tmp_path), 40 * n)) for n in range(3)]
    killed = context.Process(target=_write_then_die, args=(str(tmp_path),))
    for process in (*writers, killed):
        process.start()
    for process in (*writers, killed):
        process.join(60)
    assert killed.exitcode == -signal.SIGKILL and all(p.exitcode == 0 for p in writers)
    cache = ResponseCache(tmp_path)
    assert len(cache) == 121
    assert cache.get("kept") == {"message": {"content": "paid for"}}
    assert cache.get("key-119") == {"message": {"role": "assistant", "content": "119"}}


def test_the_cache_folder_comes_from_the_setting_the_environment_or_the_default(tmp_path, monkeypatch):
    assert cache_folder(None) is None
    assert cache_folder(None, tmp_path) == tmp_path
    assert cache_folder("off", tmp_path) is None
    monkeypatch.setenv("PWAB_CACHE", str(tmp_path / "env"))
    assert cache_folder(None, tmp_path) == tmp_path / "env"
    assert cache_folder(str(tmp_path / "flag")) == tmp_path / "flag"


def test_a_cache_that_is_not_a_folder_or_not_a_cache_is_refused(tiny_data_dir, tmp_path, capsys):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "1", "--cache", str(not_a_folder),
                 "--out", str(tmp_path / "run.json")]) == 2
    assert f"response cache {not_a_folder}: not a folder" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "responses.sqlite3").write_text("not a database, but long enough to be read as one" * 40)
    with pytest.raises(DataError, match="responses.sqlite3: cannot be used"):
        ResponseCache(broken)


def test_a_multi_turn_rerun_replays_the_agent_the_user_and_the_reflections(tiny_data_dir, tiny_engines, tmp_path):
    def multi_turn(out: Path) -> int:
        return main(["--agent_strategy", "react_reflect", "--model", "gpt-4o-mini", "--api_base", server.url,
                     "--user_mode", "naive", "--user_model", "gpt-4o-mini", "--user_api_base", server.url,
                     "--max_steps", "5", "--data_dir", str(tiny_data_dir), "--end_index", "3",
                     "--agent_memory", "none", "--cache", str(tmp_path / "cache"), "--out", str(out)])

    with ScriptedLLMServer(conversation) as server:
        assert multi_turn(tmp_path / "first.json") == 0
        sent = list(server.requests)
        assert multi_turn(tmp_path / "second.json") == 0
        assert len(server.requests) == len(sent)
    assert any(not is_agent_request(r) for r in sent)  # the LLM user was asked
    assert any(all(m["role"] == "system" for m in r["messages"]) for r in sent)  # and reflections written
    first_header, first = load_result_file(tmp_path / "first.json")
    second_header, second = load_result_file(tmp_path / "second.json")
    assert without_cache_fields(second) == without_cache_fields(first)
    assert second_header["cache"]["hits"] == len(sent) and second_header["total user cost"] > 0
    assert second_header["total user cost"] == first_header["total user cost"]


def _filled(folder: Path, entries: int = 3000) -> Path:
    cache = ResponseCache(folder)
    for i in range(entries):
        cache.put(f"k{i}", {"message": {"content": "x" * 200}, "i": i})
    cache._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every answer in the main file
    return cache.path


def test_a_damaged_cache_is_named_with_the_ways_on_before_any_task_runs(tiny_data_dir, tmp_path, capsys):
    path = _filled(tmp_path / "cache")
    damaged = bytearray(path.read_bytes())
    damaged[4096 * 20:4096 * 21] = b"A" * 4096  # one page overwritten (a disk fault, a copy cut short)
    path.write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=f"response cache {path}: cannot be used .*run with --cache off, or move "
                                        "the file away"):
        ResponseCache(tmp_path / "cache")
    out = tmp_path / "run.json"
    assert main(["--data_dir", str(tiny_data_dir), "--end_index", "1", "--agent_memory", "none", "--cache",
                 str(tmp_path / "cache"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: response cache {path}: cannot be used" in err and "--cache off" in err
    assert "no result file was written" in err and not out.exists()


def test_an_entry_that_is_not_an_answer_is_asked_again_and_replaced_with_one_warning(tmp_path):
    warned: list[str] = []
    path = _filled(tmp_path, entries=3)
    cache = ResponseCache(tmp_path, warn=warned.append)
    for key, text in (("k0", "not json"), ("k1", "[1, 2]")):
        cache._connection().execute("UPDATE replies SET reply = ? WHERE key = ?", (text, key))
    assert cache.get("k0") is None and cache.get("k1") is None and cache.get("k2")["i"] == 2
    assert len(warned) == 1 and str(path) in warned[0] and "asked again and the entry replaced" in warned[0]
    cache.put("k0", {"message": {"content": "asked again"}})
    cache.put("k2", {"message": {"content": "not kept: the first answer stays"}})
    assert cache.get("k0") == {"message": {"content": "asked again"}} and cache.get("k2")["i"] == 2


def test_a_run_whose_cache_holds_unreadable_entries_runs_every_task(tiny_data_dir, tiny_engines, tmp_path, capsys):
    with ScriptedLLMServer(sampler()) as server:
        assert run(server, tiny_data_dir, tmp_path / "first.json", "--cache", str(tmp_path / "cache")) == 0
        cache = ResponseCache(tmp_path / "cache")
        cache._connection().execute("UPDATE replies SET reply = 'garbage'")
        sent = len(server.requests)
        assert run(server, tiny_data_dir, tmp_path / "second.json", "--cache", str(tmp_path / "cache")) == 0
        assert len(server.requests) == 2 * sent  # every call asked again, none failed
    printed = capsys.readouterr()
    assert (printed.out + printed.err).count("is not a JSON answer") == 1
    assert all(not record["info"].get("error") for record in load_result_file(tmp_path / "second.json")[1])
