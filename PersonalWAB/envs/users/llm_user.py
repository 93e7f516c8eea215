"""`--user_mode naive`: a language model plays the user (any litellm model), as in the release.

Its system prompt is the protocol's user prompt (profile, the target product and, for a
review task, the real review); the conversation opens with the user's greeting turn
answered by the instruction, the simulated user speaking as `assistant`. Each agent
message gets one reply at temperature 1.0, at most 150 tokens.
"""

from __future__ import annotations

from typing import Any

from PersonalWAB.envs.users.base import UserSimulator
from PersonalWAB.pricing import Rate
from PersonalWAB.protocol import Protocol
from PersonalWAB.schema_types import Task, UserProfile

TEMPERATURE = 1.0
MAX_TOKENS = 150


class LLMUser(UserSimulator):
    def __init__(self, model: str, api_base: str | None = None, max_retries: int = 5, price: Rate | None = None,
                 timeout_s: float = 120.0):
        from PersonalWAB.llm import LLMClient

        self.client = LLMClient(model, api_base=api_base, temperature=TEMPERATURE, max_retries=max_retries,
                                price=price, timeout_s=timeout_s)
        self.messages: list[dict[str, Any]] = []
        self.cost = 0.0

    def reset(self, task: Task, profile: UserProfile, protocol: Protocol) -> None:
        self.messages = [
            {"role": "system", "content": protocol.user_prompt(task, profile)},
            {"role": "user", "content": protocol.text("user.greeting")},
            {"role": "assistant", "content": task["task"]},
        ]
        self.cost = 0.0
        return None

    def reply(self, agent_message: str) -> str:
        self.messages.append({"role": "user", "content": agent_message})
        reply = self.client.complete(self.messages, max_tokens=MAX_TOKENS)
        self.cost += reply.prompt_price + reply.completion_price
        text = reply.message.get("content") or ""
        self.messages.append({"role": "assistant", "content": text})
        return text
