"""Native tool-calling agent (`function_calling`) and RecMind (`recmind`), which is the
same loop with the product-details lookup offered, as in the release.

The system prompt is chosen by the memory mode (RecMind, InteRecAgent and task-specific
memory have their own) and the memory is appended to it. Each model call is one step:
at most 10 in single-turn, `max_steps` in multi-turn. A reply whose tool arguments are not
a JSON object is asked again (10 tries in all); only the first tool call of a reply runs
and stays in the conversation.
"""

from __future__ import annotations

import json
from typing import Any

from PersonalWAB.agents.llm_agent import LLMAgent, UnusableReply, memory_settings, model_client
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.envs.pwab.functions import BASE, RECMIND, tool_names
from PersonalWAB.memory import system_prompt
from PersonalWAB.schema_types import Task
from PersonalWAB.types import RESPOND, Action, Episode, kept_on_failure

SINGLE_TURN_CALL_LIMIT = 10


def message_action(message: dict[str, Any]) -> Action:
    """The action of a reply: its first tool call, else a message to the user."""
    calls = message.get("tool_calls") or []
    if not calls:
        return Action(RESPOND, {"content": message.get("content")})
    function = calls[0]["function"]
    try:
        arguments = json.loads(function.get("arguments") or "")
    except json.JSONDecodeError as exc:
        raise UnusableReply(f"tool arguments are not JSON ({exc})") from None
    if not isinstance(arguments, dict):
        raise UnusableReply("tool arguments are not a JSON object")
    return Action(function["name"], arguments)


class FunctionCallingAgent(LLMAgent):
    toolset = BASE  # the web functions offered: those whose row lists this tool set

    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        observation, info = env.reset(task_index)
        task = info["task"]
        system = system_prompt(env.protocol, self.memory.mode, env.max_steps)
        memory = self.memory_for(env, task)
        with kept_on_failure(Episode(traj=[{"role": "system", "content": system + (memory or "")},
                                           {"role": "user", "content": observation}])) as episode:
            self._loop(env, task, episode)
        return episode

    def _loop(self, env: PWABEnv, task: Task, episode: Episode) -> None:
        tools = env.tools_info(tool_names(self.toolset))
        for _ in range(env.max_steps if env.max_steps > 0 else SINGLE_TURN_CALL_LIMIT):
            try:
                reply, action = self.ask(episode, episode.traj, message_action, tools=tools, tool_choice="auto")
            except UnusableReply as exc:
                episode.notes["format_error"] = str(exc)
                break
            episode.record_action(action)
            observation, _, done, _ = env.step(action)
            if action.name == RESPOND:
                episode.record_message("assistant", reply.message.get("content"))
                episode.record_message("user", observation)
            else:
                episode.record_tool_call(action, observation, reply.message)
            if done:
                break
        self.after_task(env, task, episode)


class RecMindAgent(FunctionCallingAgent):
    """RecMind: may look products up by ASIN before acting; pairs with `--agent_memory recmind`."""

    toolset = RECMIND


def build_function_calling(data: BenchmarkData, config: Any) -> FunctionCallingAgent:
    """The `function_calling` strategy for a run (the registry's factory)."""
    return FunctionCallingAgent(model_client(config), data, memory_settings(data, config))


def build_recmind(data: BenchmarkData, config: Any) -> RecMindAgent:
    """The `recmind` strategy for a run (the registry's factory)."""
    return RecMindAgent(model_client(config), data, memory_settings(data, config))
