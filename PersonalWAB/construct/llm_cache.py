"""Every model call of the construction tools, cached on disk by its full request.

The key is the SHA-256 of the whole request (model, messages and sampling parameters;
not the server address, so moving a local server to another port or machine keeps the
cache valid). The answers live in the project's one response store (`PersonalWAB.response_cache`,
the file a run's `--cache` uses), committed the moment each arrives, so a build that crashes
or is killed resumes without paying twice for a finished call, and re-running a build whose
prompts did not change costs nothing. Calls run concurrently through the
project's one LLM client (`PersonalWAB.llm`), with its retries, usage and price.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from PersonalWAB.progress import progress_bar

from PersonalWAB.llm import LLMClient, load_litellm, route_model
from PersonalWAB.response_cache import CACHE_FILE, ResponseCache


@dataclass(frozen=True)
class LLMSettings:
    """Which model answers, and how it is called."""

    model: str
    api_base: str | None = None
    temperature: float = 0.0
    max_retries: int = 5
    max_concurrency: int = 8
    timeout_s: float = 120.0

    def describe(self) -> dict[str, Any]:
        """What a manifest records about the model (never a key)."""
        return {"model": self.model, "api_base": self.api_base, "temperature": self.temperature}


@dataclass(frozen=True)
class Request:
    """One chat completion to make: the messages and the longest answer allowed."""

    messages: tuple[dict[str, str], ...]
    max_tokens: int

    def then(self, answer: str, follow_up: str) -> Request:
        """The same conversation continued: the model's answer, then a new user message."""
        turns = ({"role": "assistant", "content": answer}, {"role": "user", "content": follow_up})
        return Request(self.messages + turns, self.max_tokens)


def request(system: str, user: str, max_tokens: int) -> Request:
    """A system + user request."""
    return Request(({"role": "system", "content": system}, {"role": "user", "content": user}), max_tokens)


@dataclass(frozen=True)
class Answer:
    """A model's answer and what it cost when it was made (also when served from the cache)."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    price_known: bool
    cached: bool


@dataclass
class CallStats:
    """Calls sent to the model and answers served from the cache, with their tokens and cost."""

    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    cached_cost_usd: float = 0.0
    price_known: bool = True

    def add(self, answer: Answer) -> None:
        if answer.cached:
            self.cached += 1
            self.cached_prompt_tokens += answer.prompt_tokens
            self.cached_completion_tokens += answer.completion_tokens
            self.cached_cost_usd += answer.cost_usd
        else:
            self.calls += 1
            self.prompt_tokens += answer.prompt_tokens
            self.completion_tokens += answer.completion_tokens
            self.cost_usd += answer.cost_usd
        self.price_known = self.price_known and answer.price_known

    def merge(self, other: CallStats) -> None:
        for name, value in asdict(other).items():
            if name == "price_known":
                self.price_known = self.price_known and value
            else:
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, Any]:
        """Counts plus the totals of every answer used (made now or earlier): the full price of the output."""
        data = asdict(self)
        data["cost_usd"] = round(self.cost_usd, 6)
        data["cached_cost_usd"] = round(self.cached_cost_usd, 6)
        data["requests"] = self.calls + self.cached
        data["total_prompt_tokens"] = self.prompt_tokens + self.cached_prompt_tokens
        data["total_completion_tokens"] = self.completion_tokens + self.cached_completion_tokens
        data["total_cost_usd"] = round(self.cost_usd + self.cached_cost_usd, 6)
        return data


@dataclass
class Estimate:
    """A dry run's forecast for one batch of requests."""

    requests: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    completion_tokens_max: int
    cost_usd: float | None
    cost_usd_max: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return self.requests - self.cached


def request_payload(model: str, req: Request, temperature: float) -> dict[str, Any]:
    """The full request as the cache keys and keeps it."""
    return {"model": model, "messages": list(req.messages),
            "params": {"temperature": temperature, "max_tokens": req.max_tokens}}


def request_key(model: str, req: Request, temperature: float) -> str:
    """SHA-256 of the full request in a canonical JSON form."""
    payload = request_payload(model, req, temperature)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class CachedLLM:
    """Answers requests from `cache_dir` when it can, from the model otherwise.

    Thread-safe; `stats` counts what this object did since it was made.
    """

    def __init__(self, settings: LLMSettings, cache_dir: Path | str, client: LLMClient | None = None):
        self.settings = settings
        self.cache_dir = Path(cache_dir)
        self._client = client
        self._lock = threading.Lock()
        self._store: ResponseCache | None = None
        self.stats = CallStats()

    def _writable(self) -> ResponseCache:
        """The store, opened (and made) on first use."""
        with self._lock:
            if self._store is None:
                self._store = ResponseCache(self.cache_dir)
            return self._store

    def _readable(self) -> ResponseCache | None:
        """The store if there is one: a dry run, or a lookup before any call, makes no cache folder."""
        return self._writable() if self._store is not None or (self.cache_dir / CACHE_FILE).exists() else None

    def _payload(self, req: Request) -> dict[str, Any]:
        return request_payload(self.settings.model, req, self.settings.temperature)

    def _entry_file(self, key: str) -> dict[str, Any] | None:
        """An answer kept as one JSON file per request (`<cache>/<key[:2]>/<key>.json`, the layout
        of construct caches written before the shared store), so those paid answers still count."""
        try:
            entry = json.loads((self.cache_dir / key[:2] / f"{key}.json").read_bytes())
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and isinstance(entry.get("reply"), dict) else None

    def lookup(self, req: Request) -> Answer | None:
        """The cached answer of exactly this request, if there is one."""
        store = self._readable()
        key = request_key(self.settings.model, req, self.settings.temperature)
        entry = (store.get(key) if store else None) or self._entry_file(key)
        if entry is None or entry.get("request") != self._payload(req):  # a hash collision or a hand-edited file
            return None
        reply = entry["reply"]
        return Answer(reply["content"], reply["prompt_tokens"], reply["completion_tokens"], reply["cost_usd"],
                      reply["price_known"], cached=True)

    def _client_or_new(self) -> LLMClient:
        with self._lock:
            if self._client is None:
                s = self.settings
                self._client = LLMClient(s.model, api_base=s.api_base, temperature=s.temperature,
                                         max_retries=s.max_retries, timeout_s=s.timeout_s)
            return self._client

    def _call(self, req: Request) -> Answer:
        reply = self._client_or_new().complete(list(req.messages), max_tokens=req.max_tokens)
        answer = Answer(reply.message.get("content") or "", reply.prompt_tokens, reply.completion_tokens,
                        reply.prompt_price + reply.completion_price, reply.price_known, cached=False)
        entry = {"request": self._payload(req),
                 "reply": {"content": answer.content, "prompt_tokens": answer.prompt_tokens,
                           "completion_tokens": answer.completion_tokens, "cost_usd": answer.cost_usd,
                           "price_known": answer.price_known}}
        self._writable().put(request_key(self.settings.model, req, self.settings.temperature), entry)
        return answer

    def ask(self, req: Request) -> Answer:
        """One answer, cached or made (and cached)."""
        answer = self.lookup(req) or self._call(req)
        with self._lock:
            self.stats.add(answer)
        return answer

    def ask_all(self, requests: Sequence[Request], description: str) -> list[Answer]:
        """Answers in request order; uncached requests run `max_concurrency` at a time.

        The first failure (after the client's retries) cancels what has not started and
        is raised; every answer that arrived before it is already cached.
        """
        answers: list[Answer | None] = [None] * len(requests)
        pending = []
        for i, req in enumerate(requests):
            found = self.lookup(req)
            if found is None:
                pending.append(i)
            else:
                answers[i] = found
                with self._lock:
                    self.stats.add(found)
        if not requests:
            return []
        with progress_bar(total=len(requests), initial=len(requests) - len(pending), desc=description, unit="call",
                  mininterval=1.0) as progress:
            if pending:
                self._run_pending(requests, pending, answers, progress.update)
        return [answer for answer in answers if answer is not None]  # every slot is filled by now

    def _run_pending(self, requests: Sequence[Request], pending: list[int], answers: list[Answer | None],
                     tick: Callable[[int], Any]) -> None:
        workers = max(1, min(self.settings.max_concurrency, len(pending)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="construct-llm") as pool:
            futures = {pool.submit(self.ask, requests[i]): i for i in pending}
            remaining = set(futures)
            while remaining:
                done, remaining = wait(remaining, return_when=FIRST_EXCEPTION)
                for future in done:
                    error = future.exception()
                    if error is not None:
                        for other in remaining:
                            other.cancel()
                        raise error
                    answers[futures[future]] = future.result()
                    tick(1)

    def estimate(self, requests: Sequence[Request], expected_completion_tokens: int) -> Estimate:
        """What the uncached requests would cost: prompt tokens counted with the model's
        tokenizer (litellm's, cl100k when it does not know the model), answers assumed
        `expected_completion_tokens` long (and at most max_tokens, the upper bound)."""
        litellm = load_litellm()
        route = route_model(self.settings.model, self.settings.api_base)
        uncached = [r for r in requests if self.lookup(r) is None]
        prompt = sum(litellm.token_counter(model=route, messages=list(r.messages)) for r in uncached)
        completion = sum(min(expected_completion_tokens, r.max_tokens) for r in uncached)
        ceiling = sum(r.max_tokens for r in uncached)
        notes: list[str] = []
        cost = price(route, prompt, completion) if uncached else 0.0
        cost_max = price(route, prompt, ceiling) if uncached else 0.0
        if cost is None and uncached:
            notes.append(f"litellm has no price for {self.settings.model!r}: cost unknown")
        return Estimate(len(requests), len(requests) - len(uncached), prompt, completion, ceiling, cost, cost_max,
                        notes)


def price(route: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for these tokens from litellm's bundled price table; None for an unlisted model."""
    litellm = load_litellm()
    try:
        prompt_usd, completion_usd = litellm.cost_per_token(model=route, prompt_tokens=prompt_tokens,
                                                            completion_tokens=completion_tokens)
    except Exception:
        return None
    return float(prompt_usd) + float(completion_usd)


@dataclass
class Repaired:
    """What `ask_with_repairs` got: per request, the parsed answer (None: none usable), the
    last reply, and why that reply was unusable; and how many repair requests were sent."""

    values: list[Any]
    replies: list[str]
    problems: list[str | None]
    repair_requests: int


def ask_with_repairs(llm: CachedLLM, conversations: Sequence[Request], parse: Callable[[str], Any],
                     retry_template: str, noun: str, repairs: int,
                     recheck: Callable[[list[Any]], list[int]] | None = None,
                     recheck_message: str = "") -> Repaired:
    """Ask every conversation, then send each unusable answer back (`retry_template` with the
    `{problem}` that `parse` raised as `AnswerError`), up to `repairs` more rounds.
    `recheck(values)` names usable answers that must be asked again as well, with
    `recheck_message`, while rounds remain (e.g. an instruction that repeats another)."""
    from PersonalWAB.construct.prompts import AnswerError

    conversations = list(conversations)
    size = len(conversations)
    values: list[Any] = [None] * size
    replies: list[str] = [""] * size
    problems: list[str | None] = [None] * size
    pending, sent = list(range(size)), 0
    for attempt in range(repairs + 1):
        if not pending:
            break
        sent += len(pending) if attempt else 0
        label = f"writing {noun}s" if attempt == 0 else f"re-asking for {len(pending)} {noun}(s)"
        for i, answer in zip(pending, llm.ask_all([conversations[i] for i in pending], label)):
            replies[i] = answer.content
            try:
                values[i], problems[i] = parse(answer.content), None
            except AnswerError as exc:
                values[i], problems[i] = None, str(exc)
                conversations[i] = conversations[i].then(answer.content, retry_template.format(problem=exc))
        pending = [i for i, value in enumerate(values) if value is None]
        if recheck is not None and attempt < repairs:
            for i in recheck(values):
                values[i] = None
                conversations[i] = conversations[i].then(replies[i], recheck_message)
                pending.append(i)
            pending.sort()
    return Repaired(values, replies, problems, sent)
