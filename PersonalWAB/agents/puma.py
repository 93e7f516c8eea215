"""PUMA's agent (`--agent_strategy puma`): one function call per task, no API model.

The function comes from a function file (instruction -> generated output, see
`PUMA/generate.py`) or, with `--puma_generate`, from the fine-tuned model at
`--puma_model_path`. The parameter comes from a parameter file (instruction ->
generated output, or a list whose first entry counts) or is generated live with
the PUMA parameter prompt over the task-specific memory.

The prompts and the parsing of generated parameters live here so the training
data (`PUMA/data.py`), the generation step and the agent use the same text.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from PersonalWAB.agents.base import Agent
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.data.instruction_files import read_instruction_outputs
from PersonalWAB.errors import DataError
from PersonalWAB.memory import RECOMMEND, REVIEW, SEARCH, TASK_FUNCTIONS, normalise_function_name
from PersonalWAB.protocol import Protocol
from PersonalWAB.types import RESPOND, STOP, Action, Episode

SYSTEM_PROMPT = "PUMA agent: function and parameters from a fine-tuned model (or its generated files)."
TASK_TYPE = {SEARCH: "search", RECOMMEND: "recommend", REVIEW: "review"}


def truncate_tokens(text: str, tokenizer: Any, max_tokens: int | None) -> str:
    """The start of `text` that fits in `max_tokens` tokens of `tokenizer` (all of it with None)."""
    if tokenizer is None or max_tokens is None:
        return text
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) <= max_tokens:
        return text
    return tokenizer.decode(ids[:max(0, max_tokens)], skip_special_tokens=True)


def taskspe_memory_text(protocol: Protocol, data: BenchmarkData, task: dict[str, Any], function_name: str,
                        memory_length: int, tokenizer: Any = None, mem_token_length: int | None = None) -> str:
    """The task-specific memory for `function_name`, cut to `mem_token_length` tokens."""
    from PersonalWAB.memory import retrieve_memory

    task_type = TASK_TYPE[function_name]
    behaviours = retrieve_memory(data, task, "taskspe", memory_length, protocol=protocol, task_type=task_type)
    return truncate_tokens(protocol.puma_memory(behaviours, task_type), tokenizer, mem_token_length)


def parameter_prompt(protocol: Protocol, instruction: str, function_name: str, memory_text: str,
                     product: dict[str, Any] | None = None) -> str:
    if function_name not in TASK_FUNCTIONS:
        raise ValueError(f"unknown function {function_name!r}; expected one of {TASK_FUNCTIONS}")
    return protocol.puma_param_prompt(instruction, function_name, memory_text,
                                      product if function_name == REVIEW else None)


def parse_asins(text: str) -> list[str]:
    """Comma-separated ASINs, stripped, empties dropped, de-duplicated keeping the first
    occurrence's position (the release used an unordered set)."""
    return list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def parse_parameters(function_name: str, output: str, say_prefix: str = "Say:") -> Action:
    """The action a generated parameter stands for: a leading `say_prefix` (any case) is a
    message to the user, `stop` ends the task, anything else fills `function_name`'s parameter."""
    text = output.strip()
    if text.lower().startswith(say_prefix.lower()):
        return Action(RESPOND, {"content": text[len(say_prefix):].strip()})
    if text.lower() == STOP:
        return Action(STOP)
    if function_name == RECOMMEND:
        return Action(function_name, {"product_sequence": parse_asins(text)})
    if function_name == SEARCH:
        return Action(function_name, {"query": text})
    if function_name == REVIEW:
        return Action(function_name, {"review": text})
    raise ValueError(f"unknown function {function_name!r}; expected one of {TASK_FUNCTIONS}")


def load_output_file(path: Path | str, what: str) -> dict[str, str]:
    """instruction -> generated output (the first one where the file holds a list)."""
    outputs = read_instruction_outputs(path, what)
    for instruction, output in outputs.items():
        if not isinstance(output, str):
            raise DataError(f"{path}: the output for {instruction[:60]!r} is not a string (or list of strings)")
    return outputs


class LiveGenerator:
    """Greedy generation with a (merged or LoRA) causal LM, loaded on first use."""

    def __init__(self, model_path: str, max_new_tokens: int = 256):
        self.model_path = model_path
        self.max_new_tokens = max_new_tokens
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @property
    def tokenizer(self) -> Any:
        self._load()
        return self._tokenizer

    def _load(self) -> None:
        with self._lock:
            if self._model is None:
                from PUMA.modeling import load_causal_lm

                self._model, self._tokenizer = load_causal_lm(self.model_path, for_generation=True)

    def generate(self, prompt: str, max_new_tokens: int | None = None) -> str:
        from PUMA.modeling import generate_texts

        self._load()
        with self._lock:
            return generate_texts(self._model, self._tokenizer, [prompt],
                                  max_new_tokens=max_new_tokens or self.max_new_tokens)[0][0]


class PumaAgent(Agent):
    def __init__(self, data: BenchmarkData, function_file: str | None = None, param_file: str | None = None,
                 generator: LiveGenerator | None = None, memory_length: int = 50, mem_token_length: int = 768):
        if generator is None and not (function_file and param_file):
            raise ValueError("--agent_strategy puma needs --puma_function_file and --puma_param_file, "
                             "or --puma_generate with --puma_model_path")
        self.data = data
        self.functions = load_output_file(function_file, "function") if function_file else {}
        self.params = load_output_file(param_file, "parameter") if param_file else {}
        self.generator = generator
        self.memory_length = memory_length
        self.mem_token_length = mem_token_length

    def choose_function(self, protocol: Protocol, task: dict[str, Any]) -> tuple[str | None, str]:
        """(the task function named, the raw output); None when the output names none."""
        instruction = task["task"]
        if instruction in self.functions:
            raw = self.functions[instruction]
        elif self.generator is not None:
            raw = self.generator.generate(protocol.puma_function_prompt(instruction), max_new_tokens=16)
        else:
            raise ValueError(f"the function file has no entry for instruction {instruction[:80]!r}")
        return normalise_function_name(raw), raw

    def parameter_output(self, protocol: Protocol, task: dict[str, Any], function_name: str) -> str:
        instruction = task["task"]
        if instruction in self.params:
            return self.params[instruction]
        if self.generator is None:
            raise ValueError(f"the parameter file has no entry for instruction {instruction[:80]!r}")
        memory = taskspe_memory_text(protocol, self.data, task, function_name, self.memory_length,
                                     self.generator.tokenizer, self.mem_token_length)
        prompt = parameter_prompt(protocol, instruction, function_name, memory, task["target"]["product_info"])
        return self.generator.generate(prompt)

    def decide(self, protocol: Protocol, task: dict[str, Any]) -> Action:
        function_name, raw = self.choose_function(protocol, task)
        if function_name is None:  # a function output naming no tool: a message, scored (0, 0)
            return Action(RESPOND, {"content": raw})
        return parse_parameters(function_name, self.parameter_output(protocol, task, function_name),
                                protocol.text("puma.agent.say_prefix"))

    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        observation, info = env.reset(task_index)
        episode = Episode(traj=[{"role": "system", "content": SYSTEM_PROMPT},
                                {"role": "user", "content": observation}])
        done = False
        while not done:
            action = self.decide(env.protocol, info["task"]) if not episode.actions else Action(STOP)
            episode.usage.add_call()
            episode.actions.append(action.to_dict())
            if action.name == RESPOND:
                episode.traj.append({"role": "assistant", "content": action.arguments.get("content", "")})
                observation, _, done, _ = env.step(action)
                if observation:
                    episode.traj.append({"role": "user", "content": observation})
                continue
            call_id = f"call_{len(episode.actions) - 1}"
            episode.traj.append({
                "role": "assistant", "content": None,
                "tool_calls": [{"id": call_id, "type": "function",
                                "function": {"name": action.name, "arguments": json.dumps(action.arguments)}}],
            })
            observation, _, done, _ = env.step(action)
            episode.traj.append({"role": "tool", "tool_call_id": call_id, "name": action.name,
                                 "content": observation})
        return episode
