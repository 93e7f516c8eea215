"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that plays scripted replies.

Tests and benchmarks talk to it through litellm exactly as they would talk to vLLM or
OpenAI, so the whole HTTP path (serialisation, retries, usage) is exercised without a
network or an API key. Replies come from a list (consumed in order; the last one repeats
forever, so a one-element list answers every request the same way) or from a callable that
sees each request body and decides deterministically.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Callable
from typing import Any

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass
class ScriptedReply:
    """One answer of the server: a completion, or an HTTP error when `status` is not 200.
    A faulty server: `truncate` sends half the body and hangs up; `null_message` sends
    `"message": null`."""

    content: str | None = None
    tool_calls: list[tuple[str, str]] | tuple[tuple[str, str], ...] = ()
    status: int = 200
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    delay_s: float = 0.0
    truncate: bool = False
    null_message: bool = False


Responder = Callable[[dict], ScriptedReply] | list[ScriptedReply]


def approx_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters per token."""
    return len(text) // 4 + 1


def prompt_token_count(body: dict) -> int:
    """Token count derived from what the client sent, so it changes when the prompt does."""
    sent = {"messages": body.get("messages"), "tools": body.get("tools")}
    return approx_tokens(json.dumps(sent, sort_keys=True))


def error_body(status: int, message: str) -> dict:
    """An error in the shape OpenAI returns, so client libraries map it to their exception types."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


class HoldingResponder:
    """Answers the first `answered` requests with `responder`, then holds every later request
    unanswered until `release()`: a test can stop the client while its calls are in flight,
    knowing the client cannot have finished its work first. Released requests are answered by
    `responder` too."""

    def __init__(self, responder: Callable[[dict], ScriptedReply], answered: int):
        self._responder = responder
        self._answered = answered
        self._seen = 0
        self.holding = 0  # requests held now
        self._lock = threading.Lock()
        self._released = threading.Event()

    def __call__(self, body: dict) -> ScriptedReply:
        with self._lock:
            self._seen += 1
            hold = self._seen > self._answered and not self._released.is_set()
            self.holding += hold
        if hold:
            self._released.wait()
            with self._lock:
                self.holding -= 1
        return self._responder(body)

    def release(self) -> None:
        """Answer the held requests, and every later one at once."""
        self._released.set()


class _ScriptedHandler(BaseHTTPRequestHandler):
    """Answers chat-completion POSTs; HTTP/1.1 keep-alive so clients reuse connections.

    Each response leaves in one buffered write with Nagle off: split header/body writes
    meet the client's delayed ACK and cap a connection at about 25 requests per second.
    """

    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, open_=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, open_=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a benchmark sends thousands of requests."""

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in CHAT_PATHS:
            self._send_json(404, error_body(404, f"unknown path {self.path}"))
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except (ValueError, UnicodeDecodeError):
            self._send_json(400, error_body(400, "request body is not JSON"))
            return
        if not isinstance(body, dict):
            self._send_json(400, error_body(400, "request body must be a JSON object"))
            return
        if body.get("stream"):
            self._send_json(400, error_body(400, "the scripted server does not stream"))
            return
        self._answer(body)

    def _answer(self, body: dict) -> None:
        owner = self.server.owner
        owner._record(body)
        owner._in_flight(+1)
        try:
            self._reply(owner, body)
        finally:
            owner._in_flight(-1)

    def _reply(self, owner: ScriptedLLMServer, body: dict) -> None:
        try:
            reply = owner._next_reply(body)
        except Exception as exc:  # a broken responder must show up in the test, not hang it
            self._send_json(500, error_body(500, f"responder failed: {type(exc).__name__}: {exc}"))
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.status != 200:
            message = reply.content or f"scripted HTTP {reply.status}"
            extra = {"Retry-After": "0"} if reply.status == 429 else {}
            self._send_json(reply.status, error_body(reply.status, message), extra)
            return
        completion = owner._completion(body, reply)
        if reply.null_message:
            completion["choices"][0]["message"] = None
        self._send_json(200, completion, truncate=reply.truncate)

    def _send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None,
                   truncate: bool = False) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if truncate:  # the announced length never arrives: the client sees a body cut short
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, owner: ScriptedLLMServer):
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (its own timeout, or stop()) is routine, not a traceback."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class ScriptedLLMServer:
    """OpenAI-compatible server on an ephemeral loopback port; use as a context manager.

    `url` is the api_base to give a client ("http://127.0.0.1:PORT/v1"); `requests` holds
    every JSON body received, in arrival order. The server stops on `stop()`, on leaving the
    `with` block, or by itself after `max_lifetime_s`, so a failing test cannot leave it running.
    """

    def __init__(self, responder: Responder, max_lifetime_s: float = 600):
        if isinstance(responder, list) and not responder:
            raise ValueError("a scripted reply list needs at least one reply")
        self._responder = responder
        self.max_lifetime_s = max_lifetime_s
        self.requests: list[dict] = []
        self.max_in_flight = 0  # the most requests answered at the same time (concurrency seen)
        self._open_requests = 0
        self.url = ""
        self._lock = threading.Lock()
        self._position = 0
        self._call_ids = itertools.count(1)
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._timer: threading.Timer | None = None
        self._stopped = threading.Event()

    def start(self) -> ScriptedLLMServer:
        if self._server is not None:
            return self
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-llm", daemon=True
        ).start()
        self._timer = threading.Timer(self.max_lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut open keep-alive connections so no handler thread lingers."""
        with self._lock:
            server, self._server = self._server, None
            connections = list(self._connections)
        if server is None:
            return
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        server.shutdown()
        server.server_close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._stopped.set()  # only now: a client that `wait` released finds nothing listening

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the server has stopped (or `timeout_s` passed); True once stopped."""
        return self._stopped.wait(timeout_s)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _track(self, conn: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _in_flight(self, change: int) -> None:
        with self._lock:
            self._open_requests += change
            self.max_in_flight = max(self.max_in_flight, self._open_requests)

    def _record(self, body: dict) -> None:
        with self._lock:
            self.requests.append(body)

    def _next_reply(self, body: dict) -> ScriptedReply:
        """The scripted list in order (last reply repeats), or whatever the callable decides."""
        if callable(self._responder):
            return self._responder(body)
        with self._lock:
            index = min(self._position, len(self._responder) - 1)
            self._position += 1
        return self._responder[index]

    def _completion(self, body: dict, reply: ScriptedReply) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            with self._lock:
                ids = [f"call_{next(self._call_ids)}" for _ in reply.tool_calls]
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, (name, args) in zip(ids, reply.tool_calls)
            ]
        produced = (reply.content or "") + "".join(name + args for name, args in reply.tool_calls)
        prompt = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_token_count(body)
        completion = (
            reply.completion_tokens if reply.completion_tokens is not None else approx_tokens(produced)
        )
        return {
            "id": f"chatcmpl-scripted-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
