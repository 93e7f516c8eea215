"""What a model call is said to cost, and the cost lines a person reads under a results table.

Calls are priced from litellm's bundled table by the model's name. That is right for a
hosted model and wrong for a server of one's own that answers under a hosted name (a
local vLLM serving `gpt-4o-mini` is billed OpenAI's price), so a run may give its own rate
(`--price_per_mtok IN,OUT` in USD per million prompt and completion tokens, `0` for free;
`--user_price_per_mtok` for the user's model), and a local `--api_base` priced from the
table is warned about once.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

AGENT_FLAG, USER_FLAG = "--price_per_mtok", "--user_price_per_mtok"
RATE_HELP = ("USD per million prompt and completion tokens of {whose} model, as IN,OUT (e.g. 0.15,0.6), or 0 for "
             "a free one (a server of your own); overrides litellm's price table")
LOCAL_NAMES = frozenset({"localhost", "host.docker.internal"})
# The dearest rate a price may give, in USD per million tokens (hosted models list at most a few
# hundred): above it a run's cost can overflow to infinity, which no result file can hold.
MAX_RATE_PER_MTOK = 10_000.0

_warned: set[tuple[str, str, str]] = set()
_warned_lock = threading.Lock()


class Rate(NamedTuple):
    """A price given on the command line, per million tokens (the pair `LLMClient` takes)."""

    prompt_per_mtok: float
    completion_per_mtok: float

    def usd(self, prompt_tokens: int, completion_tokens: int) -> tuple[float, float]:
        """The prompt and completion cost of one call."""
        return prompt_tokens * self.prompt_per_mtok / 1e6, completion_tokens * self.completion_per_mtok / 1e6


def parse_rate(text: str | None, flag: str = AGENT_FLAG) -> Rate | None:
    """`0` or `IN,OUT` as a Rate (None when not given); ValueError naming `flag` otherwise."""
    if text is None:
        return None
    parts = [part.strip() for part in str(text).split(",")]
    try:
        numbers = [float(part) for part in parts]
    except ValueError:
        numbers = []
    if len(numbers) == 1 and numbers[0] == 0:
        return Rate(0.0, 0.0)
    if len(numbers) != 2 or not all(0 <= n <= MAX_RATE_PER_MTOK for n in numbers):
        raise ValueError(f"{flag} {text!r}: expected 0 or IN,OUT, two numbers from 0 to {MAX_RATE_PER_MTOK:,.0f} in "
                         "USD per million prompt and completion tokens (e.g. 0.15,0.6)")
    return Rate(numbers[0], numbers[1])


def is_local_endpoint(api_base: str | None) -> bool:
    """Whether a server address is this machine or a private network (loopback, RFC 1918,
    link-local, `localhost`, `*.local`): a server of one's own, not a provider's."""
    if not api_base:
        return False
    host = (urlsplit(api_base).hostname or "").lower()
    if host in LOCAL_NAMES or host.endswith((".local", ".localhost", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def table_price(model: str, api_base: str | None) -> tuple[float, float] | None:
    """USD per million prompt and completion tokens litellm's table lists for this model as
    routed (None: not listed). Loads litellm."""
    from PersonalWAB.llm import load_litellm, route_model

    try:
        info = load_litellm().get_model_info(model=route_model(model, api_base))
    except Exception:
        return None
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if prompt is None or completion is None:
        return None
    return float(prompt) * 1e6, float(completion) * 1e6


def hosted_price_warning(model: str | None, api_base: str | None, rate: str | None,
                         flag: str = AGENT_FLAG, base_flag: str = "--api_base") -> str | None:
    """A warning when a local server's model would be billed at a hosted model's listed price
    (None otherwise: no local server, a rate given, or a name the table does not list)."""
    if not model or rate is not None or not is_local_endpoint(api_base):
        return None
    listed = table_price(model, api_base)
    if listed is None:
        return None
    return (f"{base_flag} {api_base} is a server on this machine or network, yet {model} is priced as the hosted "
            f"model (${listed[0]:g} / ${listed[1]:g} per million prompt / completion tokens, litellm's table): "
            f"the cost shown is what the provider would charge; give {flag} 0 (or IN,OUT) to price your server")


def warn_hosted_prices(settings: Any, log: Callable[[str], None]) -> None:
    """Log `hosted_price_warning` for the agent's and the user's model, each once per process
    (a reproduction prepares every row with the same settings)."""
    pairs = [(settings.model, settings.api_base, settings.price_per_mtok, AGENT_FLAG, "--api_base")]
    if getattr(settings, "user_mode", "naive") == "naive":
        pairs.append((settings.user_model, settings.user_api_base, settings.user_price_per_mtok, USER_FLAG,
                      "--user_api_base"))
    for model, api_base, rate, flag, base_flag in pairs:
        warning = hosted_price_warning(model, api_base, rate, flag, base_flag)
        with _warned_lock:
            if warning is None or (model, api_base, flag) in _warned:
                continue
            _warned.add((model, api_base, flag))
        log(f"warning: {warning}")


def usd_text(usd: float) -> str:
    """Dollars with cents, or to 1/100 of a cent below a dollar, or to two figures below that (a
    small cost or budget never reads as $0.00)."""
    if usd >= 1:
        return f"${usd:,.2f}"
    return f"${usd:.4f}" if usd >= 0.0001 or usd == 0 else f"${usd:.2g}"


def price_source(model: str | None, api_base: str | None, rate: str | None, flag: str) -> str:
    """How a model's calls were priced, in words for the cost line."""
    if not model:
        return "no model"
    if rate is not None:
        return f"{model} at {flag} {rate}"
    if table_price(model, api_base) is None:
        return f"{model} has no price in litellm's table: counted as 0; give {flag} IN,OUT to price it"
    return f"{model}, litellm's price table"


def cost_lines(agent_usd: float, user_usd: float, run_args: Mapping[str, Any],
               cache: Mapping[str, Any] | None = None) -> list[str]:
    """What a results table's reader should know of the money: what the calls cost, the agent's
    and the user's and how each was priced, and, when the run used a response cache, what of it
    was paid and what the cache saved; no line for a run that called no model."""
    model, user_model = run_args.get("model"), run_args.get("user_model")
    user_called = run_args.get("user_mode") == "naive" and bool(user_model)
    if not model and not user_called:
        return []
    agent_price = price_source(model, run_args.get("api_base"), run_args.get("price_per_mtok"), AGENT_FLAG)
    parts = [f"agent {usd_text(agent_usd)} ({agent_price})"]
    if user_called:
        user_price = price_source(user_model, run_args.get("user_api_base"), run_args.get("user_price_per_mtok"),
                                  USER_FLAG)
        parts.append(f"user {usd_text(user_usd)} ({user_price})")
    lines = [f"cost: {usd_text(agent_usd + user_usd)} = " + "; ".join(parts)]
    if cache:
        saved = float(cache.get("saved_usd", 0.0))
        lines.append(f"paid: {usd_text(max(agent_usd + user_usd - saved, 0.0))}; saved: {usd_text(saved)} "
                     f"({cache.get('hits', 0)} call(s) answered from the response cache)")
    return lines
