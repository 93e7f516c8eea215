"""The settings of a run: `RunConfig`, each field a `PersonalWAB.settings` setting (its flag,
help and default written once), and `run.py`'s parser made from them. The settings a run shares
with `pwab reproduce` are the mixins below, declared once; an agent strategy's own settings
(PUMA's `--puma_*`) are the strategy's, named in the agent registry, and reach its agent through
`RunConfig.agent_options`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from PersonalWAB.agents.registry import STRATEGIES, builtin, option_classes
from PersonalWAB.engines.search import BACKENDS
from PersonalWAB.engines.text_embedding import EmbeddingPrecision
from PersonalWAB.envs.users import USER_MODES
from PersonalWAB.memory import MEMORY_MODES
from PersonalWAB.metrics import SOLVED_THRESHOLD
from PersonalWAB.pricing import RATE_HELP
from PersonalWAB.response_cache import ENV_VAR as CACHE_ENV_VAR
from PersonalWAB.runner.budget import usd_budget
from PersonalWAB.settings import parse_many, resolved, resume_keys, setting, settings_fields
from PersonalWAB.shards import SHARD_HELP, shard_setting

DESCRIPTION = "Evaluate an agent on PersonalWAB."
# run_args the runner works out (not settings) that a resumed run must share too
DERIVED_RESUME_KEYS = ("data_fingerprint", "protocol", "protocol_texts_digest", "grader_version")
DEFAULT_MEMORY = "last"
C = TypeVar("C", bound="RunConfig")


@dataclass
class TaskRange:
    """Which tasks of the split run."""

    start_index: int = setting(0, "first task of the split to run", resume=True)
    end_index: int = setting(-1, "task to stop before; -1 runs to the end", resume=True)


@dataclass
class DataChoice:
    """The data, engines and texts a run uses."""

    data_dir: str | None = setting(None, "data directory",
                                   default_text="official data if placed, else data/synthetic/small")
    search_backend: str = setting("lucene", "search engine behind search_product_by_query (lucene is the official "
                                            "one; another makes the run custom)", choices=BACKENDS, resume=True)
    protocol_file: str | None = setting(
        None, "release protocol pack",
        default_text="PersonalWAB/envs/pwab/data/release_protocol.json when placed; without one the project's own "
                     "texts are used and the run is custom")
    interec_memory_file: str | None = setting(None, "InteRecAgent memory store (for --agent_memory interecagent)")


@dataclass
class Endpoints:
    """Where the models are served and how calls to them are paced."""

    api_base: str | None = setting(
        None, "base URL of an OpenAI-compatible server (vLLM, Ollama, ...) for the agent's model")
    user_api_base: str | None = setting(None, "the same for the user simulator's model")
    max_retries: int = setting(5, "retries of a model call on rate limits, timeouts and server errors")
    max_tokens: int = setting(0, "most tokens of a reply of the agent's model; 0: no limit, as the release (a "
                              "small local model that does not stop needs one; a limit makes the run custom)")
    request_timeout: float = setting(120.0, "seconds a model call may wait for its reply before it counts as timed "
                                     "out (and is retried); a local model on a busy CPU needs more")
    cache: str | None = setting(
        None, "folder of the response cache: a model call answered there before (the same request, trial and "
              "task) is not sent or paid again; off: no cache", metavar="DIR",
        default_text=f"${CACHE_ENV_VAR} if set, else none (pwab reproduce: <out>/cache)")
    max_concurrency: int = setting(1, "tasks run at once (threads); raise it for API models that allow it "
                                      "(e.g. 8: docs/running.md)")
    price_per_mtok: str | None = setting(None, RATE_HELP.format(whose="the agent's"), metavar="IN,OUT", resume=True,
                                         default_text="litellm's price table")
    user_price_per_mtok: str | None = setting(None, RATE_HELP.format(whose="the user simulator's"),
                                              metavar="IN,OUT", resume=True, default_text="litellm's price table")


@dataclass
class Console:
    """What a run shows while it works."""

    quiet: bool = setting(False, "no progress bars or progress lines (warnings, errors and results still print)")


@dataclass
class RunConfig(TaskRange, DataChoice, EmbeddingPrecision, Endpoints, Console):
    """The settings of one run, each the `run.py` flag of its name (`--model`, ...)."""

    env: str = setting("pwab", "benchmark environment", choices=["pwab"])
    model: str | None = setting(
        None, "the agent's model, any litellm model string (LLM strategies only; offline agents refuse it)",
        resume=True)
    user_mode: str = setting(
        "no", "simulated user of the multi-turn track: naive (LLM), human (terminal), offline (rules, no model); "
              "no: single-turn", choices=USER_MODES, resume=True)
    user_model: str | None = setting(None, "the naive user's model (litellm model string)", resume=True)
    agent_strategy: str = setting(
        "heuristic", f"agent: one of {', '.join(STRATEGIES)} (heuristic: offline, no model; puma: "
                     "function/parameter files or a fine-tuned model; the others need --model), or your own: "
                     "package.module:ClassName, or the name of a 'pwab.agents' entry point (docs/agents.md)",
        metavar="STRATEGY", resume=True)
    temperature: float = setting(0.0, "sampling temperature of the agent's model", resume=True)
    task_split: str = setting("test", "task split to run", choices=["train", "test"], resume=True)
    agent_memory: str = setting("", "which of the user's past behaviours go into the agent's prompt",
                                choices=MEMORY_MODES, resume=True,
                                default_text="last; for a strategy with a memory of its own, that one (puma: taskspe)")
    memory_length: int = setting(10, "behaviours in the memory (the release always used 10, whatever its scripts "
                                     "said; another value is a departure)", resume=True)
    memory_tokens: int | None = setting(
        None, "a token budget of the memory: its behaviours, in the mode's order, while their texts fit in this many "
              "tokens (cl100k_base; a departure: the release has no budget)", metavar="N", resume=True,
        default_text="no budget")
    max_steps: int = setting(-1, "-1: single-turn track; N > 0: multi-turn track with N agent steps per task",
                             resume=True)
    resume_from: str | None = setting(
        None, "result file of an unfinished run with the same settings: its finished tasks are kept and the file "
              "is completed in place (unless --out)")
    resume_headerless: bool = setting(
        False, "let --resume_from keep the records of a file that holds no run settings (an older format): only "
               "each record's task is checked, not the run's settings")
    max_usd: float | None = setting(
        None, "the run's budget in USD, what the records kept by --resume_from paid included: once the calls cost "
              "this much no task starts, those in flight finish, and the run stops (resumable, exit 4)",
        kind=usd_budget)
    verbose: bool = setting(False, "print each action the agent takes with the start of its observation, each "
                                   "task's scores and error tracebacks")
    run_name: str | None = setting(None, "a name for the run, recorded in the header and shown by the leaderboard "
                                         "tools (not compared on resume)", metavar="NAME")
    tag: list[str] | None = setting(None, "a KEY=VALUE label of the run, repeatable (--tag lr=1e-4 --tag sweep=a): "
                                          "recorded in the header and shown with the run name", nargs=1,
                                    metavar="KEY=VALUE")
    log_to: str | None = setting(None, "also log the run's metrics and settings to an experiment tracker (its "
                                       "package must be installed)", choices=["tensorboard", "wandb", "mlflow"])
    solved_threshold: float = setting(SOLVED_THRESHOLD, "best Result Acc at or above which a trial with the right "
                                                        "function counts as solved (pass^k across --num_trials)")
    log_dir: str = setting("results", "folder of derived result names "
                                      "({singleturn,multiturn}/step..._MMDDHHMM.json)")
    seed: int = setting(2024, "seed of random memory, shuffling and the offline user", resume=True)
    shuffle: bool = setting(False, "run the tasks in a seeded random order")
    shard: str | None = setting(None, f"{SHARD_HELP} with pwab leaderboard merge; taken from the tasks after "
                                      "--start_index/--end_index and --shuffle, every trial of a task in one shard",
                                metavar="I/N", kind=shard_setting, resume=True)
    num_trials: int = setting(1, "runs of every task")
    num_gpus: int | None = setting(
        None, "accepted so that the release's run.py command lines run unchanged; the release reads no GPU count "
              "either (a live PUMA model takes the GPUs it sees)")
    out: str | None = setting(None, "result file path", aliases=("output",),
                              default_text="a new name under --log_dir derived from the settings")
    overwrite: bool = setting(False, "replace an existing --out file")
    trace_file: str | None = setting(None, "append every environment step and every local model generation of the "
                                           "run to this JSON-lines file (PersonalWAB.trace), for following an agent "
                                           "step by step", default_text="no trace")
    leak_guard: bool = setting(False, "mask the target ASIN and copied review spans in user messages (a departure "
                                      "from the release)", resume=True)
    strict: bool = setting(False, "the strict protocol: remove every privileged input the run can (user messages "
                                  "masked as --leak_guard does); a departure from the release (docs/audit.md)",
                           resume=True)
    # the chosen strategy's own settings (strategy name -> its settings), filled from the same command line
    agent_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.agent_memory:
            entry = builtin(self.agent_strategy)
            self.agent_memory = (entry.memory if entry is not None else None) or DEFAULT_MEMORY

    @property
    def guards_user_messages(self) -> bool:
        """The leak guard is on: asked for, or by the strict protocol."""
        return self.leak_guard or self.strict

    def task_end(self, split_size: int) -> int:
        """The task index the run stops before, in a split of `split_size` tasks."""
        return split_size if self.end_index == -1 else min(self.end_index, split_size)

    def options(self, strategy: str) -> Any:
        """The settings of `strategy` (its defaults when the command line gave none)."""
        if strategy not in self.agent_options:
            classes = option_classes()
            if strategy in classes:
                self.agent_options[strategy] = classes[strategy]()
        return self.agent_options.get(strategy)

    def settings(self) -> dict[str, Any]:
        """Every setting of the run by name, the strategies' own included (what its header records)."""
        values = {key: value for key, value in resolved(self).items() if key != "agent_options"}
        for name in option_classes():
            values.update(resolved(self.options(name)))
        return values


def run_resume_keys() -> tuple[str, ...]:
    """The settings a resumed run must share with the file it resumes."""
    return resume_keys(RunConfig, *option_classes().values()) + DERIVED_RESUME_KEYS


def run_settings_fields() -> list[Any]:
    """Every flag of `run.py`: the run's and each strategy's own."""
    return settings_fields(RunConfig, *option_classes().values())


def parse_config(argv: list[str] | None = None) -> RunConfig:
    """The RunConfig of a `run.py` command line (`sys.argv` when None), `--config FILE.yaml` read first."""
    return parse_run_settings(RunConfig, argv, DESCRIPTION)


def parse_run_settings(cls: type[C], argv: list[str] | None, description: str) -> C:
    """The settings of a command made of a run's (`run.py`, `pwab ablate`), the strategies' own
    settings filled in from the same command line."""
    classes = option_classes()
    config, *options = parse_many([cls, *classes.values()], argv, description=description)
    config.agent_options = dict(zip(classes, options))
    return config
