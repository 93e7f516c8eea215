"""An agent of your own for PersonalWAB, complete in one file.

Run it from the repository root like any built-in strategy:

    python run.py --agent_strategy examples.my_agent:MyAgent --model gpt-4o-mini --agent_memory relevant

`MyAgent` is a small tool-calling agent: the benchmark's own system prompt for the track
(from `env.protocol`) with the user's memory appended (`PersonalWAB.memory.memory_text`),
the web functions `env.tools_info()` describes, one model call per step, each tool call
sent to `env.step` until the environment says the episode is over. Change `act` (or the
whole `solve`) to try your method; docs/agents.md explains the interface.
"""

from __future__ import annotations

import json
from typing import Any

from PersonalWAB.agents.base import Agent
from PersonalWAB.data.schema import TASK_FUNCTIONS
from PersonalWAB.llm import LLMClient
from PersonalWAB.memory import memory_text, system_prompt
from PersonalWAB.types import RESPOND, STOP, Action, Episode, kept_on_failure

TOOLS = (*TASK_FUNCTIONS, STOP)
MEMORIES = ("none", "last", "random", "relevant", "recmind")  # the modes memory_text renders with no extra input
SINGLE_TURN_STEPS = 10


class MyAgent(Agent):
    """Built by run.py as `MyAgent(data, config)`: the benchmark data and the run's settings."""

    def __init__(self, data: Any, config: Any):
        if not config.model:
            raise ValueError("MyAgent needs --model (any litellm model string, e.g. gpt-4o-mini)")
        if config.agent_memory not in MEMORIES:
            raise ValueError(f"MyAgent renders --agent_memory {', '.join(MEMORIES)}; got {config.agent_memory}")
        self.data = data
        self.memory = (config.agent_memory, config.memory_length, config.seed)
        self.client = LLMClient(config.model, api_base=config.api_base, temperature=config.temperature,
                                max_retries=config.max_retries)

    def solve(self, env: Any, task_index: int) -> Episode:
        observation, info = env.reset(task_index)
        mode, length, seed = self.memory
        memory = memory_text(env.protocol, self.data, info["task"], mode, length, seed=seed) or ""
        system = system_prompt(env.protocol, mode, env.max_steps) + memory
        # kept_on_failure: if a model call fails for good, the runner still records the calls made so far
        with kept_on_failure(Episode(traj=[{"role": "system", "content": system},
                                           {"role": "user", "content": observation}])) as episode:
            for _ in range(env.max_steps if env.max_steps > 0 else SINGLE_TURN_STEPS):
                message, action = self.act(episode, env.tools_info(TOOLS))
                episode.record_action(action)
                observation, _, done, _ = env.step(action)  # the scores are the runner's, not the agent's
                if action.name == RESPOND:
                    episode.record_message("assistant", message.get("content"))
                    episode.record_message("user", observation)
                else:
                    episode.record_tool_call(action, observation, message)  # the model's own call id
                if done:
                    break
        return episode

    def act(self, episode: Episode, tools: list[dict[str, Any]]) -> tuple[dict[str, Any], Action]:
        """One model call: (the reply, its first tool call or its text as a message to the user)."""
        reply = self.client.complete(episode.traj, tools=tools, tool_choice="auto")
        episode.usage.add_call(reply.prompt_tokens, reply.completion_tokens, reply.prompt_price,
                               reply.completion_price)  # one step (Avg Steps) and its cost
        calls = reply.message.get("tool_calls") or []
        if not calls:
            return reply.message, Action(RESPOND, {"content": reply.message.get("content") or ""})
        try:
            arguments = json.loads(calls[0]["function"].get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = {}  # the function then answers with an error and the attempt scores 0
        return reply.message, Action(calls[0]["function"]["name"], arguments if isinstance(arguments, dict) else {})
