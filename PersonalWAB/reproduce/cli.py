"""`pwab reproduce` (= `python -m PersonalWAB.reproduce`): the paper's table of a track for one
model, row by row, with the cost known before any paid call.

Every row's settings are checked and its data loaded first (`prepare`, nothing written),
then the tasks left of every row are estimated (`cost`); `--dry_run` stops there.
`--max_usd` is the budget of the whole reproduction: what the result files under `--out`
already paid counts, and it refuses to start when that plus the estimate is above it. The rows
then run one after another (`execute`, each checkpointing its own result file under `--out`);
the cost so far is carried over as the budget of the next row, and a row that reaches it stops
cleanly, keeping the tasks in flight. Every model answer goes to the response cache
(`<out>/cache` unless `--cache`), so re-running the same command after a stop or a kill keeps
every finished task, replays the answers it received and pays only for what is missing.
At the end the comparison with the paper (`table`) is printed and written under `--out`.

Exit status as `run.py`'s: 0 done; 1 a fatal model error; 2 a bad setting (nothing run),
the estimate above `--max_usd` included; 3 some tasks ended in an error (re-run to retry
them); 4 stopped at `--max_usd`; 130 interrupted. Each stop prints the command that continues.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
from pathlib import Path

from tqdm import tqdm

from PersonalWAB.agents.registry import option_classes
from PersonalWAB.cli import EXIT_INTERRUPTED
from PersonalWAB.errors import DataError, FatalError
from PersonalWAB.pricing import cost_lines
from PersonalWAB.progress import progress_bar
from PersonalWAB.reproduce.cost import (RowEstimate, estimate_row, estimate_scope, format_estimates, total_usd,
                                        usd_text)
from PersonalWAB.reproduce.paper import compared_row, track_note, track_table
from PersonalWAB.reproduce.rows import MULTI, TRACK_DIRS, ReproduceSettings, RowSpec, row_config, select_rows
from PersonalWAB.reproduce.table import Comparison, compare_row, comparison_notes, render_text, write_tables
from PersonalWAB.leaderboard.validate import read_valid
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.budget import paid_usd
from PersonalWAB.runner.execute import BudgetReached, RunPlan, concurrency_hint, execute, prepare
from PersonalWAB.outputs import FOLDER, parse_command

EXIT_FATAL, EXIT_SETTINGS, EXIT_TASK_ERRORS, EXIT_BUDGET = 1, 2, 3, 4
DESCRIPTION = ("Run the baseline rows of one of the paper's tables for a model and compare them with the paper's "
               "figures (docs/reproducing.md).")


def is_reproduction(folder: Path) -> bool:
    """Whether a folder holds a reproduction's rows or comparison (to resume or redo)."""
    return any((folder / name).exists() for name in (*TRACK_DIRS.values(), "comparison.txt"))


def parse_settings(argv: list[str]) -> ReproduceSettings:
    """The command line's settings, the puma row's inputs (the strategy's own flags) included,
    its --out claimed by the output rule."""
    inputs = option_classes("inputs")["puma"]
    settings, puma = parse_command([ReproduceSettings, inputs], argv, {"out": FOLDER}, own=lambda _: is_reproduction,
                                   writes=("cache", "interec_memory_file"), description=DESCRIPTION)
    settings.puma = puma
    return settings


def error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Reproduce the table `argv` (default: the command line) asks for; the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    settings = parse_settings(argv)
    again = shlex.join(["pwab", "reproduce", *argv])
    if settings.sample < 1:
        error("--sample must be at least 1")
        return EXIT_SETTINGS
    try:
        specs, skipped = select_rows(settings)
        for note in skipped:
            print(f"note: {note}", file=sys.stderr)
        if not specs:
            raise ValueError("no row to run")
        plans = _prepare(specs, settings, check_keys=not settings.dry_run)
        estimates = [estimate_row(spec, plan, settings, settings.sample) for spec, plan in zip(specs, plans)]
    except KeyboardInterrupt:
        print("interrupted before any model was called; no result file was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (DataError, ValueError) as exc:
        error(str(exc))
        return EXIT_SETTINGS
    print(format_estimates(estimates, settings.model, settings.sample, settings.price_per_mtok))
    for line in estimate_scope(plans, estimates, settings.track):
        print(line)
    if settings.dry_run:
        print("dry run: no request was sent")
        return 0
    model_row = next((plan.config for plan in plans if plan.config.model), plans[0].config)
    hint = concurrency_hint(model_row, sum(len(plan.jobs) for plan in plans))
    if hint:
        print(hint, file=sys.stderr)
    paid = paid_usd([record for plan in plans for record in plan.kept])
    refusal = _over_budget(estimates, settings.max_usd, paid)
    if refusal:
        error(refusal)
        return EXIT_SETTINGS
    code = _run_rows(specs, plans, settings.max_usd, paid, again)
    if code not in (0, EXIT_TASK_ERRORS):
        return code
    _compare(specs, settings)
    if code == EXIT_TASK_ERRORS:
        print(f"some tasks ended in an error and count as 0; run them again with:\n  {again}", file=sys.stderr)
    return code


def _prepare(specs: list[RowSpec], settings: ReproduceSettings, check_keys: bool = True) -> list[RunPlan]:
    """Every row checked and planned before anything runs (its finished tasks kept); nothing
    is written but the InteRecAgent memory's copy."""
    if settings.interec_memory_file and any(spec.reads_interec_store for spec in specs) \
            and not settings.interec_copy.exists():
        if not Path(settings.interec_memory_file).is_file():
            raise ValueError(f"--interec_memory_file {settings.interec_memory_file}: no such file")
        settings.interec_copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(settings.interec_memory_file, settings.interec_copy)
    plans = []
    for spec in specs:
        config = row_config(spec, settings)
        try:
            plans.append(prepare(config, check_keys=check_keys))
        except (DataError, ValueError) as exc:
            other = "; to reproduce with other settings, choose another --out" if config.resume_from else ""
            raise type(exc)(f"row {spec.name}: {exc}{other}") from None
    return plans


def _over_budget(estimates: list[RowEstimate], max_usd: float | None, paid: float) -> str | None:
    """Why the rows may not start under `--max_usd`, which `paid` (by the rows' result files)
    already used (None: they may)."""
    if max_usd is None:
        return None
    total = total_usd(estimates)
    if total is None:
        unpriced = "; ".join(e.note for e in estimates if e.usd is None)
        return f"--max_usd {max_usd} cannot be kept: {unpriced}; nothing was run (leave --max_usd out)"
    if paid + total > max_usd:
        earlier = f" plus {usd_text(paid)} paid by the result files under --out" if paid else ""
        return f"the estimate {usd_text(total)}{earlier} is above --max_usd {max_usd}; nothing was run"
    return None


def _run_rows(specs: list[RowSpec], plans: list[RunPlan], max_usd: float | None, paid: float, again: str) -> int:
    """Run the rows in turn, `paid` already spent of `max_usd` by their result files; the exit
    status (a stop prints what was kept and how to go on)."""
    spent, errored = paid, False
    with progress_bar(total=len(plans), desc="rows", unit="row") as bar:
        for spec, plan in zip(specs, plans):
            bar.set_postfix_str(spec.name)
            if not plan.jobs and load_result_file(plan.output)[0] is not None:
                tqdm.write(f"row {spec.name}: finished earlier, reused ({plan.output})")
                bar.update(1)
                continue
            if max_usd is not None and spent >= max_usd:
                _report_stop(spec, plan, f"stopped at --max_usd {max_usd} (the result files paid ${spent:.4f})",
                             again, "with a higher --max_usd, or without it, ")
                return EXIT_BUDGET
            try:
                outcome = execute(plan, max_usd=None if max_usd is None else max_usd - spent)
            except KeyboardInterrupt:
                _report_stop(spec, plan, "interrupted", again)
                return EXIT_INTERRUPTED
            except BudgetReached as exc:
                _report_stop(spec, plan, f"stopped at --max_usd {max_usd} ({exc})", again,
                             "with a higher --max_usd, or without it, ")
                return EXIT_BUDGET
            except FatalError as exc:
                error(str(exc))
                _report_stop(spec, plan, "stopped", again)
                return EXIT_FATAL
            except (DataError, ValueError) as exc:
                error(str(exc))
                _report_stop(spec, plan, "stopped", again)
                return EXIT_SETTINGS
            kept = {(r["trial"], r["task_id"]) for r in plan.kept}
            spent += paid_usd([r for r in outcome.records if (r["trial"], r["task_id"]) not in kept])
            errored = errored or any("error" in r["info"] for r in outcome.records)
            bar.update(1)
    return EXIT_TASK_ERRORS if errored else 0


def _report_stop(spec: RowSpec, plan: RunPlan, how: str, again: str, change: str = "") -> None:
    """What a stopped reproduction kept and the command that continues it."""
    if plan.writer is None:
        kept = f"row {spec.name} had not started"
    else:
        total = len(plan.kept) + len(plan.jobs)
        kept = f"row {spec.name}: {len(plan.writer.records)} of {total} task(s) finished and kept in {plan.output}"
    print(f"{how}: {kept}; every finished row and task is kept. Continue {change}with the same command:\n"
          f"  {again}", file=sys.stderr)


def _compare(specs: list[RowSpec], settings: ReproduceSettings) -> None:
    """Print the comparison with the paper and write it under the track's folder."""
    rows = []
    source = ""
    agent_usd = user_usd = 0.0
    caches: list[dict] = []
    for spec in specs:
        path = settings.result_path(spec.name)
        header, records = load_result_file(path)
        if header is None:
            raise DataError(f"{path}: the run is unfinished (no header); finish it with --resume_from, then compare")
        read_valid(path)  # the one reader: a file validate refuses is refused here the same way
        source = header["run_args"]["data_source"]
        agent_usd += header["total cost"]
        user_usd += header["total user cost"]
        caches.append(header.get("cache") or {})
        paper = compared_row(settings.track, spec.name, settings.model, spec.strategy == "puma")
        rows.append(compare_row(spec.name, path, header, records, paper))
    title = f"Paper vs reproduced, {track_table(settings.track)}: {settings.model} on {source} data"
    comparison = Comparison(title, rows, comparison_notes(rows, source, settings.model, track_note(settings.track)))
    print(render_text(comparison))
    for line in cost_lines(agent_usd, user_usd, _priced_settings(settings), _summed(caches)):
        print(line)
    for path in write_tables(comparison, settings.track_dir):
        print(f"written: {path}")


def _priced_settings(settings: ReproduceSettings) -> dict:
    """The model settings every row shares, as `cost_lines` reads them from a run's header."""
    multi = settings.track == MULTI
    return {"model": settings.model, "api_base": settings.api_base, "price_per_mtok": settings.price_per_mtok,
            "user_mode": "naive" if multi else "no", "user_model": settings.user_model if multi else None,
            "user_api_base": settings.user_api_base, "user_price_per_mtok": settings.user_price_per_mtok}


def _summed(caches: list[dict]) -> dict:
    """The rows' cache figures added up, key by key (numbers only)."""
    total: dict = {}
    for cache in caches:
        for key, value in cache.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
    return total


def cli(argv: list[str] | None = None) -> None:
    """`pwab reproduce`: `main`, then leave without the interpreter's shutdown, which after a stop
    would wait for the model calls still in flight (as `run.py` does, see `PersonalWAB.runner.cli`)."""
    code = main(argv)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
