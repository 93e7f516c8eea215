"""LLMClient through real litellm against the scripted OpenAI-compatible server on 127.0.0.1; a
model endpoint that refuses connections, does not resolve, vanishes or answers unreadably is named,
and a run against it stops at once."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from PersonalWAB.errors import FatalError
from PersonalWAB.llm import (
    LLMClient,
    LLMError,
    LLMFatalError,
    failure_kind,
    load_litellm,
    missing_keys,
    provider_key,
    route_model,
)
from PersonalWAB.results import read_run_file
from PersonalWAB.runner.cli import main
from devtools.doubles.responders import tool_caller
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply, prompt_token_count
from tests.conftest import HANG_GUARD_S, REPO_ROOT, llm_run

SENTINEL = "sk-SENTINEL-DO-NOT-LEAK-123"
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_product_by_query",
        "description": "Search products.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see (or send) a real key from the developer's environment."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def client_for(server: ScriptedLLMServer, **kwargs) -> LLMClient:
    kwargs.setdefault("backoff_s", 0.001)
    kwargs.setdefault("max_retries", 3)
    return LLMClient(kwargs.pop("model", "scripted-model"), api_base=server.url, **kwargs)


def test_tool_call_round_trip_keeps_name_and_raw_arguments() -> None:
    arguments = '{"query": "red running shoes"}'
    with ScriptedLLMServer([ScriptedReply(tool_calls=[("search_product_by_query", arguments)])]) as server:
        reply = client_for(server).complete(HELLO, tools=[SEARCH_TOOL])
    (body,) = server.requests
    assert body["model"] == "scripted-model"
    assert body["messages"] == HELLO and body["tools"] == [SEARCH_TOOL]
    assert reply.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_product_by_query", "arguments": arguments},
            }
        ],
    }
    assert reply.prompt_tokens == prompt_token_count(body)


def test_plain_text_reply_and_server_usage() -> None:
    with ScriptedLLMServer([ScriptedReply(content="Hi there", prompt_tokens=123, completion_tokens=7)]) as server:
        reply = client_for(server).complete(HELLO)
    assert reply.message == {"role": "assistant", "content": "Hi there"}
    assert (reply.prompt_tokens, reply.completion_tokens) == (123, 7)


def test_malformed_tool_arguments_pass_through_unchanged() -> None:
    broken = '{"query": "shoes", '
    with ScriptedLLMServer([ScriptedReply(tool_calls=[("search_product_by_query", broken)])]) as server:
        reply = client_for(server).complete(HELLO, tools=[SEARCH_TOOL])
    assert reply.message["tool_calls"][0]["function"]["arguments"] == broken


def test_rate_limit_is_retried_honouring_retry_after_and_usage_counts_once(monkeypatch) -> None:
    waits: list[float] = []
    delay = LLMClient._delay

    def recorded_delay(self, exc, attempt):
        waits.append(delay(self, exc, attempt))
        return waits[-1]

    monkeypatch.setattr(LLMClient, "_delay", recorded_delay)
    script = [ScriptedReply(status=429), ScriptedReply(content="ok", prompt_tokens=10, completion_tokens=2)]
    with ScriptedLLMServer(script) as server:
        reply = client_for(server, backoff_s=5.0).complete(HELLO)
    assert reply.message["content"] == "ok"
    assert (reply.prompt_tokens, reply.completion_tokens) == (10, 2)
    assert len(server.requests) == 2
    assert waits == [0.0], "Retry-After: 0 should replace the 5 s backoff"


def test_persistent_server_error_gives_up_after_max_retries() -> None:
    with ScriptedLLMServer([ScriptedReply(status=500)]) as server, pytest.raises(LLMError) as caught:
        client_for(server, max_retries=2).complete(HELLO)
    assert len(server.requests) == 3
    assert caught.value.status_code == 500
    text = str(caught.value)
    assert "scripted-model" in text and "InternalServerError" in text and "HTTP 500" in text


def test_server_gone_after_answering_is_a_retried_connection_error() -> None:
    server = ScriptedLLMServer([ScriptedReply(content="once")]).start()
    client = LLMClient("scripted-model", api_base=server.url, max_retries=1, backoff_s=0.001, timeout_s=5)
    client.complete(HELLO)
    server.stop()
    with pytest.raises(LLMError) as caught:
        client.complete(HELLO)
    assert not isinstance(caught.value, FatalError)
    assert "2 attempt(s)" in str(caught.value) and server.url in str(caught.value)


def test_slow_server_times_out_and_is_retried() -> None:
    with ScriptedLLMServer([ScriptedReply(content="late", delay_s=1.0)]) as server:
        with pytest.raises(LLMError) as caught:
            client_for(server, max_retries=1, timeout_s=0.3).complete(HELLO)
    assert len(server.requests) == 2
    assert "Timeout" in str(caught.value)


def test_authentication_error_is_not_retried() -> None:
    with ScriptedLLMServer([ScriptedReply(status=401, content="bad key")]) as server:
        with pytest.raises(LLMError) as caught:
            client_for(server, max_retries=5).complete(HELLO)
    assert len(server.requests) == 1
    assert caught.value.status_code == 401 and "AuthenticationError" in str(caught.value)


def test_failures_are_sorted_into_retry_task_and_fatal() -> None:
    litellm = load_litellm()

    def make(name: str, message: str = "scripted"):
        return getattr(litellm, name)(message=message, llm_provider="openai", model="m")

    missing = "OpenAIException - Missing credentials. Please pass an `api_key` or set OPENAI_API_KEY"
    assert failure_kind(make("InternalServerError", missing)) == "fatal"  # what litellm reports for no key
    for name in ("AuthenticationError", "NotFoundError", "BadRequestError"):
        assert failure_kind(make(name)) == "fatal", name
    for name in ("ContextWindowExceededError", "ContentPolicyViolationError"):
        assert failure_kind(make(name)) == "task", name
    for name in ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError"):
        assert failure_kind(make(name)) == "retry", name


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_client_errors_are_fatal_and_not_retried(status: int) -> None:
    with ScriptedLLMServer([ScriptedReply(status=status, content="rejected")]) as server:
        with pytest.raises(LLMFatalError) as caught:
            client_for(server, max_retries=5).complete(HELLO)
    assert len(server.requests) == 1 and caught.value.status_code == status
    assert isinstance(caught.value, FatalError) and "not retried" in str(caught.value)


def test_missing_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LLMFatalError, match="model gpt-4o-mini needs OPENAI_API_KEY, which is not set"):
        LLMClient("gpt-4o-mini").complete(HELLO)
    assert missing_keys("gpt-4o-mini") == ["OPENAI_API_KEY"]
    assert missing_keys("gpt-4o-mini", api_base="http://127.0.0.1:1/v1") == []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    assert missing_keys("gpt-4o-mini") == []


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1", "openai/gpt-4o", "openai/my-finetune",
                                   "anthropic/claude-3-5-haiku-latest", "groq/llama3-8b-8192",
                                   "mistral/mistral-large-latest", "deepseek/deepseek-chat",
                                   "openrouter/openai/gpt-4o", "together_ai/meta-llama/Llama-3-8b", "xai/grok-2"])
def test_keys_known_without_litellm_agree_with_litellm(model: str) -> None:
    assert load_litellm().validate_environment(model=model)["missing_keys"] == [provider_key(model)]


def test_sentinel_key_never_leaks(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        caplog.set_level(logging.DEBUG, logger=name)
    echo = f"Incorrect API key provided: {SENTINEL}"
    script = [ScriptedReply(content="fine"), ScriptedReply(status=500, content=echo),
              ScriptedReply(status=401, content=echo)]
    with ScriptedLLMServer(script) as server:
        client = client_for(server, api_key=SENTINEL, max_retries=1)
        client.complete(HELLO)
        errors = []
        for _ in range(2):
            with pytest.raises(LLMError) as caught:
                client.complete(HELLO)
            errors.append(str(caught.value))
    captured = capfd.readouterr()
    assert SENTINEL not in json.dumps(client.describe())
    assert all(SENTINEL not in text and "***" in text for text in errors)
    assert SENTINEL not in caplog.text
    assert SENTINEL not in captured.out and SENTINEL not in captured.err


def test_concurrent_threads_share_one_client() -> None:
    def echo(body: dict) -> ScriptedReply:
        return ScriptedReply(content="echo:" + body["messages"][-1]["content"])

    with ScriptedLLMServer(echo) as server:
        client = client_for(server)
        failures: list[str] = []

        def worker(thread: int) -> None:
            for call in range(20):
                text = f"t{thread}-c{call}"
                try:
                    reply = client.complete([{"role": "user", "content": text}])
                except LLMError as exc:
                    failures.append(str(exc))
                    continue
                if reply.message["content"] != "echo:" + text:
                    failures.append(f"{text} got {reply.message['content']}")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=HANG_GUARD_S)
    assert failures == []
    assert len(server.requests) == 160


def test_importing_llm_does_not_import_litellm() -> None:
    code = "import sys, PersonalWAB.llm; print('litellm' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_prices_from_litellm_table_and_unknown_model_is_free() -> None:
    reply_1k = ScriptedReply(content="x", prompt_tokens=1000, completion_tokens=1000)
    with ScriptedLLMServer([reply_1k]) as server:
        unknown = client_for(server, model="my-local-model").complete(HELLO)
        known = client_for(server, model="openai/gpt-4o-mini").complete(HELLO)
    assert server.requests[0]["model"] == "my-local-model"
    assert (unknown.prompt_price, unknown.completion_price, unknown.price_known) == (0.0, 0.0, False)
    assert known.price_known and known.prompt_price > 0 and known.completion_price > known.prompt_price


def test_route_model_uses_openai_compatible_route_only_behind_api_base() -> None:
    base = "http://127.0.0.1:1/v1"
    assert route_model("Qwen/Qwen2.5-7B-Instruct", base) == "openai/Qwen/Qwen2.5-7B-Instruct"
    assert route_model("anthropic/claude-sonnet-4-5", base) == "anthropic/claude-sonnet-4-5"
    assert route_model("gpt-4o-mini", None) == "gpt-4o-mini"


def test_scripted_server_repeats_last_reply() -> None:
    with ScriptedLLMServer([ScriptedReply(content="a"), ScriptedReply(content="b")]) as server:
        client = client_for(server)
        contents = [client.complete(HELLO).message["content"] for _ in range(3)]
        request = urllib.request.Request(server.url + "/nope", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(request, timeout=HANG_GUARD_S)
        assert missing.value.code == 404
    assert contents == ["a", "b", "b"]


def test_scripted_server_stops_by_itself() -> None:
    """A failing test cannot leave it running: after its lifetime it stops listening."""
    with ScriptedLLMServer([ScriptedReply(content="a")], max_lifetime_s=0.2) as server:
        assert server.wait(HANG_GUARD_S), "hung: the server never stopped"
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(server.url + "/chat/completions", data=b"{}", timeout=HANG_GUARD_S)


def test_a_truncated_body_is_recorded_as_truncated_not_as_a_connection_error() -> None:
    with ScriptedLLMServer([ScriptedReply(content="cut short", truncate=True)]) as server:
        with pytest.raises(LLMError) as caught:
            client_for(server, max_retries=1).complete(HELLO)
    message = str(caught.value)
    assert "answered with a truncated body" in message and "Connection error" not in message
    assert len(server.requests) == 2  # retried like a lost connection


def test_a_null_message_is_one_line_without_the_server_traceback() -> None:
    with ScriptedLLMServer([ScriptedReply(content="x", null_message=True)]) as server:
        with pytest.raises(LLMError) as caught:
            client_for(server, max_retries=0).complete(HELLO)
    message = str(caught.value)
    assert 'message cannot be read, e.g. `"message": null`' in message
    assert "\n" not in message and "Traceback" not in message


# -- unreachable endpoints, transport failures, unreadable answers -------------------------------

def free_port() -> int:
    """A loopback port where nothing listens (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
