"""The paper's rows as runs: each row name (`--rows`) with the agent and memory the release
runs it with, and the `RunConfig` of a row under the settings of one `pwab reproduce`.

Everything else is the release's track scripts' setting (`scripts/run_singleturn.sh`,
`scripts/run_multiturn.sh`): the test split, temperature 0, memory of 10 behaviours (what the
release's `run.py` always used), seed 2024, Lucene search, and in the multi-turn track an LLM
user (`gpt-4o-mini` unless `--user_model`) and at most 10 agent steps. ReAct and Reflection
take the track script's memory (single-turn `last`, multi-turn `relevant`); PUMA runs as
`scripts/run_singleturn_puma.sh` does (release recipe, task-specific memory of 768 tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PersonalWAB.agents.registry import option_classes
from PersonalWAB.memory import RELEASE_MEMORY_LENGTH
from PersonalWAB.memory.modes import memory_mode
from PersonalWAB.runner.config import Console, DataChoice, Endpoints, RunConfig, TaskRange
from PersonalWAB.response_cache import OFF, cache_folder
from PersonalWAB.runner.budget import usd_budget
from PersonalWAB.settings import setting

SINGLE, MULTI = "single", "multi"
TRACK_DIRS = {SINGLE: "singleturn", MULTI: "multiturn"}
TRACK_MEMORY = {SINGLE: "last", MULTI: "relevant"}  # the track scripts' memory
MULTI_TURN_STEPS = 10  # scripts/run_multiturn.sh
RELEASE_USER_MODEL = "gpt-4o-mini"  # the release's LLM user
PUMA_MEMORY_TOKENS = 768
DEFAULT_SAMPLE = 12  # tasks per row whose requests are rendered for the cost estimate


@dataclass(frozen=True)
class RowSpec:
    """One row of the paper's tables (named as `--rows` takes it; its paper name is in
    `paper_results.json`): its agent, its memory (None: the track's) and its tracks."""

    name: str
    strategy: str
    memory: str | None
    tracks: tuple[str, ...] = (SINGLE, MULTI)

    def memory_for(self, track: str) -> str:
        return self.memory or TRACK_MEMORY[track]

    @property
    def reads_interec_store(self) -> bool:
        """Whether the row's memory reads (and updates) an InteRecAgent store file."""
        return self.memory is not None and memory_mode(self.memory).interec_store


ROWS: dict[str, RowSpec] = {spec.name: spec for spec in (
    RowSpec("none", "function_calling", "none"),
    RowSpec("random", "function_calling", "random"),
    RowSpec("last", "function_calling", "last"),
    RowSpec("relevant", "function_calling", "relevant"),
    RowSpec("react", "react", None),
    RowSpec("reflection", "react_reflect", None, (MULTI,)),
    RowSpec("recmind", "recmind", "recmind"),
    RowSpec("interecagent", "function_calling", "interecagent", (MULTI,)),
    RowSpec("puma", "puma", "taskspe"),
)}


@dataclass
class ReproduceSettings(TaskRange, DataChoice, Endpoints, Console):
    """What one `pwab reproduce` is asked for (its flags; those it shares with `run.py` are
    declared once, in `PersonalWAB.runner.config`)."""

    model: str = setting(str, "the agents' model, any litellm model string", required=True)
    track: str = setting(SINGLE, "single: Table 3 (single-turn); multi: Table 4 (multi-turn, with the LLM user)",
                         choices=[SINGLE, MULTI])
    rows: str | None = setting(None, f"comma-separated rows to run, of {','.join(ROWS)}",
                               default_text="every row of the track whose inputs are given")
    out: str | None = setting(None, "folder of the result files (one per row, resumable) and the comparison",
                              default_text="results/reproduce/<model>")
    user_model: str = setting(RELEASE_USER_MODEL, "the LLM user's model (--track multi)")
    sample: int = setting(DEFAULT_SAMPLE, "tasks per row whose requests are rendered for the cost estimate")
    dry_run: bool = setting(False, "print the cost estimate and stop (no request)")
    max_usd: float | None = setting(
        None, "the reproduction's budget in USD, counting what its result files already paid: refuse to start "
              "when the estimate would exceed it; stop (resumable) when the calls cost this much", kind=usd_budget)
    # the puma strategy's input settings (its --puma_* flags), filled from the same command line
    puma: Any = field(default=None)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path("results") / "reproduce" / self.model.replace("/", "_")

    @property
    def row_names(self) -> tuple[str, ...] | None:
        """The rows named by `--rows` (None: every row the given inputs allow)."""
        if not self.rows:
            return None
        return tuple(name.strip() for name in self.rows.split(",") if name.strip())

    def puma_input(self, name: str) -> str | None:
        """One of the puma row's input settings (`puma_model_path`, ...); None when not given."""
        return getattr(self.puma, name, None)

    @property
    def cache_dir(self) -> Path | None:
        """The response cache every row uses (None: `--cache off`): a reproduction run again
        after a stop or a kill never pays twice for an answer it received."""
        return cache_folder(self.cache, self.out_dir / "cache")

    @property
    def track_dir(self) -> Path:
        return self.out_dir / TRACK_DIRS[self.track]

    def result_path(self, row: str) -> Path:
        """The row's result file: one per row and track under `--out`."""
        return self.track_dir / f"{row}.json"

    @property
    def interec_copy(self) -> Path:
        """The InteRecAgent memory this reproduction updates (a copy: the run rewrites it after each task)."""
        return self.track_dir / "interecagent_memory.json"


def missing_input(spec: RowSpec, settings: ReproduceSettings) -> str | None:
    """What a row needs that was not given (None: it can run)."""
    if spec.strategy == "puma" and not (settings.puma_input("puma_model_path")
                                        or (settings.puma_input("puma_function_file")
                                            and settings.puma_input("puma_param_file"))):
        return "--puma_model_path (or --puma_function_file and --puma_param_file)"
    if spec.reads_interec_store and not settings.interec_memory_file:
        return ("--interec_memory_file (create one with python scripts/tools/init_interecagent_memory.py "
                "--data_dir DIR --out FILE --model MODEL)")
    return None


def select_rows(settings: ReproduceSettings) -> tuple[list[RowSpec], list[str]]:
    """The rows to run and, when none were named, a note for each row left out for lack of an
    input. Raises ValueError for an unknown row, a row of the other track or a named row
    whose input is missing."""
    of_track = [spec for spec in ROWS.values() if settings.track in spec.tracks]
    if settings.row_names is None:
        chosen = [spec for spec in of_track if missing_input(spec, settings) is None]
        skipped = [f"row {spec.name} left out: it needs {missing_input(spec, settings)}"
                   for spec in of_track if spec not in chosen]
        return chosen, skipped
    names = [spec.name for spec in of_track]
    for name in settings.row_names:
        if name not in names:
            other = f" (a row of --track {MULTI} only)" if name in ROWS else ""
            raise ValueError(f"--rows {name}: not a row of the {settings.track}-turn table{other}; "
                             f"expected some of {','.join(names)}")
    chosen = [spec for spec in of_track if spec.name in settings.row_names]
    for spec in chosen:
        needed = missing_input(spec, settings)
        if needed:
            raise ValueError(f"row {spec.name} needs {needed}")
    return chosen, []


def row_config(spec: RowSpec, settings: ReproduceSettings) -> RunConfig:
    """The run of one row: the release's settings, the result file under `--out`, and
    `--resume_from` that file when an earlier reproduction left it (its finished tasks are kept)."""
    output = settings.result_path(spec.name)
    multi = settings.track == MULTI
    puma = spec.strategy == "puma"
    return RunConfig(
        model=None if puma else settings.model,
        api_base=None if puma else settings.api_base,
        agent_strategy=spec.strategy,
        agent_memory=spec.memory_for(settings.track),
        memory_length=RELEASE_MEMORY_LENGTH,
        max_steps=MULTI_TURN_STEPS if multi else -1,
        user_mode="naive" if multi else "no",
        user_model=settings.user_model if multi else None,
        user_api_base=settings.user_api_base if multi else None,
        task_split="test",
        temperature=0.0,
        start_index=settings.start_index,
        end_index=settings.end_index,
        data_dir=settings.data_dir,
        search_backend=settings.search_backend,
        protocol_file=settings.protocol_file,
        max_concurrency=settings.max_concurrency,
        max_retries=settings.max_retries,
        price_per_mtok=None if puma else settings.price_per_mtok,
        user_price_per_mtok=settings.user_price_per_mtok if multi else None,
        quiet=settings.quiet,
        cache=str(settings.cache_dir) if settings.cache_dir is not None else OFF,
        out=str(output),
        resume_from=str(output) if output.exists() else None,
        interec_memory_file=str(settings.interec_copy) if spec.reads_interec_store else None,
        agent_options={"puma": option_classes()["puma"](
            puma_generate=puma and bool(settings.puma_input("puma_model_path")),
            puma_model_path=settings.puma_input("puma_model_path") if puma else None,
            puma_function_file=settings.puma_input("puma_function_file") if puma else None,
            puma_param_file=settings.puma_input("puma_param_file") if puma else None,
            recipe="release", mem_token_length=PUMA_MEMORY_TOKENS)},
    )
