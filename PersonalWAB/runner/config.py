"""The settings of a run: `RunConfig`, each field carrying its command-line help, and the
`run.py` parser generated from those fields, so every default is written once."""

from __future__ import annotations

import argparse
from dataclasses import Field, dataclass, field, fields
from typing import Any

from PersonalWAB.agents.registry import STRATEGIES
from PersonalWAB.engines.search import BACKENDS
from PersonalWAB.envs.users import USER_MODES
from PersonalWAB.memory import MEMORY_MODES

_VALUE_TYPES = {int: int, float: float}  # settings of other defaults (str, None) are strings, taken as typed


def setting(default: Any, help: str, *, choices: tuple[Any, ...] | list[Any] | None = None,
            metavar: str | None = None, default_text: str | None = None, zero_one: bool = False) -> Any:
    """A RunConfig field and its flag: `help` without the default (the parser adds it),
    `default_text` where the default (None) stands for something worked out at run time,
    `zero_one` for a bool given as `--name`, `--name 1` or `--name 0`; other bools are
    plain switches."""
    meta = {"help": help, "choices": choices, "metavar": metavar, "default_text": default_text, "zero_one": zero_one}
    return field(default=default, metadata=meta)


@dataclass
class RunConfig:
    """The settings of one run, each the `run.py` flag of its name (`--model`, ...)."""

    env: str = setting("pwab", "benchmark environment", choices=["pwab"])
    model: str | None = setting(
        None, "the agent's model, any litellm model string (LLM strategies only; offline agents refuse it)")
    user_mode: str = setting(
        "no", "simulated user of the multi-turn track: naive (LLM), human (terminal), offline (rules, no model); "
              "no: single-turn", choices=USER_MODES)
    user_model: str | None = setting(None, "the naive user's model (litellm model string)")
    agent_strategy: str = setting(
        "heuristic", f"agent: one of {', '.join(STRATEGIES)} (heuristic: offline, no model; puma: "
                     "function/parameter files or a fine-tuned model; the others need --model), or your own: "
                     "package.module:ClassName, or the name of a 'pwab.agents' entry point (docs/agents.md)",
        metavar="STRATEGY")
    temperature: float = setting(0.0, "sampling temperature of the agent's model")
    task_split: str = setting("test", "task split to run", choices=["train", "test"])
    agent_memory: str = setting("last", "which of the user's past behaviours go into the agent's prompt",
                                choices=MEMORY_MODES)
    memory_length: int = setting(10, "behaviours in the memory (the release always used 10, whatever its scripts "
                                     "said; another value is a departure)")
    max_steps: int = setting(-1, "-1: single-turn track; N > 0: multi-turn track with N agent steps per task")
    start_index: int = setting(0, "first task of the split to run")
    end_index: int = setting(-1, "task to stop before; -1 runs to the end")
    resume_from: str | None = setting(
        None, "result file of an unfinished run with the same settings: its finished tasks are kept and the file "
              "is completed in place (unless --output)")
    resume_headerless: bool = setting(
        False, "let --resume_from keep the records of a file that holds no run settings (an older format): only "
               "each record's task is checked, not the run's settings")
    verbose: bool = setting(False, "print each task's scores and error tracebacks")
    log_dir: str = setting("results", "folder of derived result names "
                                      "({singleturn,multiturn}/step..._MMDDHHMM.json)")
    max_concurrency: int = setting(1, "tasks run at once (threads)")
    seed: int = setting(2024, "seed of random memory, shuffling and the offline user")
    shuffle: bool = setting(False, "run the tasks in a seeded random order")
    num_trials: int = setting(1, "runs of every task")
    interec_memory_file: str | None = setting(None, "InteRecAgent memory store (for --agent_memory interecagent)")
    puma_param_file: str | None = setting(None, "PUMA parameter outputs per instruction")
    puma_function_file: str | None = setting(None, "PUMA function outputs per instruction")
    puma_generate: bool = setting(
        False, "1: generate PUMA's function and parameters live with --puma_model_path; 0: read them from "
               "--puma_function_file / --puma_param_file", zero_one=True)
    puma_model_path: str | None = setting(None, "fine-tuned model (merged, or a LoRA adapter folder) for "
                                                "--puma_generate")
    puma_recipe: str = setting(
        "release", "how the puma agent reads its model (PUMA/recipe.py): release = the release's evaluation prompt "
                   "and rules; improved = the training prompt, predicted-type memory (a departure)",
        choices=["release", "improved"])
    puma_dtype: str = setting(
        "auto", "live generation precision; auto: the recipe's on a GPU (release fp16, improved bf16), float32 on "
                "a CPU", choices=["auto", "float32", "bfloat16", "float16"])
    mem_token_length: int = setting(768, "tokens of task-specific memory in PUMA's prompt")
    data_dir: str | None = setting(None, "data directory",
                                   default_text="official data if placed, else data/synthetic/small")
    search_backend: str = setting("lucene", "search engine behind search_product_by_query (lucene is the official "
                                            "one)", choices=BACKENDS)
    output: str | None = setting(None, "result file path",
                                 default_text="a new name under --log_dir derived from the settings")
    api_base: str | None = setting(
        None, "base URL of an OpenAI-compatible server (vLLM, Ollama, ...) for the agent's model")
    user_api_base: str | None = setting(None, "the same for the user simulator's model")
    max_retries: int = setting(5, "retries of a model call on rate limits, timeouts and server errors")
    overwrite: bool = setting(False, "replace an existing --output file")
    protocol_file: str | None = setting(
        None, "release protocol pack",
        default_text="PersonalWAB/envs/pwab/data/release_protocol.json when placed; without one the project's own "
                     "texts are used and the run is custom")
    leak_guard: bool = setting(False, "mask the target ASIN and copied review spans in user messages (a departure "
                                      "from the release)")

    def task_end(self, split_size: int) -> int:
        """The task index the run stops before, in a split of `split_size` tasks."""
        return split_size if self.end_index == -1 else min(self.end_index, split_size)


def is_switch(item: Field[Any]) -> bool:
    """Whether a RunConfig field is a plain `--name` switch (a bool given by its presence)."""
    return isinstance(item.default, bool) and not item.metadata["zero_one"]


def build_parser() -> argparse.ArgumentParser:
    """`run.py`'s parser: one flag per RunConfig field, its help ending in its default."""
    parser = argparse.ArgumentParser(description="Evaluate an agent on PersonalWAB.")
    for item in fields(RunConfig):
        meta = item.metadata
        shown = meta["default_text"] or "%(default)s"
        options: dict[str, Any] = {"help": f"{meta['help'].replace('%', '%%')} (default: {shown})"}
        if meta["zero_one"]:
            options.update(type=int, nargs="?", const=1, default=int(item.default), choices=[0, 1])
        elif is_switch(item):
            options.update(action="store_true")
        else:
            options.update(default=item.default, type=_VALUE_TYPES.get(type(item.default)))
            options.update({key: meta[key] for key in ("choices", "metavar") if meta[key] is not None})
        parser.add_argument(f"--{item.name}", **options)
    return parser


def parse_config(argv: list[str] | None = None) -> RunConfig:
    """The RunConfig of a `run.py` command line (`sys.argv` when None)."""
    values = vars(build_parser().parse_args(argv))
    for item in fields(RunConfig):
        if item.metadata["zero_one"]:
            values[item.name] = bool(values[item.name])
    return RunConfig(**values)
