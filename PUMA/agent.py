"""PUMA's agent (`--agent_strategy puma`): one decision per task, no API model.

The function comes from a function file (instruction -> generated output, see
`PUMA/generate.py`) or, with `--puma_generate`, from the fine-tuned model at
`--puma_model_path`. The parameter comes from a parameter file (instruction ->
generated output, or a list whose first entry counts) or is generated live with
the PUMA parameter prompt over the task-specific memory.

The task-specific memory, the parameter prompts and the reading of generated parameters are
`PUMA.prompting`'s, shared with training and scoring. The `--puma_*` settings (their defaults
from `--recipe`'s `agent` section) decide what differs: the release's agent evaluates with its
own prompt, formats the memory for the true task type, reads outputs with its prefix rules and
exact function names, and repeats its action every step of a multi-turn episode; the improved
recipe evaluates with the training prompt, reads a function name leniently and stops after its
one action.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PersonalWAB import trace
from PersonalWAB.agents.base import Agent
from PersonalWAB.data.instruction_files import read_instruction_outputs
from PersonalWAB.data.loader import BenchmarkData, load_benchmark_data
from PersonalWAB.data.schema import REVIEW, TASK_FUNCTIONS, TASK_TYPE_OF_FUNCTION
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.errors import DataError
from PersonalWAB.memory import normalise_function_name, past_behaviours
from PersonalWAB.protocol import Protocol
from PersonalWAB.types import RESPOND, STOP, Action, Episode
from PUMA.agent_settings import LiveDecoding, PumaAgentSettings, puma_settings
from PUMA.prompting import (FUNCTION_NEW_TOKENS, MEMORY_TEMPLATE, PARAM_NEW_TOKENS, PUMA_TEMPLATE,
                            OutputRules, cut_to_tokens, parameter_prompt, parse_parameters, prompt_cue,
                            puma_memory_text)
from PersonalWAB.schema_types import Task

SYSTEM_PROMPT = "PUMA agent: function and parameters from a fine-tuned model (or its generated files)."
NEEDS_MODEL_PATH = "--puma_generate needs --puma_model_path (a merged model or a LoRA adapter folder)"
NEEDS_INPUTS = ("--agent_strategy puma needs --puma_function_file and --puma_param_file, "
                "or --puma_generate with --puma_model_path")


def load_output_file(path: Path | str, what: str) -> dict[str, str]:
    """instruction -> generated output (the first one where the file holds a list)."""
    outputs = read_instruction_outputs(path, what)
    for instruction, output in outputs.items():
        if not isinstance(output, str):
            raise DataError(f"{path}: the output for {instruction[:60]!r} is not a string (or list of strings)")
    return outputs


class LiveGenerator:
    """Greedy generation with a (merged or LoRA) causal LM, loaded on first use onto the GPU
    when there is one, in `dtype` (`auto`: `gpu_dtype` there, float32 on a CPU)."""

    def __init__(self, model_path: str, dtype: str = "auto", gpu_dtype: str = "float16",
                 max_new_tokens: int = PARAM_NEW_TOKENS, decoding: LiveDecoding = "new_tokens"):
        self.model_path = model_path
        self.dtype = dtype
        self.gpu_dtype = gpu_dtype
        self.max_new_tokens = max_new_tokens
        self.decoding = decoding  # release: as the release's agent, adapter unmerged, the whole sequence after the cue
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
                                                        merge=self.decoding != "release")
                self._model = model.to(device)

    def generate(self, prompt: str, max_new_tokens: int | None = None, cue: str | None = None) -> str:
        """Greedy continuation of `prompt`; with `cue` (release), the whole decoded sequence
        after the prompt's last `cue`, as the release's agent reads it."""
        from PUMA.modeling import generate_texts

        self._load()
        with self._lock:
            return generate_texts(self._model, self._tokenizer, [prompt],
                                  max_new_tokens=max_new_tokens or self.max_new_tokens,
                                  release_after=cue if self.decoding == "release" else None)[0][0]


class PumaAgent(Agent):
    def __init__(self, data: BenchmarkData, function_file: str | None = None, param_file: str | None = None,
                 generator: LiveGenerator | None = None, memory_length: int = 10, mem_token_length: int = 768,
                 settings: PumaAgentSettings | None = None):
        if generator is None and not (function_file and param_file):
            raise ValueError(NEEDS_INPUTS)
        self.data = data
        self.functions = load_output_file(function_file, "function") if function_file else {}
        self.params = load_output_file(param_file, "parameter") if param_file else {}
        self.generator = generator
        self.memory_length = memory_length
        self.mem_token_length = mem_token_length
        self.settings = settings or PumaAgentSettings()

    @property
    def live(self) -> LiveGenerator:
        """The model generating live (asked for only where no stored output answers)."""
        if self.generator is None:
            raise ValueError(NEEDS_INPUTS)
        return self.generator

    def choose_function(self, protocol: Protocol, task: Task) -> tuple[str | None, str]:
        """(the task function named, the raw output); None when the output names none.

        `--puma_parsing strict`: the output must be a function's name exactly, as the release
        compares the stored output (its generation strips it); lenient: the one function it
        names anywhere, in any case."""
        instruction = task["task"]
        if instruction in self.functions:
            raw = self.functions[instruction]
        elif self.generator is not None:
            prompt = protocol.puma_function_prompt(instruction)
            raw = self.generator.generate(prompt, FUNCTION_NEW_TOKENS)
            trace.record("generation", purpose="function", instruction=instruction, prompt=prompt, output=raw)
        else:
            raise ValueError(f"the function file has no entry for instruction {instruction[:80]!r}")
        if self.settings.puma_parsing == "strict":
            return (raw if raw in TASK_FUNCTIONS else None), raw
        return normalise_function_name(raw), raw

    def live_prompt(self, protocol: Protocol, task: Task, function_name: str) -> str:
        """The parameter prompt the live model reads. `--puma_prompt release`: the agent's own
        prompt, the word the release writes for a user without history; training: the training
        prompt throughout. The memory is formatted for `--puma_memory_type` (the release: the
        true task type; the function only names the tool)."""
        training = self.settings.puma_prompt == "training"
        memory_type = (TASK_TYPE_OF_FUNCTION[function_name] if self.settings.puma_memory_type == "predicted"
                       else task["type"])
        if past_behaviours(self.data, task) or training:
            memory = puma_memory_text(protocol, self.data, task, memory_type, self.memory_length,
                                      self.live.tokenizer, self.mem_token_length,
                                      PUMA_TEMPLATE if training else MEMORY_TEMPLATE)
        else:
            memory = cut_to_tokens(protocol.text("puma.agent.no_memory"), self.live.tokenizer,
                                   self.mem_token_length)
        return parameter_prompt(protocol, task["task"], function_name, memory, task["target"]["product_info"],
                                agent=not training)

    def parameter_output(self, protocol: Protocol, task: Task, function_name: str) -> str:
        instruction = task["task"]
        if instruction in self.params:
            return self.params[instruction]
        if self.generator is None:
            raise ValueError(f"the parameter file has no entry for instruction {instruction[:80]!r}")
        template = "puma.param_prompt" if self.settings.puma_prompt == "training" else "puma.agent.param_prompt"
        prompt = self.live_prompt(protocol, task, function_name)
        output = self.generator.generate(prompt, cue=prompt_cue(protocol.text(template)))
        trace.record("generation", purpose="parameter", instruction=instruction, prompt=prompt, output=output)
        return output

    def decide(self, protocol: Protocol, task: Task) -> Action:
        return self.decision(protocol, task)[0]

    def decision(self, protocol: Protocol, task: Task) -> tuple[Action, str | None]:
        """(the action, None) or, for a function output naming no task function, (a message
        carrying that output, scored (0, 0), then the task stops; a note saying why).

        `--puma_parsing strict`: as the release's agent, the output is read as it is (not stripped) and
        the parameter output first, so a `Say:` message or a stop stands even then (the
        release's agent builds its parameter prompt for a review when the function is unknown);
        any other output leaves the release's action unset (`bug_fixes` in
        PUMA/configs/release.yaml)."""
        function_name, raw = self.choose_function(protocol, task)
        parsing = self.settings.puma_parsing
        rules = OutputRules.of(protocol, parsing)
        if function_name is not None:
            output = self.parameter_output(protocol, task, function_name)
            return parse_parameters(function_name, output, rules, parsing), None
        if parsing == "strict" and (task["task"] in self.params or self.generator is not None):
            special = rules.special(self.parameter_output(protocol, task, REVIEW))
            if special is not None:
                return special, None
        return Action(RESPOND, {"content": raw}), f"the function output names no task function: {raw[:200]!r}"

    def solve(self, env: PWABEnv, task_index: int) -> Episode:
        """One decision per task. `--puma_repeat_action 1`: the decided action is sent every step,
        as the release's agent decides again each step (greedy or from files: the same output),
        until the episode ends (single-turn: at once; multi-turn: `stop` or `--max_steps`). 0, or
        a failed decision: the action once, then `stop`."""
        observation, info = env.reset(task_index)
        episode = Episode(traj=[{"role": "system", "content": SYSTEM_PROMPT},
                                {"role": "user", "content": observation}])
        decided, failure = self.decision(env.protocol, info["task"])
        if failure is not None:
            episode.notes["puma_function"] = failure
        repeat = self.settings.puma_repeat_action and failure is None
        done = False
        while not done:
            action = decided if repeat or not episode.actions else Action(STOP)
            episode.usage.add_call()
            episode.record_action(action)
            observation, _, done, _ = env.step(action)
            if action.name == RESPOND:
                episode.record_message("assistant", action.arguments.get("content", ""))
                if observation:
                    episode.record_message("user", observation)
            else:
                episode.record_tool_call(action, observation)
        return episode


def build(data: BenchmarkData, config: Any) -> PumaAgent:
    """The `puma` strategy for a run (the registry's factory): outputs read from files, or
    generated live by `--puma_model_path`, whose memory ranking needs its embeddings first."""
    puma = puma_settings(config)
    generator = None
    if puma.puma_generate:
        if not puma.puma_model_path:
            raise ValueError(NEEDS_MODEL_PATH)
        from PersonalWAB.memory.embeddings import build_behaviour_embeddings
        from PersonalWAB.protocol import load_protocol

        # the task-specific memory ranks behaviours by relevance (the training prompt's by training's text)
        template = PUMA_TEMPLATE if puma.puma_prompt == "training" else MEMORY_TEMPLATE
        build_behaviour_embeddings(data, load_protocol(config.protocol_file), log=None, template=template)
        generator = LiveGenerator(puma.puma_model_path, puma.puma_dtype, puma.puma_gpu_dtype,
                                  decoding=puma.puma_decoding)
    return PumaAgent(data, puma.puma_function_file, puma.puma_param_file, generator,
                     memory_length=config.memory_length, mem_token_length=puma.mem_token_length, settings=puma)


def check_settings(config: Any) -> str | None:
    """What is wrong with a run's PUMA settings (None: nothing), checked before any file is
    written: its inputs, a known recipe and dtype, and outputs made with the same recipe."""
    from PUMA.modeling import DTYPES
    from PUMA.recipe import check_inputs, get_recipe

    puma = puma_settings(config)
    if puma.puma_generate and not puma.puma_model_path:
        return NEEDS_MODEL_PATH
    if not puma.puma_generate and not (puma.puma_function_file and puma.puma_param_file):
        return NEEDS_INPUTS
    if puma.puma_generate and config.agent_memory != "taskspe":
        return (f"--agent_memory {config.agent_memory}: the live puma agent reads task-specific memory (taskspe); "
                "leave --agent_memory out or give taskspe")
    if puma.mem_token_length < 1:
        return f"--mem_token_length {puma.mem_token_length}: must be at least 1"
    if puma.puma_dtype not in DTYPES:
        return f"--puma_dtype {puma.puma_dtype}: expected one of {', '.join(DTYPES)}"
    try:
        check_inputs(get_recipe(puma.recipe),
                     {"--puma_function_file": puma.puma_function_file,
                      "--puma_param_file": puma.puma_param_file,
                      "--puma_model_path": puma.puma_model_path if puma.puma_generate else None})
    except ValueError as error:
        return str(error).replace("this step runs", "this run uses")
    return None if puma.puma_generate else files_cover_the_run(config)


def files_cover_the_run(config: Any) -> str | None:
    """Without live generation each task the run runs needs its function and parameter outputs in the
    files: files made for another split or data folder would end every task in an error, and so would
    the resume printed after it. What is wrong, or None."""
    from PersonalWAB.paths import default_data_dir
    from PUMA.step_inputs import holding_split, refuse_part

    puma = puma_settings(config)
    data = load_benchmark_data(config.data_dir or default_data_dir())
    if config.task_split not in data.tasks:
        return None  # the run's own checks name the split
    split = data.split(config.task_split)
    tasks = split[config.start_index:config.task_end(len(split))]
    for flag, path, what in (("--puma_function_file", puma.puma_function_file, "function"),
                             ("--puma_param_file", puma.puma_param_file, "parameter")):
        try:
            refuse_part(flag, path)
        except DataError as error:
            return str(error)
        outputs = load_output_file(str(path), what)  # both given: checked before
        missing = [task["task"] for task in tasks if task["task"] not in outputs]
        if missing:
            other = holding_split(data, list(outputs), config.task_split)
            hint = (f"it holds the {other!r} split's instructions: give the files made for the "
                    f"{config.task_split} split" if other else
                    "it was made for another data folder or split: give the files generated for this run's data and "
                    "split")
            return (f"{flag} {path}: no {what} output for {len(missing)} of the {len(tasks)} {config.task_split} "
                    f"task(s) this run runs (e.g. {missing[0][:80]!r}); {hint}")
    return None


def recorded_settings(config: Any) -> dict[str, Any]:
    """`run_args.agent_settings`: where the outputs come from and, when generated live, every
    decoding field of the function and parameter generations (greedy, the model folder's
    generation defaults ignored)."""
    puma = puma_settings(config)
    if not puma.puma_generate:
        return {"outputs": "files"}
    from PUMA.modeling import decoding_config, effective_decoding

    return {"outputs": "generated", "decoding": {
        part: effective_decoding(decoding_config(None, max_new_tokens=tokens,
                                                 decoding="release" if puma.puma_decoding == "release" else "project"))
        for part, tokens in (("function", FUNCTION_NEW_TOKENS), ("param", PARAM_NEW_TOKENS))}}


def departures(config: Any) -> list[str]:
    """How a run's PUMA agent departs from the release's: each of its settings whose value is not the
    release's (the recipe's, or given), with release.yaml's reason."""
    from PersonalWAB.settings import resolved
    from PUMA.recipe import AGENT, get_recipe

    puma = puma_settings(config)
    return [f"recipe {puma.recipe}: {line}"
            for line in get_recipe(puma.recipe).departure_lines(AGENT, resolved(puma))]
