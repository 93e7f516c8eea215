"""Command line: python -m PersonalWAB.leaderboard {validate,summarize,compare,plot,report,pack} ...

Exit status: 0 when everything given was valid and done, 1 when a file is
invalid (or could not be used), 2 for usage errors (bad arguments, unreadable
--data_dir, files that cannot be compared without --force).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError
from PersonalWAB.cli import check_command_outputs

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
# Each command's --out: a folder (True) or a file (False); checked before any file is read.
OUTPUTS = {"summarize": {"out": False}, "compare": {"out": False}, "plot": {"out": True},
           "report": {"out": True}, "pack": {"out": True}}


def _load_data(data_dir: str | None) -> Any | None:
    if data_dir is None:
        return None
    from PersonalWAB.data.loader import load_benchmark_data

    return load_benchmark_data(data_dir)


def cmd_validate(args: argparse.Namespace) -> int:
    from PersonalWAB.leaderboard.validate import validate_file

    data = _load_data(args.data_dir)
    all_valid = True
    for path in args.files:
        report = validate_file(path, data)
        lines = report.lines()
        if args.quiet:
            lines = [line for line in lines if ": error: " in line] + lines[-1:]
        print("\n".join(lines))
        all_valid &= report.valid
    return EXIT_OK if all_valid else EXIT_INVALID


def _emit(text: str, out: str | None) -> None:
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def _report_unusable(reports: list[Any], rows: list[Any]) -> bool:
    """Tell stderr about files left out or marked invalid; True when any was."""
    used = {row.path for row in rows}
    bad = False
    for report in reports:
        if report.path not in used:
            print(f"{report.path}: left out, its records cannot be scored; run validate", file=sys.stderr)
            bad = True
        elif not report.valid:
            print(f"{report.path}: INVALID ({report.count('error')} errors); shown with the flag 'invalid'",
                  file=sys.stderr)
            bad = True
    return bad


def cmd_summarize(args: argparse.Namespace) -> int:
    from PersonalWAB.leaderboard.summarize import RENDERERS, summarize_files

    rows, reports = summarize_files(args.files, args.name)
    bad = _report_unusable(reports, rows)
    _emit(RENDERERS[args.format](rows), args.out)
    return EXIT_INVALID if bad else EXIT_OK


def _comparisons(paths: list[str], force: bool) -> list[Any] | int:
    """Each file after the first compared with the first, or the exit status after saying why not:
    2 for files that cannot be compared without --force, 1 for a file that cannot be read."""
    from PersonalWAB.leaderboard.compare import CompareError, compare_files

    try:
        return compare_files(paths, force)
    except CompareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID


def cmd_compare(args: argparse.Namespace) -> int:
    from PersonalWAB.leaderboard.compare import RENDERERS

    if len(args.files) < 2:
        print("error: compare needs the baseline file and at least one file to compare with it", file=sys.stderr)
        return EXIT_USAGE
    comparisons = _comparisons(args.files, args.force)
    if isinstance(comparisons, int):
        return comparisons
    _emit(RENDERERS[args.format](comparisons), args.out)
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from PersonalWAB.leaderboard.plots import write_plots

    for path in write_plots(args.files, args.out, args.name):
        print(path)
    return EXIT_OK


SHOWN_ERRORS = 5  # of an invalid file's errors, on stderr (its page and `validate` list them all)


def _report_invalid(report: Any) -> None:
    """Tell stderr why a file whose page was written is invalid."""
    from PersonalWAB.leaderboard.validate import ERROR

    errors = [problem.format(report.path) for problem in report.problems if problem.severity == ERROR]
    print(f"{report.path}: INVALID ({len(errors)} errors); its page shows them", file=sys.stderr)
    for line in errors[:SHOWN_ERRORS]:
        print(f"  {line}", file=sys.stderr)
    if len(errors) > SHOWN_ERRORS:
        print(f"  ... and {len(errors) - SHOWN_ERRORS} more (run validate for all)", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from PersonalWAB.leaderboard.report import write_report_page
    from PersonalWAB.leaderboard.validate import validate_file

    comparisons = _comparisons([args.compare, *args.files], args.force) if args.compare else [None] * len(args.files)
    if isinstance(comparisons, int):
        return comparisons
    data = _load_data(args.data_dir)
    all_valid = True
    for i, path in enumerate(args.files):
        report = validate_file(path, data)
        print(write_report_page(report, args.out, args.name[i] if args.name else None, comparisons[i]))
        if not report.valid:
            _report_invalid(report)
            all_valid = False
    return EXIT_OK if all_valid else EXIT_INVALID


def cmd_pack(args: argparse.Namespace) -> int:
    from PersonalWAB.leaderboard.pack import PackError, pack_file

    try:
        bundle, report = pack_file(args.file, args.out, _load_data(args.data_dir), args.force)
    except PackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print("\n".join(report.lines()))
    print(f"bundle: {bundle}")
    if "synthetic" in report.flags:
        print("note: the run used synthetic data; the leaderboard ranks runs on the official data only")
    return EXIT_OK if report.valid else EXIT_INVALID


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m PersonalWAB.leaderboard",
                                     description="Validate, rank, plot, report and pack PersonalWAB result files.")
    sub = parser.add_subparsers(dest="command", required=True)

    def data_dir_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data_dir", help="benchmark data directory: also check task ids, types and targets "
                                          "against the split")

    def name_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--name", action="append", help="method name, once per file in order "
                                                       "(default: derived from the run args)")

    p = sub.add_parser("validate", help="check result files against the format and the benchmark")
    p.add_argument("files", nargs="+")
    p.add_argument("--quiet", action="store_true", help="print only errors and the verdict")
    data_dir_option(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("summarize", help="leaderboard tables ranked by overall F. Acc, then R. Acc")
    p.add_argument("files", nargs="+")
    p.add_argument("--format", choices=["md", "html", "csv"], default="md")
    p.add_argument("--out", help="write to this file instead of stdout")
    name_option(p)
    p.set_defaults(func=cmd_summarize)

    p = sub.add_parser("compare", help="differences to a baseline, per task type, with paired bootstrap "
                                       "intervals and tests, and the tasks that flip")
    p.add_argument("files", nargs="+", metavar="FILE", help="the baseline first, then each file compared with it")
    p.add_argument("--format", choices=["text", "markdown"], default="text")
    p.add_argument("--out", help="write to this file instead of stdout")
    p.add_argument("--force", action="store_true", help="compare files of different splits, data or protocol")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("plot", help="PNG figures: per-type accuracy; multi-turn transitions and attempts")
    p.add_argument("files", nargs="+")
    p.add_argument("--out", required=True, help="directory for the PNG files")
    name_option(p)
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("report", help="one self-contained HTML page per result file")
    p.add_argument("files", nargs="+")
    p.add_argument("--out", default=".", help="directory for the pages (default: current directory)")
    p.add_argument("--compare", metavar="BASELINE", help="add a section comparing each file with this baseline "
                                                         "(as the compare command does)")
    p.add_argument("--force", action="store_true", help="with --compare: compare files of different splits, data "
                                                        "or protocol")
    name_option(p)
    data_dir_option(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("pack", help="the submission bundle: compressed file, checksums, validation summary")
    p.add_argument("file")
    p.add_argument("--out", help="directory for the bundle (default: beside the file)")
    p.add_argument("--force", action="store_true", help="pack even an invalid file (the summary says so)")
    data_dir_option(p)
    p.set_defaults(func=cmd_pack)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "name", None) and len(args.name) != len(args.files):
        parser.error(f"{len(args.name)} --name values for {len(args.files)} files: give one per file or none")
    try:
        check_command_outputs(args, OUTPUTS.get(args.command, {}))
        return args.func(args)
    except DataError as exc:  # e.g. a --data_dir that cannot be loaded, an --out that cannot be written
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # e.g. nothing scorable to plot
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    from PersonalWAB.cli import run_command

    sys.exit(run_command(main))
