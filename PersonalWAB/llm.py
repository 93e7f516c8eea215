"""The one door to language models: litellm underneath, our own retries, usage and cost.

Every agent and user simulator talks to models through `LLMClient.complete`, so retry
policy, token accounting and key hygiene live in one place. litellm is imported on the
first call, not at import time: it takes seconds to load and would otherwise fetch its
price map from the internet.

Routing: any litellm model string works as is ("openai/gpt-4o-mini", "anthropic/...",
"azure/...", "ollama/..."). With `api_base` and a model name without a provider prefix
(e.g. "Qwen/Qwen2.5-7B-Instruct" served by vLLM) the OpenAI-compatible route is used
("openai/<name>"). The key is `api_key` if given, else the provider's environment variable
(note: a set OPENAI_API_KEY is then sent to that api_base too), else a placeholder, since
local servers check none.

Failures (see `failure_kind`): only transient ones are retried; one that concerns a single
request fails that task; one that would hit every call (no key, key refused, unknown model,
malformed request) raises `LLMFatalError` at once so the run can stop instead of recording
the same failure for every task. A missing provider key is caught before any request. An
endpoint that refuses connections or does not resolve before it has ever answered is fatal
at once (nothing was retried for a server that is not there), and `TRANSPORT_FAILURE_LIMIT`
requests in a row that failed for good without an answer stop the run too. A reply without
choices or a body that is not JSON is a transport failure naming the endpoint.
"""

from __future__ import annotations

import logging
import os
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from PersonalWAB.errors import FatalError
from PersonalWAB.response_cache import current_scope

PLACEHOLDER_KEY = "sk-no-key-required"
RETRYABLE_STATUS = frozenset({408, 429})
# Errors about one request's content: that task fails, the others may still succeed.
PER_REQUEST_ERRORS = ("ContextWindowExceededError", "ContentPolicyViolationError")
PER_REQUEST_STATUS = frozenset({413})
PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY", "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY", "xai": "XAI_API_KEY",
}
# What the OpenAI client says (and litellm reports as an HTTP 500) when no key is configured.
MISSING_KEY_HINTS = ("missing credentials", "api_key client option must be set")
KEY_PATTERN = re.compile(r"(\bsk-[A-Za-z0-9_\-]{6,}|Bearer\s+\S+)")
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
# Requests in a row (across tasks) that failed for good without an answer before the run stops.
TRANSPORT_FAILURE_LIMIT = 5
# Exception classes (anywhere in the chain) meaning no HTTP answer came back.
TRANSPORT_CLASSES = frozenset({"TransportError", "APIConnectionError", "Timeout", "APITimeoutError"})
# What the HTTP client says when the connection closed before the announced body length arrived.
TRUNCATED_HINT = "without sending complete message body"
# What litellm says (with its own traceback) when a completion has no message it can read.
UNREADABLE_HINT = "Invalid response object"

_import_lock = threading.Lock()
_litellm: Any = None


@dataclass
class LLMReply:
    """One successful model call: the assistant message and what it used and cost."""

    message: dict
    prompt_tokens: int
    completion_tokens: int
    prompt_price: float
    completion_price: float
    price_known: bool


class LLMError(RuntimeError):
    """A model call failed for good (retries exhausted or a non-retryable error).

    The message names the model, the error class and the HTTP status; API keys are
    redacted from it. `status_code` and `error_class` let callers decide what to do.
    """

    def __init__(self, message: str, status_code: int | None = None, error_class: str = ""):
        super().__init__(message)
        self.status_code = status_code
        self.error_class = error_class


class LLMFatalError(LLMError, FatalError):
    """A model call that no retry or other task can fix (no key, key refused, unknown
    model, malformed request): the run stops at once with this message."""


class UnusableResponse(RuntimeError):
    """The server answered, but with nothing a client can read (no choices): retried like a lost connection."""


class EndpointHealth:
    """What this process has seen of each model endpoint, shared by all clients (a user
    simulator has one per task): whether it ever answered, and how many requests in a row
    failed for good without an answer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answered: set[str] = set()
        self._failures: dict[str, int] = {}

    def answered(self, endpoint: str) -> None:
        with self._lock:
            self._answered.add(endpoint)
            self._failures[endpoint] = 0

    def has_answered(self, endpoint: str) -> bool:
        with self._lock:
            return endpoint in self._answered

    def failed(self, endpoint: str) -> int:
        """Count one more request that failed for good; the number in a row."""
        with self._lock:
            self._failures[endpoint] = self._failures.get(endpoint, 0) + 1
            return self._failures[endpoint]


ENDPOINTS = EndpointHealth()


def load_litellm() -> Any:
    """Import litellm once, offline and quiet (its debug banners would flood benchmark logs)."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.suppress_debug_info = True
            litellm.set_verbose = False
            if not os.environ.get("LITELLM_LOG"):
                for name in LITELLM_LOGGERS:
                    logging.getLogger(name).setLevel(logging.WARNING)
            _litellm = litellm
    return _litellm


def warm_up() -> None:
    """Load litellm and what its first request imports (about 3 s on 2 cores, more on a busy
    machine), so a run can show this wait as its own step instead of a bar frozen at 0 tasks.
    The request is litellm's mock: nothing leaves the machine."""
    litellm = load_litellm()
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    litellm.completion(model="openai/warm-up", messages=[{"role": "user", "content": "-"}], tools=[tool],
                       mock_response="-", api_key=PLACEHOLDER_KEY)  # a request with tools imports more
    import openai.resources  # noqa: F401  (the OpenAI client imports it on its first request)


def price_listed(route: str) -> bool:
    """Whether litellm's price table has token prices for this (routed) model."""
    try:
        info = load_litellm().get_model_info(model=route)
    except Exception:
        return False
    return info.get("input_cost_per_token") is not None and info.get("output_cost_per_token") is not None


def route_model(model: str, api_base: str | None) -> str:
    """The litellm model string: unprefixed names behind an api_base go the OpenAI-compatible way."""
    if not api_base:
        return model
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if prefix and prefix in load_litellm().provider_list:
        return model
    return f"openai/{model}"


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and every cause or context behind it (litellm wraps the socket error
    several times, and reports a refused connection as an HTTP 500)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def unreachable_reason(exc: BaseException) -> str | None:
    """"refuses connections" or "does not resolve" when no connection could be opened; else None."""
    for link in exception_chain(exc):
        if isinstance(link, socket.gaierror):
            return "does not resolve"
        if isinstance(link, ConnectionRefusedError):
            return "refuses connections"
    return None


def transport_problem(exc: BaseException) -> str | None:
    """What went wrong on the wire when no usable answer came back (unreachable, timed out,
    connection lost, a body that is not JSON, no choices); None for an HTTP error answer."""
    reason = unreachable_reason(exc)
    if reason:
        return reason
    chain = list(exception_chain(exc))
    for link in chain:  # the cause first: litellm wraps each of these in a generic connection error
        if isinstance(link, UnusableResponse):
            return str(link)
        if isinstance(link, ValueError) and type(link).__name__ == "JSONDecodeError":
            return f"answered with a body that is not valid JSON, e.g. truncated ({link})"
        if type(link).__name__ == "RemoteProtocolError" and TRUNCATED_HINT in str(link):
            return f"answered with a truncated body ({one_line(str(link))[:200]})"
        if UNREADABLE_HINT in str(link):
            return (f"answered with a completion whose message cannot be read, e.g. `\"message\": null` "
                    f"({type(chain[-1]).__name__}: {one_line(str(chain[-1]))[:200]})")
    for link in chain:
        if TRANSPORT_CLASSES & {cls.__name__ for cls in type(link).__mro__}:
            return f"gave no answer ({type(link).__name__}: {str(link)[:200]})"
    return None


def one_line(text: str) -> str:
    """An error text as one line, without the traceback some providers' errors carry."""
    return " ".join(text.split("Traceback (most recent call last)", 1)[0].split())


def failure_kind(exc: Exception) -> str:
    """How to treat a failed call: "retry" (rate limits, timeouts, lost connections, HTTP
    408/429/5xx), "task" (this request alone is unusable: too long, refused by a content
    policy; other tasks may still succeed) or "fatal" (missing or refused credentials, an
    unknown model, any other 4xx: every later call would fail the same way)."""
    litellm = load_litellm()
    if any(hint in str(exc).lower() for hint in MISSING_KEY_HINTS):
        return "fatal"
    if any(cls.__name__ in PER_REQUEST_ERRORS for cls in type(exc).__mro__):
        return "task"
    if isinstance(exc, UnusableResponse):
        return "retry"
    transient = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )
    if isinstance(exc, transient):
        return "retry"
    status = status_of(exc)
    if status is None:
        return "task"
    if status in RETRYABLE_STATUS or status >= 500:
        return "retry"
    if status in PER_REQUEST_STATUS:
        return "task"
    return "fatal" if 400 <= status < 500 else "task"


def provider_key(model: str) -> str | None:
    """The key variable of a model of a common provider, known without loading litellm
    (which takes seconds); None for any other model. A test keeps this in agreement with
    litellm's own `validate_environment`."""
    if "/" in model:
        return PROVIDER_KEYS.get(model.split("/", 1)[0])
    return PROVIDER_KEYS["openai"] if model.startswith("gpt-") else None


def missing_keys(model: str, api_base: str | None = None) -> list[str]:
    """Provider API-key variables that `model` needs and the environment lacks.

    Empty with an `api_base` (local servers check no key; a remote one refuses the call,
    which then stops the run) and for providers whose credentials are not `*_API_KEY`
    variables (e.g. AWS or Google credential files, which cannot be checked here)."""
    if api_base:
        return []
    known = provider_key(model)
    if known is not None:
        return [] if os.environ.get(known) else [known]
    try:
        missing = load_litellm().validate_environment(model=model)["missing_keys"]
    except Exception:
        return []
    return [name for name in missing if name.endswith("API_KEY")]


def status_of(exc: Exception) -> int | None:
    """The HTTP status litellm attached, if any; non-HTTP failures have none."""
    status = getattr(exc, "status_code", None)
    try:
        return int(status) if status is not None else None
    except (TypeError, ValueError):
        return None


def retry_after_s(exc: Exception) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms or Retry-After), if it said.

    litellm keeps the provider's headers on `litellm_response_headers`; the `response` it
    attaches to its own exceptions is rebuilt and may have lost them.
    """
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None
    )
    if not headers:
        return None
    if headers.get("retry-after-ms") is not None:
        millis = header_seconds(headers["retry-after-ms"])
        return None if millis is None else millis / 1000
    if headers.get("retry-after") is not None:
        return header_seconds(headers["retry-after"])
    return None


def header_seconds(value: str) -> float | None:
    """A Retry-After value: a number, or an HTTP date counted from now."""
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def plain_message(message: Any) -> dict:
    """An OpenAI-format assistant dict from litellm's Message; tool arguments stay raw strings."""
    data = message.model_dump() if hasattr(message, "model_dump") else dict(message)
    out: dict[str, Any] = {"role": "assistant", "content": data.get("content")}
    calls = [
        {
            "id": call.get("id"),
            "type": "function",
            "function": {
                "name": call["function"].get("name"),
                "arguments": call["function"].get("arguments") or "",
            },
        }
        for call in data.get("tool_calls") or []
    ]
    if calls:
        out["tool_calls"] = calls
    return out


def missing_key_message(model: str, keys: list[str], flag: str = "model", base_flag: str = "api_base") -> str:
    """What to do when a model's key is not set (one line)."""
    return (f"{flag} {model} needs {' and '.join(keys)}, which is not set: export it (or add it to .env "
            f"and `source scripts/set_api_key.sh`), or serve the model yourself and pass {base_flag}")


class LLMClient:
    """A thread-safe chat-completion client shared by many agent threads."""

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        temperature: float = 0.0,
        max_retries: int = 5,
        timeout_s: float = 120.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        api_key: str | None = None,
        price: tuple[float, float] | None = None,
        max_tokens: int | None = None,
    ):
        self.model = model
        self.api_base = api_base
        self.temperature = temperature
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._api_key = api_key
        self._lock = threading.Lock()
        self._rng = random.Random(0)
        self._route: str | None = None
        self._call_key: str | None = None
        self._rate = price  # the run's own USD per million prompt, completion tokens, over litellm's table
        self._price_known = False
        self.max_tokens = max_tokens  # a reply's most tokens unless a call gives its own (None: the server's)

    @property
    def endpoint(self) -> str:
        """Where requests go, as a person would name it in a message."""
        return self.api_base or f"the provider API of model {self.model!r}"

    def describe(self) -> dict:
        """Settings worth recording with results (run_args); never the key."""
        return {
            "model": self.model,
            "api_base": self.api_base,
            "temperature": self.temperature,
            "max_retries": self.max_retries,
        }

    def complete(self, messages: list[dict], tools: list[dict] | None = None, **kwargs: Any) -> LLMReply:
        """One chat completion, retried on transient failures; extra kwargs go to litellm.

        Raises LLMFatalError when the endpoint cannot be reached before it ever answered,
        or when this was the TRANSPORT_FAILURE_LIMIT-th request in a row to fail unanswered."""
        litellm = load_litellm()
        params = self._params(messages, tools, kwargs)
        scope = current_scope()  # the task's response cache, if the run has one
        key = scope.key(params) if scope is not None else None
        if scope is not None and key is not None:
            stored = scope.cache.get(key)
            if stored is not None:
                reply = self._stored_reply(stored)
                scope.hit(reply.prompt_price + reply.completion_price)
                return reply
        attempt = 0
        while True:
            try:
                reply = self._reply(litellm.completion(**params))
            except Exception as exc:
                kind = failure_kind(exc)
                unreachable = unreachable_reason(exc)
                if kind == "retry" and unreachable and not ENDPOINTS.has_answered(self.endpoint):
                    raise self._unreachable_error(exc, unreachable) from None
                if attempt >= self.max_retries or kind != "retry":
                    raise self._error(exc, attempt + 1, fatal=kind == "fatal") from None
                time.sleep(self._delay(exc, attempt))
                attempt += 1
            else:
                ENDPOINTS.answered(self.endpoint)
                if scope is not None and key is not None:
                    scope.cache.put(key, {"message": reply.message, "prompt_tokens": reply.prompt_tokens,
                                          "completion_tokens": reply.completion_tokens})
                return reply

    def _params(self, messages: list[dict], tools: list[dict] | None, extra: dict) -> dict:
        self._resolve()
        params: dict[str, Any] = {
            "model": self._route,
            "messages": messages,
            "temperature": self.temperature,
            "timeout": self.timeout_s,
            "drop_params": True,
        }
        if tools:
            params["tools"] = tools
        if self.max_tokens:
            params["max_tokens"] = self.max_tokens
        if self.api_base:
            params["api_base"] = self.api_base
        if self._call_key:
            params["api_key"] = self._call_key
        params.update(extra)
        params["num_retries"] = 0
        return params

    def _resolve(self) -> None:
        """Work out the route and key once; a placeholder key for keyless local servers."""
        with self._lock:
            if self._route is not None:
                return
            route = route_model(self.model, self.api_base)
            key = self._api_key
            if key is None:
                absent = missing_keys(route, self.api_base)
                if absent:
                    raise LLMFatalError(missing_key_message(self.model, absent), error_class="MissingKey")
            if key is None and self.api_base and not self._env_has_key(route):
                key = PLACEHOLDER_KEY
            self._call_key = key
            self._price_known = self._rate is not None or price_listed(route)
            self._route = route

    def _env_has_key(self, route: str) -> bool:
        try:
            missing = load_litellm().validate_environment(model=route, api_base=self.api_base)["missing_keys"]
        except Exception:
            return False
        return not any(name.endswith("API_KEY") for name in missing)

    def _delay(self, exc: Exception, attempt: int) -> float:
        """The server's Retry-After when given, else exponential backoff with up to 25% jitter."""
        asked = retry_after_s(exc)
        if asked is not None:
            return min(asked, self.max_backoff_s)
        with self._lock:
            jitter = 1.0 + 0.25 * self._rng.random()
        return min(self.backoff_s * (2**attempt) * jitter, self.max_backoff_s)

    def _reply(self, response: Any) -> LLMReply:
        choices = getattr(response, "choices", None)
        if not choices:
            raise UnusableResponse("answered with no choices (`choices: []`): no message to read")
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        prompt_price, completion_price, known = self._price(prompt, completion)
        return LLMReply(
            message=plain_message(choices[0].message),
            prompt_tokens=prompt,
            completion_tokens=completion,
            prompt_price=prompt_price,
            completion_price=completion_price,
            price_known=known,
        )

    def _stored_reply(self, stored: dict) -> LLMReply:
        """A cached answer, priced as this client prices a call (what the cache spared)."""
        prompt, completion = int(stored["prompt_tokens"]), int(stored["completion_tokens"])
        prompt_price, completion_price, known = self._price(prompt, completion)
        return LLMReply(message=stored["message"], prompt_tokens=prompt, completion_tokens=completion,
                        prompt_price=prompt_price, completion_price=completion_price, price_known=known)

    def _price(self, prompt: int, completion: int) -> tuple[float, float, bool]:
        """USD at the run's own rate, else from litellm's bundled price table; models it does
        not list cost 0, unknown."""
        if self._rate is not None:
            return prompt * self._rate[0] / 1e6, completion * self._rate[1] / 1e6, True
        if not self._price_known:
            return 0.0, 0.0, False
        try:
            prompt_usd, completion_usd = load_litellm().cost_per_token(
                model=self._route, prompt_tokens=prompt, completion_tokens=completion
            )
        except Exception:
            return 0.0, 0.0, False
        return float(prompt_usd), float(completion_usd), True

    def _unreachable_error(self, exc: Exception, reason: str) -> LLMFatalError:
        """The endpoint was never reached: no task can run, so the run stops now."""
        return LLMFatalError(f"model endpoint {self.endpoint} {reason} (model {self.model!r}): is the server "
                             "running at that address, and is the address right? Nothing was retried",
                             error_class=type(exc).__name__)

    def _error(self, exc: Exception, attempts: int, fatal: bool = False) -> LLMError:
        problem = transport_problem(exc)
        if problem is not None and not fatal:
            return self._transport_error(exc, problem, attempts)
        status = status_of(exc)
        name = type(exc).__name__
        detail = self._redact(one_line(str(exc)))[:500]
        message = (
            f"model {self.model!r}: {name} (HTTP {status if status is not None else 'n/a'}) "
            f"after {attempts} attempt(s): {detail}"
        )
        if not fatal:
            return LLMError(message, status_code=status, error_class=name)
        keys = missing_keys(self._route or self.model, self.api_base) if self._call_key is None else []
        hint = f"; set {', '.join(keys)}" if keys else "; not retried: check the key, model name and api_base"
        return LLMFatalError(message + hint, status_code=status, error_class=name)

    def _transport_error(self, exc: Exception, problem: str, attempts: int) -> LLMError:
        """A request that got no usable answer; the TRANSPORT_FAILURE_LIMIT-th in a row stops the run."""
        message = (f"model endpoint {self.endpoint} {self._redact(problem)} "
                   f"(model {self.model!r}, {attempts} attempt(s))")
        in_a_row = ENDPOINTS.failed(self.endpoint)
        if in_a_row >= TRANSPORT_FAILURE_LIMIT:
            return LLMFatalError(f"{message}; {in_a_row} requests in a row failed this way, so the run stops "
                                 "(the finished tasks are kept)", error_class=type(exc).__name__)
        return LLMError(message, error_class=type(exc).__name__)

    def _redact(self, text: str) -> str:
        """Strip the configured key and anything key-shaped that a provider echoed back."""
        for secret in (self._api_key, self._call_key):
            if secret and secret != PLACEHOLDER_KEY:
                text = text.replace(secret, "***")
        return KEY_PATTERN.sub("***", text)
