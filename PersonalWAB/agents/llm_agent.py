"""What every LLM agent shares: the memory of its prompt, model requests that are asked
again when the reply cannot be used (as the release does), usage accounting, and the
InteRecAgent memory update after a task."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PersonalWAB.agents.base import Agent
from PersonalWAB.agents.heuristic import choose_function
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.memory import memory_mode, memory_text
from PersonalWAB.schema_types import Task
from PersonalWAB.types import Episode

if TYPE_CHECKING:
    from PersonalWAB.memory.interec import InterecMemoryStore
    from PersonalWAB.llm import LLMClient, LLMReply
    from PersonalWAB.memory import ReleaseRandomMemory

# The release asks again (the same request) when a reply cannot be parsed, up to 10 tries in all.
ASK_LIMIT = 10


class UnusableReply(ValueError):
    """The model's reply cannot be turned into an action (bad JSON, wrong format)."""


@dataclass
class MemorySettings:
    """How an agent's memory is built (`--agent_memory`, `--memory_length`, ...)."""

    mode: str = "none"
    length: int = 10
    seed: int = 2024
    function_file: dict[str, str] | None = None
    interec_store: InterecMemoryStore | None = None
    random_memory: ReleaseRandomMemory | None = None
    tokens: int | None = None  # the memory's token budget (`--memory_tokens`)


def memory_settings(data: BenchmarkData, config: Any) -> MemorySettings:
    """The memory a run's settings ask for (`--agent_memory`, `--memory_length`, ...)."""
    from PersonalWAB.memory import load_function_file, run_random_memory

    store = None
    if memory_mode(config.agent_memory).interec_store:
        from PersonalWAB.memory.interec import NEEDS_STORE, InterecMemoryStore

        if not config.interec_memory_file:
            raise ValueError(NEEDS_STORE)

        store = InterecMemoryStore(config.interec_memory_file)
    # task-specific memory formats for the function PUMA's step 3 predicted (the release's --puma_function_file)
    predicted = config.options("puma").puma_function_file
    function_file = load_function_file(predicted) if predicted else None
    return MemorySettings(config.agent_memory, config.memory_length, config.seed, function_file=function_file,
                          interec_store=store, random_memory=run_random_memory(data, config),
                          tokens=config.memory_tokens)


def model_client(config: Any) -> LLMClient:
    """The run's model (`--model`, `--api_base`, `--temperature`, `--max_retries`, `--request_timeout`,
    `--max_tokens`, `--price_per_mtok`)."""
    from PersonalWAB.llm import LLMClient
    from PersonalWAB.pricing import parse_rate

    return LLMClient(config.model, api_base=config.api_base, temperature=config.temperature,
                     max_retries=config.max_retries, price=parse_rate(getattr(config, "price_per_mtok", None)),
                     timeout_s=getattr(config, "request_timeout", 120.0),
                     max_tokens=getattr(config, "max_tokens", 0) or None)


def record_call(episode: Episode, reply: LLMReply) -> None:
    """A model call that made an agent step: it counts in Avg Steps."""
    episode.usage.add_call(reply.prompt_tokens, reply.completion_tokens, reply.prompt_price, reply.completion_price)
    if not reply.price_known:
        episode.usage.price_unknown = True


def record_extra_call(episode: Episode, reply: LLMReply) -> None:
    """A model call that is not a step (a reply asked again, a reflection, a memory
    update): its cost counts, Avg Steps does not (as in the release)."""
    episode.usage.add_extra(reply.prompt_price + reply.completion_price)
    if not reply.price_known:
        episode.usage.price_unknown = True


class LLMAgent(Agent):
    """Base of the agents that call a language model through `LLMClient`."""

    def __init__(self, client: LLMClient, data: BenchmarkData, memory: MemorySettings):
        self.client = client
        self.data = data
        self.memory = memory

    def suggested_function(self, task: Task) -> str:
        """PUMA's function-file choice for the instruction (cue words when absent)."""
        chosen = (self.memory.function_file or {}).get(task["task"])
        return chosen or choose_function(task["task"])

    def memory_for(self, env: PWABEnv, task: Task, react: bool = False) -> str | None:
        """The memory appended to the system prompt (None: nothing appended)."""
        settings = self.memory
        draw = None
        if settings.random_memory is not None:
            draw = settings.random_memory.draw(env.trial, env.task_index)
        preferences = None
        if settings.interec_store is not None:
            preferences = settings.interec_store.get(task["user_id"])
        chosen = self.suggested_function(task) if memory_mode(settings.mode).chosen_function else None
        return memory_text(env.protocol, self.data, task, settings.mode, settings.length, react=react,
                           random_draw=draw, seed=settings.seed, preferences=preferences, tool_name=chosen,
                           tokens=settings.tokens)

    def ask(self, episode: Episode, messages: list[dict[str, Any]], parse: Callable[[dict[str, Any]], Any],
            **kwargs: Any) -> tuple[LLMReply, Any]:
        """One agent step's model call: the same request is sent again while `parse`
        rejects the reply, up to ASK_LIMIT tries; raises UnusableReply after that."""
        problem = ""
        for _ in range(ASK_LIMIT):
            reply = self.client.complete(messages, **kwargs)
            try:
                parsed = parse(reply.message)
            except UnusableReply as exc:
                record_extra_call(episode, reply)
                problem = str(exc)
                continue
            record_call(episode, reply)
            return reply, parsed
        raise UnusableReply(f"no usable reply in {ASK_LIMIT} tries; last: {problem}")

    def side_call(self, episode: Episode, prompt: str) -> str:
        """A one-message call outside the agent's steps (reflection, memory update), sent as
        the release sends it: the prompt as the system message, the provider's default temperature."""
        reply = self.client.complete([{"role": "system", "content": prompt}], temperature=None)
        record_extra_call(episode, reply)
        return reply.message.get("content") or ""

    def after_task(self, env: PWABEnv, task: Task, episode: Episode) -> None:
        """InteRecAgent memory: the model reads the conversation and the user's lists are updated."""
        store = self.memory.interec_store
        if store is None:  # only a mode that reads the store (its row's `interec_store`) has one
            return
        from PersonalWAB.memory.interec import parse_profile

        answer = self.side_call(episode, env.protocol.interecagent_update_prompt(conversation_text(episode.traj)))
        update = parse_profile(answer)
        if update is None:
            episode.notes["interec_update"] = "the model's memory update was not a JSON object; memory unchanged"
            return
        store.update(task["user_id"], **update)


def conversation_text(traj: list[dict[str, Any]]) -> str:
    """The conversation after the system prompt, one `role:content` line per message; a tool
    call written as the release's client printed it (`Function(arguments=..., name=...)`)."""
    lines = []
    for message in traj[1:]:
        if message["role"] == "assistant" and message.get("tool_calls"):
            function = message["tool_calls"][0]["function"]
            lines.append(f"assistant:Function(arguments={function['arguments']!r}, name={function['name']!r})\n")
        else:
            lines.append(f"{message['role']}:{message.get('content') or ''}\n")
    return "".join(lines)
