"""What every LLM agent shares: memory in the prompt, usage accounting, and the
InteRecAgent memory update after a task."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PersonalWAB.agents.base import Agent
from PersonalWAB.agents.heuristic import choose_function
from PersonalWAB.agents.prompts import INTEREC_UPDATE_PROMPT
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.types import Episode

if TYPE_CHECKING:
    from PersonalWAB.llm import LLMClient, LLMReply

SINGLE_TURN_CALL_LIMIT = 10


@dataclass
class MemorySettings:
    """How an agent's memory is built (`--agent_memory`, `--memory_length`, ...)."""

    mode: str = "none"
    length: int = 50
    seed: int = 0
    function_file: dict[str, str] | None = None
    interec_store: Any = None


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as a dict when they are valid JSON; otherwise the raw
    value, which the environment rejects as the model's error."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
        return parsed
    return raw


def record_call(episode: Episode, reply: "LLMReply") -> None:
    episode.usage.add_call(reply.prompt_tokens, reply.completion_tokens, reply.prompt_price, reply.completion_price)
    if not reply.price_known:
        episode.usage.price_unknown = True


class LLMAgent(Agent):
    """Base of the agents that call a language model through `LLMClient`."""


    def __init__(self, client: "LLMClient", data: BenchmarkData, memory: MemorySettings):
        self.client = client
        self.data = data
        self.memory = memory

    def suggested_function(self, task: dict[str, Any]) -> str:
        """PUMA's function-file choice for the instruction (cue words when absent)."""
        chosen = (self.memory.function_file or {}).get(task["task"])
        return chosen or choose_function(task["task"])

    def memory_text(self, task: dict[str, Any]) -> tuple[str, str | None]:
        """The memory block for the prompt and, for task-specific memory, the suggested function."""
        from PersonalWAB.memory import format_memory

        suggested = self.suggested_function(task) if self.memory.mode == "taskspe" else None
        text = format_memory(self.data, task, self.memory.mode, self.memory.length, self.memory.seed,
                             function_name=suggested, interec_store=self.memory.interec_store)
        return text, suggested

    def after_task(self, task: dict[str, Any], episode: Episode) -> None:
        """InteRecAgent memory: ask the model what this episode says about the user's tastes."""
        if self.memory.mode != "interecagent" or self.memory.interec_store is None:
            return
        conversation = "\n".join(
            f"{m['role']}: {m.get('content') or json.dumps(m.get('tool_calls', ''))}"
            for m in episode.traj if m["role"] != "system"
        )
        reply = self.client.complete([{"role": "user",
                                       "content": INTEREC_UPDATE_PROMPT.format(conversation=conversation)}])
        episode.usage.prompt_price += reply.prompt_price
        episode.usage.completion_price += reply.completion_price
        update = extract_json_object(reply.message.get("content") or "")
        if isinstance(update, dict):
            self.memory.interec_store.update(
                task["user_id"],
                **{key: [str(v) for v in update.get(key, []) if isinstance(v, (str, int, float))]
                   for key in ("like", "dislike", "expect") if isinstance(update.get(key, []), list)},
            )


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json_object(text: str) -> Any:
    """The first JSON object in a model's text (code fences allowed); None when there is none."""
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    start = candidate.find("{")
    end = candidate.rfind("}")
    if start == -1 or end < start:
        return None
    try:
        return json.loads(candidate[start:end + 1])
    except json.JSONDecodeError:
        return None
