"""PUMA's agent (`--agent_strategy puma`): one decision per task, no API model.

The function comes from a function file (instruction -> generated output, see
`PUMA/generate.py`) or, with `--puma_generate`, from the fine-tuned model at
`--puma_model_path`. The parameter comes from a parameter file (instruction ->
generated output, or a list whose first entry counts) or is generated live with
the PUMA parameter prompt over the task-specific memory.

The task-specific memory, the parameter prompts and the reading of generated
parameters live here so the training data (`PUMA/data.py`), the scoring step and the
agent share them. `--puma_recipe` (`PUMA.recipe`) decides what differs: the release's
agent evaluates with its own prompt, formats the memory for the true task type and reads
outputs with its prefix rules and exact function names, and repeats its action every step
of a multi-turn episode; the improved recipe evaluates with the training prompt, reads a
function name leniently and stops after its one action.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.agents.base import Agent
from PersonalWAB.data.instruction_files import read_instruction_outputs
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.errors import DataError
from PersonalWAB.memory import (RECOMMEND, REVIEW, SEARCH, TASK_FUNCTIONS, TASK_TYPE_OF_FUNCTION, most_relevant,
                                newest_first, normalise_function_name, past_behaviours)
from PersonalWAB.protocol import Protocol
from PersonalWAB.types import RESPOND, STOP, Action, Episode

SYSTEM_PROMPT = "PUMA agent: function and parameters from a fine-tuned model (or its generated files)."
TASK_TYPE = TASK_TYPE_OF_FUNCTION
FUNCTION_NEW_TOKENS = 32  # function predictions (the release's generate_function.sh)
PARAM_NEW_TOKENS = 256  # parameters, greedy, at evaluation (the release's agent)
# The behaviour text relevance ranks: the release's PUMA data scripts and its agent each use their own.
DATA_RELEVANCE_TEXT = "puma.behaviour"
AGENT_RELEVANCE_TEXT = "memory.behaviour"


def prompt_cue(template: str) -> str:
    """A prompt template's last line (`### Tool Parameter:` and its line break), after which
    the release reads what its model generated."""
    return template[template.rfind("\n", 0, len(template) - 1) + 1:]


def cut_to_tokens(text: str, tokenizer: Any, max_tokens: int | None) -> str:
    """`text` through the tokenizer as the release cuts memory: encoded with truncation to
    `max_tokens` tokens *including* the special tokens the tokenizer adds (Llama's BOS, so
    767 memory tokens at 768), then decoded without them. No tokenizer or limit: as it is."""
    if tokenizer is None or max_tokens is None:
        return text
    room = max(0, max_tokens - tokenizer.num_special_tokens_to_add())
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:room]
    return tokenizer.decode(ids, skip_special_tokens=True)


def puma_behaviours(protocol: Protocol, data: BenchmarkData, task: dict[str, Any], task_type: str, k: int,
                    relevance_text: str = DATA_RELEVANCE_TEXT) -> list[dict[str, Any]]:
    """PUMA's task-specific memory before rendering: the `k` past behaviours whose
    `relevance_text` is closest to the instruction, best first; for a recommendation newest
    first, so the latest purchases survive the token cut (as the release's PUMA orders it)."""
    chosen = most_relevant(data, task, past_behaviours(data, task), k, protocol, relevance_text)
    return newest_first(chosen) if task_type == "recommend" else chosen


def puma_memory_text(protocol: Protocol, data: BenchmarkData, task: dict[str, Any], task_type: str, k: int,
                     tokenizer: Any = None, mem_token_length: int | None = None,
                     relevance_text: str = DATA_RELEVANCE_TEXT) -> str:
    """The task-specific memory of a prompt: entries joined by `|`, cut to `mem_token_length` tokens."""
    behaviours = puma_behaviours(protocol, data, task, task_type, k, relevance_text)
    return cut_to_tokens(protocol.puma_memory(behaviours, task_type), tokenizer, mem_token_length)


def parameter_prompt(protocol: Protocol, instruction: str, function_name: str, memory_text: str,
                     product: dict[str, Any] | None = None, *, agent: bool = False) -> str:
    """The parameter prompt for `function_name` (the product is shown for a review only);
    `agent=True`: the release agent's evaluation prompt instead of the training prompt."""
    if function_name not in TASK_FUNCTIONS:
        raise ValueError(f"unknown function {function_name!r}; expected one of {TASK_FUNCTIONS}")
    return protocol.puma_param_prompt(instruction, function_name, memory_text,
                                      product if function_name == REVIEW else None, agent=agent)


@dataclass(frozen=True)
class OutputRules:
    """How a generated parameter is read: a message to the user, a stop, or the parameter.

    `release=True` follows the release's agent (case-sensitive prefix, the message after
    the last separator, any output starting with the stop word stops); otherwise the
    prefix matches in any case and only the exact stop word stops."""

    say_prefix: str
    say_separator: str
    stop_word: str
    release: bool

    @classmethod
    def of(cls, protocol: Protocol, release: bool) -> "OutputRules":
        return cls(protocol.text("puma.agent.say_prefix"), protocol.text("puma.agent.say_separator"),
                   protocol.text("puma.agent.stop_prefix"), release)

    def special(self, text: str) -> Action | None:
        """The message or stop `text` stands for, None for a parameter."""
        if self.release:
            if text.startswith(self.say_prefix):
                return Action(RESPOND, {"content": text.split(self.say_separator)[-1]})
            return Action(STOP) if text.startswith(self.stop_word) else None
        if text.lower().startswith(self.say_prefix.lower()):
            return Action(RESPOND, {"content": text[len(self.say_prefix):].strip()})
        return Action(STOP) if text.lower() == self.stop_word.lower() else None


def parse_asins(text: str) -> list[str]:
    """Comma-separated ASINs, stripped, empties dropped, de-duplicated keeping the first
    occurrence's position (the release used an unordered set)."""
    return list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def parse_parameters(function_name: str, output: str, rules: OutputRules | None = None) -> Action:
    """The action a generated parameter stands for. With `rules`, a message or a stop is
    recognised first; without, every output is the parameter (the release scores its DPO
    candidates that way)."""
    text = output.strip()
    special = rules.special(text) if rules is not None else None
    if special is not None:
        return special
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
    """Greedy generation with a (merged or LoRA) causal LM, loaded on first use onto the GPU
    when there is one, in `dtype` (`auto`: the recipe's GPU dtype there, float32 on a CPU)."""

    def __init__(self, model_path: str, dtype: str = "auto", gpu_dtype: str = "float16",
                 max_new_tokens: int = PARAM_NEW_TOKENS, release: bool = False):
        self.model_path = model_path
        self.dtype = dtype
        self.gpu_dtype = gpu_dtype
        self.max_new_tokens = max_new_tokens
        self.release = release  # the release's agent: adapter unmerged, whole sequence read after the cue
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
                from PUMA.modeling import inference_device, load_causal_lm, resolve_dtype

                device = inference_device()
                dtype = resolve_dtype(self.dtype, device, self.gpu_dtype)
                model, self._tokenizer = load_causal_lm(self.model_path, for_generation=True, dtype=dtype,
                                                        merge=not self.release)
                self._model = model.to(device)

    def generate(self, prompt: str, max_new_tokens: int | None = None, cue: str | None = None) -> str:
        """Greedy continuation of `prompt`; with `cue` (release), the whole decoded sequence
        after the prompt's last `cue`, as the release's agent reads it."""
        from PUMA.modeling import generate_texts

        self._load()
        with self._lock:
            return generate_texts(self._model, self._tokenizer, [prompt],
                                  max_new_tokens=max_new_tokens or self.max_new_tokens,
                                  release_after=cue if self.release else None)[0][0]


class PumaAgent(Agent):
    def __init__(self, data: BenchmarkData, function_file: str | None = None, param_file: str | None = None,
                 generator: LiveGenerator | None = None, memory_length: int = 10, mem_token_length: int = 768,
                 recipe: str = "release"):
        from PUMA.recipe import get_recipe

        if generator is None and not (function_file and param_file):
            raise ValueError("--agent_strategy puma needs --puma_function_file and --puma_param_file, "
                             "or --puma_generate with --puma_model_path")
        self.data = data
        self.functions = load_output_file(function_file, "function") if function_file else {}
        self.params = load_output_file(param_file, "parameter") if param_file else {}
        self.generator = generator
        self.memory_length = memory_length
        self.mem_token_length = mem_token_length
        self.recipe = get_recipe(recipe)

    def choose_function(self, protocol: Protocol, task: dict[str, Any]) -> tuple[str | None, str]:
        """(the task function named, the raw output); None when the output names none.

        Release recipe: the output must be a function's name exactly, as the release compares
        the stored output (its generation strips it); improved: the one function it names
        anywhere, in any case."""
        instruction = task["task"]
        if instruction in self.functions:
            raw = self.functions[instruction]
        elif self.generator is not None:
            raw = self.generator.generate(protocol.puma_function_prompt(instruction), FUNCTION_NEW_TOKENS)
        else:
            raise ValueError(f"the function file has no entry for instruction {instruction[:80]!r}")
        if self.recipe.strict_release_parsing:
            return (raw if raw in TASK_FUNCTIONS else None), raw
        return normalise_function_name(raw), raw

    def live_prompt(self, protocol: Protocol, task: dict[str, Any], function_name: str) -> str:
        """The parameter prompt the live model reads. Release: the agent's own prompt, memory
        formatted for the true task type (the function only names the tool), the word the
        release writes for a user without history. Improved: the training prompt throughout."""
        training = self.recipe.training_prompt_at_eval
        memory_type = TASK_TYPE[function_name] if self.recipe.predicted_type_memory else task["type"]
        if past_behaviours(self.data, task) or training:
            memory = puma_memory_text(protocol, self.data, task, memory_type, self.memory_length,
                                      self.generator.tokenizer, self.mem_token_length,
                                      DATA_RELEVANCE_TEXT if training else AGENT_RELEVANCE_TEXT)
        else:
            memory = cut_to_tokens(protocol.text("puma.agent.no_memory"), self.generator.tokenizer,
                                   self.mem_token_length)
        return parameter_prompt(protocol, task["task"], function_name, memory, task["target"]["product_info"],
                                agent=not training)

    def parameter_output(self, protocol: Protocol, task: dict[str, Any], function_name: str) -> str:
        instruction = task["task"]
        if instruction in self.params:
            return self.params[instruction]
        if self.generator is None:
            raise ValueError(f"the parameter file has no entry for instruction {instruction[:80]!r}")
        template = "puma.param_prompt" if self.recipe.training_prompt_at_eval else "puma.agent.param_prompt"
        return self.generator.generate(self.live_prompt(protocol, task, function_name),
                                       cue=prompt_cue(protocol.text(template)))

    def decide(self, protocol: Protocol, task: dict[str, Any]) -> Action:
        return self.decision(protocol, task)[0]

    def decision(self, protocol: Protocol, task: dict[str, Any]) -> tuple[Action, str | None]:
        """(the action, None) or, for a function output naming no task function, (a message
        carrying that output, scored (0, 0), then the task stops; a note saying why).

        Release recipe: as the release's agent, the parameter output is read first, so a
        `Say:` message or a stop stands even then (the release's agent builds its parameter
        prompt for a review when the function is unknown); any other output leaves the
        release's action unset (PUMA/recipe.py, RELEASE_BUG_FIXES)."""
        function_name, raw = self.choose_function(protocol, task)
        rules = OutputRules.of(protocol, release=self.recipe.strict_release_parsing)
        if function_name is not None:
            return parse_parameters(function_name, self.parameter_output(protocol, task, function_name), rules), None
        if self.recipe.strict_release_parsing and (task["task"] in self.params or self.generator is not None):
            special = rules.special(self.parameter_output(protocol, task, REVIEW).strip())
            if special is not None:
                return special, None
        return Action(RESPOND, {"content": raw}), f"the function output names no task function: {raw[:200]!r}"

    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        """One decision per task. Release recipe: the decided action is sent every step, as the
        release's agent decides again each step (greedy or from files: the same output), until
        the episode ends (single-turn: at once; multi-turn: `stop` or `--max_steps`). Improved,
        or a failed decision: the action once, then `stop`."""
        observation, info = env.reset(task_index)
        episode = Episode(traj=[{"role": "system", "content": SYSTEM_PROMPT},
                                {"role": "user", "content": observation}])
        decided, failure = self.decision(env.protocol, info["task"])
        if failure is not None:
            episode.notes["puma_function"] = failure
        repeat = self.recipe.repeat_action and failure is None
        done = False
        while not done:
            action = decided if repeat or not episode.actions else Action(STOP)
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
