"""`pwab ablate`: one agent over several memory arms, everything else equal, at a matched token
budget, in one command: a result file per arm, one table, paired verdicts and a plot.

The arms are memory modes (`--agent_memory`), by default the release's `none`, `last`, `random` and
`relevant` and the project's two controls: `other_user` (another user's history of the same length:
does the agent use *this* user, or any history?) and `oracle` (the user's behaviours most related
to the target: the ceiling of any selection). Every arm gets the same budget of memory tokens
(`--memory_tokens`, counted with cl100k_base on each behaviour's memory block, `memory.behaviour`):
its behaviours, in the arm's order, while they fit; the table gives the tokens each arm was
actually shown. Every run uses the response cache (`<out>/cache` unless `--cache`), and an arm's
file under `--out` is resumed or reused, so running the same command again after a stop pays for
nothing twice.

Paired verdicts compare every arm with `--baseline` task by task (`leaderboard compare`'s paired
bootstrap interval and sign-flip test), and `other_user` with `last` on each task type.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from pathlib import Path
from statistics import fmean
from typing import Any

from PersonalWAB.errors import DataError, FatalError
from PersonalWAB.outputs import FOLDER, claim_outputs
from PersonalWAB.runner.config import RunConfig, parse_run_settings
from PersonalWAB.settings import setting

ARMS = ("none", "last", "random", "relevant", "other_user", "oracle")
DEFAULT_TOKENS = 1500
DEFAULT_LENGTH = 50
TABLE, PLOT = "ablation.md", "ablation.png"
EXIT_SETTINGS, EXIT_FAILED = 2, 1
TOKENS_NOTE = ("memory tokens: the cl100k_base tokens of the behaviours' memory blocks (`memory.behaviour`, the full "
               "text the function-calling agents read), per task; every arm is cut to the same budget")


@dataclass
class AblateConfig(RunConfig):
    """The run's settings (`run.py`'s flags), the arms, the budget and the folder of the ablation."""

    arms: str = setting(",".join(ARMS), "comma-separated memory arms (any --agent_memory modes)")
    baseline: str = setting("none", "the arm every other arm is compared with, task by task")
    memory_tokens: int | None = setting(DEFAULT_TOKENS, "the token budget every arm's memory is cut to (cl100k_base)",
                                        metavar="N")
    memory_length: int = setting(DEFAULT_LENGTH, "the most behaviours an arm may hold before the token budget cuts "
                                                 "it (high, so that the budget decides)")
    out: str | None = setting(None, "folder of the arms' result files, the table and the plot",
                              default_text="results/ablate/<strategy>-<model>")
    agent_memory: str = setting("", "set by each arm (--arms)", hidden=True)
    resume_from: str | None = setting(None, "each arm resumes its own file under --out", hidden=True)

    @property
    def out_dir(self) -> Path:
        model = (self.model or "offline").replace("/", "_")
        return Path(self.out) if self.out else Path("results") / "ablate" / f"{self.agent_strategy}-{model}"

    @property
    def arm_names(self) -> list[str]:
        return list(dict.fromkeys(name.strip() for name in self.arms.split(",") if name.strip()))


def is_ablation(folder: Path) -> bool:
    """Whether a folder holds an ablation's table or arm files (to resume or redo)."""
    return (folder / TABLE).exists() or any((folder / f"{arm}.json").exists() for arm in ARMS)


def arm_config(settings: AblateConfig, arm: str) -> RunConfig:
    """The run of one arm: the ablation's settings with the arm's memory, its file under --out
    (resumed when an earlier ablation left it), and the response cache."""
    from PersonalWAB.response_cache import OFF, cache_folder

    values = {item.name: getattr(settings, item.name) for item in fields(RunConfig)}
    output = settings.out_dir / f"{arm}.json"
    cache = cache_folder(settings.cache, settings.out_dir / "cache")
    values.update(agent_memory=arm, out=str(output), resume_from=str(output) if output.exists() else None,
                  cache=str(cache) if cache is not None else OFF, overwrite=False)
    return RunConfig(**values)


def check(settings: AblateConfig) -> str | None:
    """What is wrong with the arms (None: nothing)."""
    from PersonalWAB.memory import MEMORY_MODES

    unknown = [arm for arm in settings.arm_names if arm not in MEMORY_MODES]
    if unknown:
        return f"--arms {','.join(unknown)}: not a memory mode; expected some of {','.join(MEMORY_MODES)}"
    if len(settings.arm_names) < 2:
        return "--arms: an ablation needs at least two arms"
    if settings.baseline not in settings.arm_names:
        return f"--baseline {settings.baseline}: not one of --arms {settings.arms}"
    return None


def run_arms(settings: AblateConfig) -> list[Path]:
    """Run (or resume, or reuse) every arm; their result files."""
    from PersonalWAB.results import load_result_file
    from PersonalWAB.runner.execute import execute, prepare

    plans = [prepare(arm_config(settings, arm)) for arm in settings.arm_names]  # every arm checked first
    for arm, plan in zip(settings.arm_names, plans):
        if not plan.jobs and load_result_file(plan.output)[0] is not None:
            print(f"arm {arm}: finished earlier, reused ({plan.output})", file=sys.stderr)
            continue
        print(f"arm {arm}: {len(plan.jobs)} task run(s) -> {plan.output}", file=sys.stderr)
        execute(plan)
    return [plan.output for plan in plans]


def shown_tokens(settings: AblateConfig, arm: str) -> tuple[float, float]:
    """The mean memory tokens and behaviours an arm showed per task run (as its run selected them)."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory import memory_tokens, retrieve_memory, run_random_memory
    from PersonalWAB.memory.embeddings import ranking_precision
    from PersonalWAB.paths import default_data_dir
    from PersonalWAB.protocol import load_protocol

    config = arm_config(settings, arm)
    data = load_benchmark_data(config.data_dir or default_data_dir())
    protocol = load_protocol(config.protocol_file)
    tasks = data.split(config.task_split)
    draws = run_random_memory(data, config)
    tokens, counts = [], []
    with ranking_precision(config.embedding_precision):
        for trial in range(config.num_trials):
            for index in range(config.start_index, config.task_end(len(tasks))):
                draw = draws.draw(trial, index) if draws is not None else None
                chosen = retrieve_memory(data, tasks[index], arm, config.memory_length, protocol=protocol,
                                         random_draw=draw, seed=config.seed, tokens=config.memory_tokens)
                tokens.append(memory_tokens(protocol, chosen))
                counts.append(len(chosen))
    return fmean(tokens), fmean(counts)


@dataclass
class ArmResult:
    """One arm's file and what the table shows of it."""

    arm: str
    path: Path
    row: Any  # its leaderboard row (PersonalWAB.leaderboard.summarize.Row)
    tokens: float
    behaviours: float
    ranking: dict[str, float]  # recommend: mean NDCG@10 and MRR


def arm_results(settings: AblateConfig, paths: list[Path]) -> list[ArmResult]:
    from PersonalWAB.failures import react_prefix_of, recommendation_ranking
    from PersonalWAB.leaderboard.summarize import row_from_report
    from PersonalWAB.leaderboard.validate import read_valid

    results = []
    for arm, path in zip(settings.arm_names, paths):
        report = read_valid(path)
        row = row_from_report(report, arm)
        assert row is not None and report.result is not None, "a valid finished run has a row"
        prefix = react_prefix_of(report.result.run_args)
        ranks = [r for r in (recommendation_ranking(record, prefix) for record in report.result.records) if r]
        ranking = {"ndcg@10": fmean(r["ndcg@10"] for r in ranks), "mrr": fmean(r["rr"] for r in ranks)} if ranks \
            else {}
        results.append(ArmResult(arm, path, row, *shown_tokens(settings, arm), ranking))
    return results


def verdict_lines(settings: AblateConfig, paths: list[Path]) -> list[str]:
    """Each arm against the baseline (overall and per type, Result Acc), and `other_user` against
    `last` per task type: the paired difference, its 95% interval, p and the verdict."""
    from PersonalWAB.leaderboard.compare import compare_runs, load_run, metric_cells

    runs = {arm: load_run(path) for arm, path in zip(settings.arm_names, paths)}
    pairs = [(settings.baseline, arm) for arm in settings.arm_names if arm != settings.baseline]
    if "other_user" in runs and "last" in runs:
        pairs.append(("last", "other_user"))
    lines = []
    for base, arm in pairs:
        comparison = compare_runs(runs[base], runs[arm])
        for group in comparison.groups:
            row = next(metric for metric in group.metrics if metric.label == "Result Acc")
            baseline, other, difference, interval, p, verdict = metric_cells(row)
            lines.append(f"{arm} vs {base}, {group.name} ({group.tasks} tasks): Result Acc {other} vs {baseline}, "
                         f"difference {difference} {interval}, p {p}: {verdict}")
    return lines


def table(results: list[ArmResult], settings: AblateConfig) -> str:
    from PersonalWAB.leaderboard.summarize import GROUPS, md_cell

    head = ["arm", "memory tokens", "behaviours", *(f"{g} F. Acc | {g} R. Acc" for g in GROUPS),
            "recommend NDCG@10", "recommend MRR"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * (len(head) + len(GROUPS))]
    for result in results:
        cells = [md_cell(result.arm), f"{result.tokens:.0f}", f"{result.behaviours:.1f}"]
        for group in GROUPS:
            cells += [f"{result.row.score(group, key):.3f}" for key in ("avg_action_acc", "avg_res_acc")]
        cells += [f"{result.ranking['ndcg@10']:.3f}" if result.ranking else "-",
                  f"{result.ranking['mrr']:.3f}" if result.ranking else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    budget = f"{settings.memory_tokens} tokens" if settings.memory_tokens is not None else "no token budget"
    return "\n".join([f"Memory ablation: {settings.agent_strategy} ({settings.model or 'no model'}), {budget}, at most "
                      f"{settings.memory_length} behaviours, {settings.task_split} split", "", *lines, "",
                      TOKENS_NOTE])


def main(argv: list[str] | None = None) -> int:
    """`pwab ablate`: run every arm, then write the table, the verdicts and the plot under --out."""
    from PersonalWAB.leaderboard.plots import type_bars_png
    from PersonalWAB.outputs import write_output

    settings = parse_run_settings(AblateConfig, argv, "Run one agent over several memory arms at a matched token "
                                                      "budget and compare them task by task (docs/ablation.md).")
    problem = check(settings)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_SETTINGS
    settings.out = str(settings.out_dir)
    claim_outputs(settings, {"out": FOLDER}, own=is_ablation, writes=("cache",))
    try:
        paths = run_arms(settings)
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    except FatalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    results = arm_results(settings, paths)
    verdicts = verdict_lines(settings, paths)
    text = table(results, settings) + "\n\nPaired verdicts (task by task; leaderboard compare's statistics):\n\n" + \
        "\n".join(f"- {line}" for line in verdicts) + "\n"
    print(text)
    write_output(settings.out_dir / TABLE, text)
    write_output(settings.out_dir / PLOT, type_bars_png([result.row for result in results]))
    print(f"written: {settings.out_dir / TABLE}, {settings.out_dir / PLOT}")
    return 0
