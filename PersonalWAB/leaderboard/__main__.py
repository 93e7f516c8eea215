"""Command line: python -m PersonalWAB.leaderboard {validate,summarize,compare,plot,report,pack,export,regrade,merge}

Exit status: 0 when everything given was valid and done, 2 for bad input: a file that is
invalid or cannot be read, bad arguments, an unreadable --data_dir, files that cannot be
compared without --force.
"""

from __future__ import annotations

import sys

from PersonalWAB.cli import dispatch

EXIT_INVALID = 2

# command -> ("module:function" run with the remaining arguments, one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("PersonalWAB.leaderboard.commands:validate",
                 "check result files against the format and the benchmark"),
    "summarize": ("PersonalWAB.leaderboard.commands:summarize",
                  "leaderboard tables ranked by overall F. Acc, then R. Acc"),
    "compare": ("PersonalWAB.leaderboard.commands:compare", "differences to a baseline, per task type, with paired "
                                                            "bootstrap intervals and tests, and the tasks that flip"),
    "plot": ("PersonalWAB.leaderboard.commands:plot", "PNG figures: per-type accuracy; multi-turn transitions and "
                                                      "attempts"),
    "report": ("PersonalWAB.leaderboard.commands:report", "one self-contained HTML page per result file"),
    "pack": ("PersonalWAB.leaderboard.commands:pack", "the submission bundle: compressed file, checksums, validation "
                                                      "summary"),
    "export": ("PersonalWAB.leaderboard.export:main", "one row per task run (task x trial) with every scored field: "
                                                     "csv, jsonl or parquet"),
    "regrade": ("PersonalWAB.leaderboard.regrade:main", "re-score stored trajectories under the current grader and "
                                                        "list the tasks that changed"),
    "merge": ("PersonalWAB.leaderboard.merge:merge", "join the result files of one run's shards (pwab run --shard "
                                                     "I/N) into the run's result file"),
}


def main(argv: list[str] | None = None) -> int:
    try:
        return dispatch("python -m PersonalWAB.leaderboard",
                        "Validate, rank, plot, report and pack PersonalWAB result files.", COMMANDS, argv)
    except ValueError as exc:  # e.g. nothing scorable to plot (a DataError is a usage error: dispatch says it, 2)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
