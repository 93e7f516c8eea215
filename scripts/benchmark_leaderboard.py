"""Time the leaderboard tools on official-size result files.

    python scripts/benchmark_leaderboard.py [--files 20]

Writes `--files` synthetic result files of the full test split (2,174 records each,
alternating single- and multi-turn) to a temporary folder and reports how long
`summarize` (parse, validate, recompute, render) takes over all of them, and
`validate` over one. Timings live here rather than in the test suite, where a busy
machine would turn them red.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # devtools/ lives at the repository root, outside the installed packages

from PersonalWAB.leaderboard.summarize import render_markdown, summarize_files  # noqa: E402
from PersonalWAB.leaderboard.validate import validate_file  # noqa: E402
from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.settings import parse, setting  # noqa: E402
from devtools.doubles.result_files import full_split_file  # noqa: E402


@dataclass
class LeaderboardBenchmarkSettings:
    """How many result files `summarize` reads."""

    files: int = setting(20, "synthetic full-split result files written and summarized (a leaderboard's size)")


def main(argv: list[str] | None = None) -> int:
    args = parse(LeaderboardBenchmarkSettings, argv, prog="scripts/benchmark_leaderboard.py", description=__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"run{i:02d}.json" for i in range(args.files)]
        for i, path in enumerate(paths):
            full_split_file(path, i, multi_turn=i % 2 == 1)
        start = time.perf_counter()
        rows, _ = summarize_files(paths)
        render_markdown(rows)
        summarize_s = time.perf_counter() - start
        start = time.perf_counter()
        validate_file(paths[0])
        validate_s = time.perf_counter() - start
    print(f"summarize {args.files} full-split files: {summarize_s:.2f} s; validate one: {validate_s:.2f} s "
          f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
