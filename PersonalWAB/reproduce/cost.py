"""What a reproduction will cost, worked out before any paid call.

The real agents (and, in the multi-turn track, the real LLM user) run a sample of the
tasks left to run against a stand-in for the model: it counts the tokens of every request
they build (litellm's tokenizer for the model) and answers as a sensible model would,
so nothing is ever sent. The cost of a task is priced with litellm's bundled price table
(`cost_per_token`), call by call; a model the table does not list makes the estimate
"price unknown", never $0.

What the stand-in answers:

- single-turn: the first request is the task (a single-turn task ends at its first action),
  and its completion is counted as the call the task asks for, written by the offline
  agent's rules (`PersonalWAB.agents.heuristic`); the stand-in then answers `stop`, so no
  web function runs. A model that looks products up first (RecMind) or whose reply must be
  asked again costs more than this.
- memory that ranks behaviours by MiniLM (`relevant`, `taskspe`) holds the user's newest
  behaviours instead, as many as the run's would: the same number of behaviour texts,
  priced without encoding any (an estimate needs their length, not which ones they are).
- multi-turn: conversations as long as the paper's Avg Steps for the row and task type
  (Table 4): x steps are a mix of a ⌊x⌋-step and a ⌈x⌉-step conversation (at least two:
  the call, then `stop`); calls and messages to the user alternate (the message tells the
  user what the call found, as the offline agent does) and the last step is `stop`. The
  web functions run for real, so later requests carry real results. Each user reply is
  counted at its cap of 150 tokens (an upper bound) and sent back empty.

Per task type, the mean cost of its sampled tasks times the number of its tasks left.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from PersonalWAB.llm import LLMReply, load_litellm, price_listed, route_model
from PersonalWAB.memory.base import ranked_by_recency_for_pricing
from PersonalWAB.pricing import AGENT_FLAG, USER_FLAG, parse_rate, usd_text
from PersonalWAB.progress import log_line, progress_bar
from PersonalWAB.reproduce.paper import paper_row
from PersonalWAB.reproduce.rows import DEFAULT_SAMPLE, MULTI, ReproduceSettings, RowSpec
from PersonalWAB.runner.execute import RunPlan
from PersonalWAB.types import RESPOND, STOP, Action

PRICE_UNKNOWN = "price unknown"


@dataclass
class Calls:
    """The token counts of the requests one model received during one simulated task."""

    prompt: list[int] = field(default_factory=list)
    completion: list[int] = field(default_factory=list)

    def add(self, prompt: int, completion: int) -> None:
        self.prompt.append(prompt)
        self.completion.append(completion)


class Pricer:
    """A model's price per call: the run's own `rate` when given, else litellm's bundled
    table; `known` False when neither prices it."""

    def __init__(self, model: str, api_base: str | None, rate: str | None = None, flag: str = AGENT_FLAG):
        self.model = model
        self.route = route_model(model, api_base)
        self.rate = parse_rate(rate, flag)
        self.known = self.rate is not None or price_listed(self.route)

    def tokens(self, messages: list[dict[str, Any]] | None = None, text: str | None = None,
               tools: list[dict[str, Any]] | None = None) -> int:
        """Tokens of a request (messages and tool schemas) or of a reply's text, by the model's tokenizer."""
        if messages is not None:
            return int(load_litellm().token_counter(model=self.route, messages=messages, tools=tools))
        return int(load_litellm().token_counter(model=self.route, text=text or ""))

    def usd(self, calls: Calls) -> float:
        """The price of these calls (0 when unknown: callers check `known` first)."""
        if not self.known:
            return 0.0
        if self.rate is not None:
            return sum(sum(self.rate.usd(p, c)) for p, c in zip(calls.prompt, calls.completion))
        cost = load_litellm().cost_per_token
        return sum(sum(cost(model=self.route, prompt_tokens=p, completion_tokens=c))
                   for p, c in zip(calls.prompt, calls.completion))


def _reply(message: dict[str, Any]) -> LLMReply:
    return LLMReply(message=message, prompt_tokens=0, completion_tokens=0, prompt_price=0.0, completion_price=0.0,
                    price_known=True)


class StandInAgentModel:
    """The agent's model for one simulated task: counts each request, answers by `script`
    (the actions of its steps in order) in the format the request expects (a tool call when
    tools are offered, ReAct text otherwise), and sends nothing. A request of one system
    message is a side call (a reflection, a memory update): it is counted and answered empty."""

    def __init__(self, pricer: Pricer, env: Any, decide: Callable[[], Action], steps: int, calls: Calls):
        self.pricer = pricer
        self.env = env
        self.decide = decide
        self.steps = steps
        self.calls = calls
        self._step = 0
        self._last_attempt: Action | None = None

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 **kwargs: Any) -> LLMReply:
        prompt = self.pricer.tokens(messages, tools=tools)
        if len(messages) == 1:
            self.calls.add(prompt, 0)
            return _reply({"role": "assistant", "content": ""})
        self._step += 1
        counted, sent = self._actions(messages)
        message = self._render(sent, tools is not None)
        self.calls.add(prompt, self.pricer.tokens(text=self._text(self._render(counted, tools is not None))))
        return _reply(message)

    def _actions(self, messages: list[dict[str, Any]]) -> tuple[Action, Action]:
        """The action whose reply is counted and the one sent back (they differ in single-turn,
        where the task's call is counted and `stop` answered, so no web function runs)."""
        from PersonalWAB.agents.heuristic import report

        if self.env.single_turn:
            return self.decide(), Action(STOP, {})
        if self._step >= self.steps:
            action = Action(STOP, {})
        elif self._step % 2:
            action = self._last_attempt = self.decide()
        else:
            found = str(messages[-1].get("content") or "")
            assert self._last_attempt is not None  # the odd step before this one made it
            action = Action(RESPOND, {"content": report(self._last_attempt, found, self.env.data.products)})
        return action, action

    def _render(self, action: Action, tool_format: bool) -> dict[str, Any]:
        if tool_format:
            if action.name == RESPOND:
                return {"role": "assistant", "content": action.arguments["content"]}
            call = {"id": f"call_standin_{self._step}", "type": "function",
                    "function": {"name": action.name, "arguments": json.dumps(action.arguments)}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        protocol = self.env.protocol
        raw = action.arguments["content"] if action.name == RESPOND else json.dumps(action.arguments)
        text = (f"{protocol.text('react.action_marker')}\n{action.name}\n"
                f"{protocol.text('react.arguments_marker')}\n{' '.join(raw.split())}")
        return {"role": "assistant", "content": text}

    @staticmethod
    def _text(message: dict[str, Any]) -> str:
        calls = message.get("tool_calls") or []
        return "".join(c["function"]["name"] + c["function"]["arguments"] for c in calls) or message["content"]


class StandInUserModel:
    """The LLM user's model for one simulated task: counts each request and its reply at the
    `max_tokens` cap, answers empty, sends nothing."""

    def __init__(self, pricer: Pricer, calls: Calls):
        self.pricer = pricer
        self.calls = calls

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 **kwargs: Any) -> LLMReply:
        self.calls.add(self.pricer.tokens(messages, tools=tools), int(kwargs.get("max_tokens") or 0))
        return _reply({"role": "assistant", "content": ""})


@dataclass
class RowEstimate:
    """What the tasks left of one row will cost: per task (means) and in all."""

    row: str
    tasks: int  # task runs left to run
    sampled: int = 0
    calls: float = 0.0  # model calls per task, agent and user
    prompt_tokens: float = 0.0  # per task
    completion_tokens: float = 0.0  # per task
    usd: float | None = 0.0  # None: a model's price is unknown
    note: str = ""

    @property
    def price_text(self) -> str:
        return PRICE_UNKNOWN if self.usd is None else usd_text(self.usd)


def sample_tasks(plan: RunPlan, size: int) -> dict[str, tuple[int, list[int]]]:
    """Per task type: how many task runs are left, and up to its share of `size` of their
    tasks, evenly spaced over the run's order."""
    by_type: dict[str, list[int]] = {}
    for _, task_id in plan.jobs:
        by_type.setdefault(plan.tasks[task_id]["type"], []).append(task_id)
    total = len(plan.jobs)
    picked = {}
    for kind, ids in by_type.items():
        unique = list(dict.fromkeys(ids))
        count = min(len(unique), max(1, round(size * len(ids) / total)))
        picked[kind] = (len(ids), [unique[i * len(unique) // count] for i in range(count)])
    return picked


def conversation_mix(spec: RowSpec, track: str, kind: str, max_steps: int) -> list[tuple[int, float]]:
    """(steps, weight) of the conversations a task of this type is simulated with: one step
    in single-turn; in multi-turn the paper's Avg Steps x as ⌊x⌋ and ⌈x⌉ steps (at least 2),
    weighted so their mean is x (the step budget where the paper has no figure)."""
    if track != MULTI:
        return [(1, 1.0)]
    paper = paper_row(track, spec.name)
    x = (paper.figure(kind, "steps") if paper else None) or float(max_steps)
    x = min(max(x, 2.0), float(max_steps))
    low, high = math.floor(x), math.ceil(x)
    return [(low, 1.0)] if low == high else [(low, high - x), (high, x - low)]


def _prepare_resources(plan: RunPlan, task_ids: list[int], log: Callable[[str], None]) -> Any:
    """What the sampled tasks need, as `execute` builds it for a run: the engines, with the
    search index and recommender a multi-turn conversation calls (no memory embeddings: see
    the module's docstring)."""
    from PersonalWAB.build import build_artifacts, cache_review_embeddings
    from PersonalWAB.engines.shared import shared_engines

    config, data, protocol = plan.config, plan.data, plan.protocol
    tasks = [plan.tasks[tid] for tid in task_ids]
    kinds = {task["type"] for task in tasks} if config.max_steps > 0 else set()
    build_artifacts(data, (config.search_backend,) if "search" in kinds else (), recommender="recommend" in kinds,
                    log=log, protocol=protocol)
    if "review" in kinds:
        cache_review_embeddings(data, tasks)
    return shared_engines(data, config.search_backend, protocol)


def estimate_row(spec: RowSpec, plan: RunPlan, settings: ReproduceSettings, sample: int = DEFAULT_SAMPLE,
                 log: Callable[[str], None] = log_line) -> RowEstimate:
    """The estimate of one row's tasks left to run (see the module's docstring)."""
    if not plan.jobs:
        return RowEstimate(spec.name, 0, note="done")
    if spec.strategy == "puma":
        return RowEstimate(spec.name, len(plan.jobs), note="no API model (PUMA's own model)")
    from PersonalWAB.agents.heuristic import HeuristicAgent
    from PersonalWAB.agents.llm_agent import LLMAgent
    from PersonalWAB.agents.registry import build_agent
    from PersonalWAB.envs.pwab.env import PWABEnv
    from PersonalWAB.envs.users import get_user
    from PersonalWAB.envs.users.llm_user import LLMUser
    from PersonalWAB.llm import LLMClient
    from PersonalWAB.memory import RELEASE_MEMORY_LENGTH

    config = plan.config
    multi = config.max_steps > 0
    agent_pricer = Pricer(settings.model, settings.api_base, settings.price_per_mtok)
    user_pricer = Pricer(settings.user_model, settings.user_api_base, settings.user_price_per_mtok,
                         USER_FLAG) if multi else None
    picked = sample_tasks(plan, sample)
    engines = _prepare_resources(plan, [tid for _, ids in picked.values() for tid in ids], log)
    agent = build_agent(plan.data, config)
    if not isinstance(agent, LLMAgent):
        raise ValueError(f"row {spec.name}: the cost of agent {config.agent_strategy} cannot be estimated")
    actor = HeuristicAgent(plan.data, "last", RELEASE_MEMORY_LENGTH, config.seed)
    totals = {"usd": 0.0, "calls": 0.0, "prompt": 0.0, "completion": 0.0}
    simulations = [(kind, tid, steps, weight) for kind, (_, ids) in picked.items() for tid in ids
                   for steps, weight in conversation_mix(spec, settings.track, kind, config.max_steps)]
    with progress_bar(total=len(simulations), desc=f"estimate {spec.name}", unit="task", leave=False) as bar, \
            ranked_by_recency_for_pricing():
        for kind, task_id, steps, weight in simulations:
            left, ids = picked[kind]
            share = weight * left / len(ids)  # this simulation stands for `share` of the row's task runs
            agent_calls, user_calls = Calls(), Calls()
            user: LLMUser | None = None
            if user_pricer is not None:  # the multi-turn track
                user = cast(LLMUser, get_user("naive", settings.user_model, settings.user_api_base, config.seed))
                user.client = cast(LLMClient, StandInUserModel(user_pricer, user_calls))
            env = PWABEnv(engines, config.task_split, user, config.max_steps, protocol=plan.protocol, trial=0)
            next_action = lambda env=env: actor.decide(env, env.current_task)  # noqa: E731  # this task's env
            agent.client = cast(LLMClient, StandInAgentModel(agent_pricer, env, next_action, steps, agent_calls))
            agent.solve(env, task_id)
            user_usd = user_pricer.usd(user_calls) if user_pricer else 0.0
            totals["usd"] += share * (agent_pricer.usd(agent_calls) + user_usd)
            for calls in (agent_calls, user_calls):
                totals["calls"] += share * len(calls.prompt)
                totals["prompt"] += share * sum(calls.prompt)
                totals["completion"] += share * sum(calls.completion)
            bar.update(1)
    unpriced = [p.model for p in (agent_pricer, user_pricer) if p is not None and not p.known]
    tasks = len(plan.jobs)
    return RowEstimate(spec.name, tasks, sum(len(ids) for _, ids in picked.values()), totals["calls"] / tasks,
                       totals["prompt"] / tasks, totals["completion"] / tasks,
                       None if unpriced else totals["usd"],
                       f"no price for {', '.join(unpriced)} in litellm's table" if unpriced else "")


def total_usd(estimates: list[RowEstimate]) -> float | None:
    """The sum over rows; None when any row's price is unknown."""
    if any(e.usd is None for e in estimates):
        return None
    return sum(e.usd or 0.0 for e in estimates)


def format_estimates(estimates: list[RowEstimate], model: str, sample: int, rate: str | None = None) -> str:
    """The estimate table printed before any paid call (`rate`: the model's `--price_per_mtok`)."""
    import importlib.metadata

    prices = f"at {AGENT_FLAG} {rate}" if rate is not None else \
        f"litellm {importlib.metadata.version('litellm')} price table"
    lines = [f"Cost estimate for {model} ({prices}; request sizes rendered from up to "
             f"{sample} tasks per row, never sent):",
             f"{'row':<13} {'tasks left':>10} {'sampled':>8} {'calls/task':>10} {'prompt tok/task':>16} "
             f"{'compl. tok/task':>16} {'estimate':>14}  note"]
    for e in estimates:
        lines.append(f"{e.row:<13} {e.tasks:>10} {e.sampled:>8} {e.calls:>10.2f} {e.prompt_tokens:>16,.0f} "
                     f"{e.completion_tokens:>16,.0f} {e.price_text:>14}  {e.note}")
    total = total_usd(estimates)
    lines.append(f"{'total':<13} {sum(e.tasks for e in estimates):>10} {'':>8} {'':>10} {'':>16} {'':>16} "
                 f"{PRICE_UNKNOWN if total is None else usd_text(total):>14}")
    return "\n".join(lines)


def estimate_scope(plans: list[RunPlan], estimates: list[RowEstimate], track: str) -> list[str]:
    """What an estimate priced (the data, its scale, the texts, the track) and, for data other
    than the official benchmark, the same cost per task scaled to the official test split's
    published task count: a synthetic split is a fraction of it, and its texts differ in length."""
    from PersonalWAB.data.published import PUBLISHED_COUNTS

    plan = plans[0]
    data, config = plan.data, plan.config
    texts = f"{plan.protocol.name} texts ({'standard' if plan.run_args['protocol']['standard'] else 'custom'} run)"
    lines = [f"priced: the {config.task_split} split of {data.source} data ({data.data_dir}; "
             f"{len(plan.tasks):,} {config.task_split} tasks, tasks {config.start_index} to {plan.end - 1} run), "
             f"{track} track, {texts}"]
    if data.is_official:
        return lines
    official = PUBLISHED_COUNTS.test
    scaled = [(e, e.usd / e.tasks * official) for e in estimates if e.usd is not None and e.tasks]
    if not scaled or len(scaled) < len([e for e in estimates if e.tasks]):
        return lines + [f"the official test split has {official:,} tasks per row; no scaled estimate: "
                        f"{PRICE_UNKNOWN} for a row"]
    total = sum(usd for _, usd in scaled)
    per_row = ", ".join(f"{e.row} {usd_text(usd)}" for e, usd in scaled)
    return lines + [f"scaled to the official test split ({official:,} tasks per row) at this cost per task: about "
                    f"{usd_text(total)} ({per_row}); the official data's histories and product texts differ in "
                    "length, so this is a scale, not a quote"]
