"""`python run.py`: evaluate an agent on a task split and write a leaderboard result file.

Tasks run on `--max_concurrency` threads that share one data object and one set
of engines. Finished tasks are checkpointed into the result file as they
complete; `--resume_from FILE` skips the tasks that file already holds (tasks
that ended in an error are run again) once it has checked that the file belongs
to this run.

Exit status of `main`: 0 all tasks ran; 1 a fatal model error stopped the run
(missing or refused key, unknown model), or the result file could not be written
(a full disk: it keeps its last whole checkpoint); 2 a setting or input file is
wrong (nothing was written), or another live run holds the result file or the
file being resumed, or the records it keeps already paid `--max_usd`; 3 some tasks
ended in an error (resume to run them again); 4 stopped at `--max_usd`; 130 interrupted
(Ctrl-C or SIGTERM). Every stop after the result file was
claimed prints the `--resume_from` command that finishes the run.
"""

from __future__ import annotations

import sys

from PersonalWAB.cli import EXIT_INTERRUPTED, leave
from PersonalWAB.errors import DataError, FatalError
from PersonalWAB.metrics import count_errors, count_format_errors, format_statistics_table, format_trial_table
from PersonalWAB.pricing import cost_lines
from PersonalWAB.results import TRIALS_KEY, CheckpointWriteError
from PersonalWAB.outputs import hold_inputs
from PersonalWAB.runner.checks import run_inputs
from PersonalWAB.runner.config import parse_config
from PersonalWAB.runner.budget import paid_usd
from PersonalWAB.runner.execute import BudgetReached, RunPlan, concurrency_hint, execute, prepare
from PersonalWAB.runner.labels import result_notes
from PersonalWAB.runner.resume import resume_command
from PersonalWAB.runner.trackers import log_outcome

EXIT_FATAL, EXIT_SETTINGS, EXIT_TASK_ERRORS, EXIT_BUDGET = 1, 2, 3, 4


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation `argv` (default: the command line) asks for; the exit status."""
    config = parse_config(argv)
    try:
        plan = prepare(config)
        hold_inputs(run_inputs(config))  # the files a run reads are never written over (PersonalWAB.outputs)
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    hint = concurrency_hint(config, len(plan.jobs))
    if hint:
        print(hint, file=sys.stderr)
    paid = paid_usd(plan.kept)
    left = None if config.max_usd is None else config.max_usd - paid
    if left is not None and left <= 0:
        print(f"error: --max_usd {config.max_usd}: the records kept from {config.resume_from} already paid "
              f"${paid:.4f}; nothing was run (raise --max_usd, or leave it out)", file=sys.stderr)
        return EXIT_SETTINGS
    try:
        outcome = execute(plan, max_usd=left)
    except KeyboardInterrupt:
        _report_stop(plan, "interrupted")
        return EXIT_INTERRUPTED
    except BudgetReached as exc:
        _report_stop(plan, f"stopped at --max_usd {config.max_usd} ({exc}); raise it, or leave it out, to go on")
        return EXIT_BUDGET
    except CheckpointWriteError as exc:
        _report_stop(plan, "stopped", exc)
        return EXIT_FATAL
    except FatalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _report_stop(plan, "stopped")
        return EXIT_FATAL
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        _report_stop(plan, "stopped")
        return EXIT_SETTINGS
    run_args = outcome.header["run_args"]
    errors = count_errors(outcome.records)
    print(format_statistics_table(outcome.header["results"],
                                  title=f"Results ({run_args['data_source']}; {outcome.wall_s:.1f} s)",
                                  errors=errors))
    if TRIALS_KEY in outcome.header:
        print(format_trial_table(outcome.header[TRIALS_KEY]))
    for note in result_notes(run_args):
        print(f"note: {note}")
    header = outcome.header
    for line in cost_lines(header["total cost"], header["total user cost"], run_args, header.get("cache")):
        print(line)
    format_errors = count_format_errors(outcome.records)
    if format_errors:
        print(f"format errors: {format_errors} of {len(outcome.records)} task(s) ended on model replies whose "
              "tool arguments could not be read, asked again until the limit; they are scored as they stand "
              "(info.format_error)")
    print(f"result file: {outcome.output}")
    tracked = log_outcome(config.log_to, outcome.header, outcome.output)
    if tracked:
        print(tracked)
    if errors["overall"]:
        print(f"{errors['overall']} task(s) ended in an error and score 0 until run again (rows marked under "
              f"'errored'); finish them with:\n  {resume_command(config, outcome.output)}", file=sys.stderr)
        return EXIT_TASK_ERRORS
    return 0


def cli(argv: list[str] | None = None) -> None:
    """`python run.py` and `pwab run`: `main`, then leave without the interpreter's shutdown. Everything the
    run keeps is on disk by then, and the shutdown has nothing left to save: after a finished
    run it only tears down the loaded data and the JVM (~1 s on `full`, 40% of a short run's
    wall time); after Ctrl-C or a fatal error it would wait for the tasks still in flight and
    the library threads they use (a model call can take minutes)."""
    leave(main(argv))


def _report_stop(plan: RunPlan, how: str, write_error: CheckpointWriteError | None = None) -> None:
    """Say what a stopped run kept and the command that finishes it; first the write that failed
    (`write_error`, or the writer's own while it saved the finished tasks), once."""
    writer = plan.writer
    failures = [str(error) for error in (write_error, writer and writer.write_error) if error is not None]
    for failure in dict.fromkeys(failures):
        print(f"error: {failure}", file=sys.stderr)
    if writer is None:
        print(f"{how} before any task ran; no result file was written", file=sys.stderr)
        return
    done, total, saved = len(writer.records), len(plan.kept) + len(plan.jobs), writer.saved or 0
    kept = (f"finished and kept in {plan.output}" if saved >= done else
            f"finished, {saved} of them kept in {plan.output} (the others run again)")
    print(f"{how}: {done} of {total} task(s) {kept}; finish the run with:\n"
          f"  {resume_command(plan.config, plan.output)}", file=sys.stderr)
