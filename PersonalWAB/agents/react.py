"""Text ReAct agents: `react` and `react_reflect` (a reflection after each user
message in the multi-turn track).

The model answers in Thought / Action / Arguments lines. Output that drifts from
the format is parsed as far as possible; what cannot be read becomes a message
to the user (single-turn: the task ends with no result) or, for unreadable
arguments, a call the environment rejects. Neither crashes the run.
"""

from __future__ import annotations

import re
from typing import Any

from PersonalWAB.agents.llm_agent import (
    SINGLE_TURN_CALL_LIMIT,
    LLMAgent,
    extract_json_object,
    record_call,
)
from PersonalWAB.agents.prompts import REACT_FORMAT, REFLECTION_PROMPT, system_prompt
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.types import RESPOND, Action, Episode

_ACTION = re.compile(r"^\s*\**\s*Action\s*\**\s*:\s*\**\s*`?([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE | re.MULTILINE)
_ARGUMENTS = re.compile(r"^\s*\**\s*(?:Arguments|Action\s*Input)\s*\**\s*:\s*(.*)", re.IGNORECASE | re.MULTILINE | re.DOTALL)
_THOUGHT = re.compile(r"^\s*\**\s*Thought\s*\**\s*:.*?(?=^\s*\**\s*Action\s*\**\s*:|\Z)", re.IGNORECASE | re.MULTILINE | re.DOTALL)


def describe_tools(tools: list[dict[str, Any]]) -> str:
    lines = []
    for tool in tools:
        function = tool["function"]
        params = ", ".join(f"{name}: {spec.get('type')}" for name, spec in function["parameters"]["properties"].items())
        lines.append(f"- {function['name']}({params}): {function['description']}")
    lines.append("- respond(content: string): send a message to the user.")
    return "\n".join(lines)


def parse_react(text: str) -> Action:
    """Read an Action (and its JSON Arguments) out of a ReAct reply."""
    action = _ACTION.search(text)
    if action is None:
        message = _THOUGHT.sub("", text).strip() or text.strip()
        return Action(RESPOND, {"content": message})
    name = action.group(1)
    arguments_match = _ARGUMENTS.search(text, action.end())
    raw = arguments_match.group(1).strip() if arguments_match else ""
    if not raw:
        return Action(name, {})
    parsed = extract_json_object(raw)
    if parsed is not None:
        return Action(name, parsed)
    if name == RESPOND:
        return Action(RESPOND, {"content": raw})
    return Action(name, raw)


class ReActAgent(LLMAgent):
    reflect = False

    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        observation, info = env.reset(task_index)
        task = info["task"]
        memory_text, suggested = self.memory_text(task)
        prompt = system_prompt(env.single_turn, env.max_steps, memory_text, self.offers_details, suggested)
        prompt += "\n\n" + REACT_FORMAT.format(functions=describe_tools(env.tools_info))
        episode = Episode(traj=[{"role": "system", "content": prompt}, {"role": "user", "content": observation}])
        budget = SINGLE_TURN_CALL_LIMIT if env.single_turn else env.max_steps
        done = False
        while not done and episode.steps < budget:
            reply = self.client.complete(episode.traj)
            record_call(episode, reply)
            text = reply.message.get("content") or ""
            episode.traj.append({"role": "assistant", "content": text})
            action = parse_react(text)
            episode.actions.append(action.to_dict())
            observation, _, done, _ = env.step(action)
            if done:
                break
            prefix = "" if action.name == RESPOND else "Observation: "
            episode.traj.append({"role": "user", "content": f"{prefix}{observation}"})
            if self.reflect and not env.single_turn and episode.steps < budget:
                self._reflect(episode)
        self.after_task(task, episode)
        return episode

    def _reflect(self, episode: Episode) -> None:
        reply = self.client.complete([*episode.traj, {"role": "user", "content": REFLECTION_PROMPT}])
        record_call(episode, reply)
        episode.traj.append({"role": "assistant", "content": reply.message.get("content") or ""})


class ReflectiveReActAgent(ReActAgent):
    reflect = True
