"""Text ReAct agents: `react` and `react_reflect`, as in the release.

The system prompt is the track's, then the tool schemas as JSON and the ReAct
instructions, then the memory (`last`, `relevant` or `random`). The model writes
Thought / Action / Arguments lines; the action is what follows the last `Action:` up to
`Arguments:`, its arguments the first line after the last `Arguments:` (JSON, or the
message itself for `respond`). A reply whose arguments are not a JSON object is asked
again (10 tries in all). Tool results come back as a user message prefixed `API output: `
(in the protocol's words). At most 3 model calls in single-turn, `max_steps` in
multi-turn. `react_reflect` adds, after every message to the user, a reflection written by
the model from the conversation and appended as an assistant message; it is not a step.
"""

from __future__ import annotations

import json
from typing import Any

from PersonalWAB.agents.llm_agent import LLMAgent, UnusableReply, memory_settings, model_client
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.envs.pwab.functions import BASE, tool_names
from PersonalWAB.protocol import Protocol
from PersonalWAB.schema_types import Task
from PersonalWAB.types import RESPOND, Action, Episode, kept_on_failure

SINGLE_TURN_CALL_LIMIT = 3


def parse_react(text: Any, protocol: Protocol) -> Action:
    """The action of a ReAct reply, read as the release reads it."""
    if not isinstance(text, str):
        raise UnusableReply("the reply has no text")
    action_marker, arguments_marker = protocol.text("react.action_marker"), protocol.text("react.arguments_marker")
    name = text.split(action_marker)[-1].split(arguments_marker)[0].strip()
    raw = text.split(arguments_marker)[-1].strip().split("\n")[0]
    if name in (RESPOND, ""):
        return Action(name, {"content": raw})
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UnusableReply(f"arguments are not JSON ({exc})") from None
    if not isinstance(arguments, dict):
        raise UnusableReply("arguments are not a JSON object")
    return Action(name, arguments)


class ReActAgent(LLMAgent):
    reflect = False

    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        observation, info = env.reset(task_index)
        task = info["task"]
        protocol = env.protocol
        system = protocol.react_system_prompt(env.max_steps, env.tools_info(tool_names(BASE)))
        memory = self.memory_for(env, task, react=True)
        with kept_on_failure(Episode(traj=[{"role": "system", "content": system + (memory or "")},
                                           {"role": "user", "content": observation}])) as episode:
            self._loop(env, task, episode)
        return episode

    def _loop(self, env: PWABEnv, task: Task, episode: Episode) -> None:
        protocol = env.protocol
        for _ in range(env.max_steps if env.max_steps > 0 else SINGLE_TURN_CALL_LIMIT):
            try:
                reply, action = self.ask(episode, episode.traj,
                                         lambda message: parse_react(message.get("content"), protocol))
            except UnusableReply as exc:
                episode.notes["format_error"] = str(exc)
                break
            episode.record_action(action)
            observation, _, done, _ = env.step(action)
            if action.name != RESPOND:
                observation = protocol.text("react.api_output") + observation
            episode.record_message("assistant", reply.message.get("content"))
            episode.record_message("user", observation)
            if self.reflect and action.name == RESPOND:
                episode.record_message("assistant", self._reflection(protocol, task, episode))
            if done:
                break

    def _reflection(self, protocol: Protocol, task: Task, episode: Episode) -> str:
        actions = "".join(f"{m['role']}:{m['content']}\n" for m in episode.traj[1:-1])
        return self.side_call(episode, protocol.reflection_prompt(task["task"], actions, episode.traj[-1]["content"]))


class ReflectiveReActAgent(ReActAgent):
    reflect = True


def build_react(data: BenchmarkData, config: Any) -> ReActAgent:
    """The `react` strategy for a run (the registry's factory)."""
    return ReActAgent(model_client(config), data, memory_settings(data, config))


def build_react_reflect(data: BenchmarkData, config: Any) -> ReflectiveReActAgent:
    """The `react_reflect` strategy for a run (the registry's factory)."""
    return ReflectiveReActAgent(model_client(config), data, memory_settings(data, config))
