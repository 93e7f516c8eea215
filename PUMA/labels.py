"""Step 1's label requests (the LLM-written search queries): a progress bar over them, their
tokens and cost added up for the step's record, and a request that fails for good turned into
one line naming the endpoint and the HTTP status.

`LabelRequests` stands in for the `LLMClient` it wraps (same `complete`), so the requests
themselves, their texts and the client's retries of transient errors are unchanged.
"""

from __future__ import annotations

from typing import Any

from PersonalWAB.errors import FatalError
from PersonalWAB.llm import LLMError, LLMReply
from PersonalWAB.types import Usage

# A step stopped by a label endpoint that failed for good: the service failed, not the input
# (bad input exits 2), as `pwab run` exits when its model service fails.
EXIT_LABEL_SERVICE = 1


class LabelRequestError(FatalError):
    """A label request failed for good (after the client's retries): the step stops, nothing written."""


class LabelRequests:
    """The search-label requests of one split through `client`: a progress bar of `total` requests
    (on stderr), their usage (`summary`) and a failure as `LabelRequestError`."""

    def __init__(self, client: Any, total: int, purpose: str = "search labels"):
        from PersonalWAB.progress import progress_bar

        self.client = client
        self.total = total
        self.purpose = purpose
        self.usage = Usage()
        self.price_known = True
        self._bar = progress_bar(total=total, desc=purpose, unit="request", dynamic_ncols=True)

    def complete(self, messages: list[dict], tools: list[dict] | None = None, **kwargs: Any) -> LLMReply:
        done = self.usage.calls
        try:
            reply = self.client.complete(messages, tools, **kwargs)
        except LLMError as exc:
            self.close()
            raise LabelRequestError(self.failure(exc, done + 1)) from None
        self.usage.add_call(reply.prompt_tokens, reply.completion_tokens, reply.prompt_price, reply.completion_price)
        self.price_known = self.price_known and reply.price_known
        self._bar.update(1)
        return reply

    def failure(self, exc: LLMError, request: int) -> str:
        """One line: what failed, where, with which status, after what."""
        detail = " ".join(str(exc).split())
        endpoint = self.client.endpoint
        what = (f"the label endpoint {endpoint} answered HTTP {exc.status_code} to request {request} of {self.total}"
                if exc.status_code is not None else
                f"request {request} of {self.total} to the label endpoint {endpoint} got no usable answer")
        return f"{self.purpose}: {what}, so the step stopped and wrote nothing ({detail})"

    def close(self) -> None:
        self._bar.close()

    def summary(self) -> dict[str, Any]:
        """What the step's record states about its label requests."""
        prompt, completion = sum(self.usage.prompt_tokens), sum(self.usage.completion_tokens)
        return {"model": self.client.model, "endpoint": self.client.endpoint, "requests": self.usage.calls,
                "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "cost_usd": round(self.usage.total_price, 6) if self.price_known else None}

    def summary_line(self) -> str:
        facts = self.summary()
        cost = (f"${facts['cost_usd']:.4f}" if facts["cost_usd"] is not None
                else "cost unknown (the model is not in litellm's price table)")
        return (f"{self.purpose}: {facts['requests']} requests to {facts['model']}, {facts['prompt_tokens']:,} "
                f"prompt + {facts['completion_tokens']:,} completion tokens, {cost}")
