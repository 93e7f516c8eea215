"""Native tool-calling agent (`function_calling`) and RecMind (`recmind`), which is
the same loop with a product-details lookup offered and a long review memory."""

from __future__ import annotations

from typing import Any

from PersonalWAB.agents.llm_agent import SINGLE_TURN_CALL_LIMIT, LLMAgent, parse_arguments, record_call
from PersonalWAB.agents.prompts import system_prompt
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.types import RESPOND, Action, Episode

NOT_EXECUTED = "Not executed: make one function call at a time."


class FunctionCallingAgent(LLMAgent):
    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        observation, info = env.reset(task_index)
        task = info["task"]
        memory_text, suggested = self.memory_text(task)
        episode = Episode(traj=[
            {"role": "system", "content": system_prompt(env.single_turn, env.max_steps, memory_text,
                                                        self.offers_details, suggested)},
            {"role": "user", "content": observation},
        ])
        budget = SINGLE_TURN_CALL_LIMIT if env.single_turn else env.max_steps
        done = False
        while not done and episode.steps < budget:
            reply = self.client.complete(episode.traj, tools=env.tools_info)
            record_call(episode, reply)
            episode.traj.append(reply.message)
            done = self._act(env, episode, reply.message)
        self.after_task(task, episode)
        return episode

    def _act(self, env: PWABEnv, episode: Episode, message: dict[str, Any]) -> bool:
        """Carry out the model's first tool call, or treat its text as a message to the user."""
        calls = message.get("tool_calls") or []
        if not calls:
            action = Action(RESPOND, {"content": message.get("content") or ""})
            episode.actions.append(action.to_dict())
            observation, _, done, _ = env.step(action)
            if not done:
                episode.traj.append({"role": "user", "content": observation})
            return done
        first, *extra = calls
        action = Action(first["function"]["name"], parse_arguments(first["function"]["arguments"]))
        episode.actions.append(action.to_dict())
        observation, _, done, _ = env.step(action)
        episode.traj.append({"role": "tool", "tool_call_id": first["id"], "name": action.name,
                             "content": observation})
        for call in extra:
            episode.traj.append({"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                                 "content": NOT_EXECUTED})
        return done


class RecMindAgent(FunctionCallingAgent):
    """RecMind: may look products up by ASIN before acting; pairs with `--agent_memory recmind`."""

    offers_details = True
