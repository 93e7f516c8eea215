"""The leaderboard's commands, each a function of its own command line with its own settings:
`python -m PersonalWAB.leaderboard validate|summarize|compare|plot|report|pack ...`.

Exit status: 0 when everything given was valid and done, 2 for bad input: a file that is
invalid or cannot be read (every command reads files through `validate.read_valid`, so each
refuses such a file with the same one-line message), bad arguments, an unreadable --data_dir,
files that cannot be compared without --force, an --out that cannot be written.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

from PersonalWAB.errors import DataError
from PersonalWAB.outputs import CONTAINER, FILE, parse_command, write_output
from PersonalWAB.settings import setting

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 2, 2
T = TypeVar("T")

DATA_DIR_HELP = "benchmark data folder: also check task ids, types and targets against its split"
NAME_HELP = ("method name of a file, once per file in the files' order (`--name a --name b`); names the rows and "
             "figures when the run args do not say enough")
NAME_DEFAULT = "derived from each file's run args"


def _files(help_text: str = "result files (run.py output)") -> Any:
    return setting(None, help_text, positional=True, nargs="+", metavar="FILE")


def _data_dir() -> Any:
    return setting(None, DATA_DIR_HELP, metavar="DIR")


def _names() -> Any:
    return setting(None, NAME_HELP, nargs=1, metavar="NAME", default_text=NAME_DEFAULT)


@dataclass
class ValidateSettings:
    """`validate`: check result files against the format and the benchmark."""

    files: list[str] = _files()
    quiet: bool = setting(False, "print only the errors and the verdict, not the warnings and the summary")
    data_dir: str | None = _data_dir()


@dataclass
class SummarizeSettings:
    """`summarize`: leaderboard tables ranked by overall F. Acc, then R. Acc."""

    files: list[str] = _files()
    format: str = setting("md", "table format: md (Markdown), html (a page) or csv (a spreadsheet)",
                          choices=["md", "html", "csv"])
    out: str | None = setting(None, "write the table to this file", metavar="FILE", default_text="stdout")
    name: list[str] | None = _names()


@dataclass
class CompareSettings:
    """`compare`: differences to a baseline per task type, with paired bootstrap intervals and
    tests, and the tasks that flip."""

    files: list[str] = _files("the baseline first, then each file compared with it")
    format: str = setting("text", "report format: text (terminal) or markdown (an issue or a doc)",
                          choices=["text", "markdown"])
    out: str | None = setting(None, "write the report to this file", metavar="FILE", default_text="stdout")
    force: bool = setting(False, "compare files of different splits, data or protocol (the differences then "
                                 "mean little)")
    allow_mixed_tracks: bool = setting(False, "compare a single-turn with a multi-turn file (the same task is "
                                              "another problem on each track)")


@dataclass
class PlotSettings:
    """`plot`: PNG figures of per-type accuracy, multi-turn transitions and attempts."""

    files: list[str] = _files()
    out: str = setting(str, "folder for the PNG files", required=True, metavar="DIR")
    name: list[str] | None = _names()


@dataclass
class ReportSettings:
    """`report`: one self-contained HTML page per result file."""

    files: list[str] = _files()
    out: str = setting(".", "folder for the pages", metavar="DIR")
    compare: str | None = setting(None, "add a section comparing each file with this baseline file (as the "
                                        "compare command does)", metavar="BASELINE")
    force: bool = setting(False, "with --compare: compare files of different splits, data or protocol")
    allow_mixed_tracks: bool = setting(False, "with --compare: compare a single-turn with a multi-turn file")
    name: list[str] | None = _names()
    data_dir: str | None = _data_dir()


@dataclass
class PackSettings:
    """`pack`: the submission bundle (compressed file, checksums, validation summary)."""

    file: str = setting(str, "the result file to pack", positional=True, metavar="FILE")
    out: str | None = setting(None, "folder for the bundle", metavar="DIR", default_text="beside the file")
    force: bool = setting(False, "pack even an invalid file (its summary says so)")
    data_dir: str | None = _data_dir()


def _settings(cls: type[T], argv: list[str] | None, outputs: dict[str, str],
              fill: Callable[[Any], None] | None = None) -> T:
    """`argv` parsed as `cls`, with its outputs claimed by the output rule before any file is read."""
    doc = (cls.__doc__ or "").split("`: ", 1)[-1]
    settings: T = parse_command([cls], argv, outputs, fill=fill, description=doc[:1].upper() + doc[1:])[0]
    return settings


def _beside_the_file(settings: PackSettings) -> None:
    settings.out = settings.out or str(Path(settings.file).parent)


def _names_match(settings: Any) -> bool:
    """One --name per file, or none; says so on stderr when not."""
    if settings.name and len(settings.name) != len(settings.files):
        print(f"error: {len(settings.name)} --name values for {len(settings.files)} files: give one per file or "
              "none", file=sys.stderr)
        return False
    return True


def _load_data(data_dir: str | None) -> Any | None:
    if data_dir is None:
        return None
    from PersonalWAB.data.loader import load_benchmark_data

    return load_benchmark_data(data_dir)


def validate(argv: list[str] | None = None) -> int:
    from PersonalWAB.leaderboard.validate import validate_file

    args = _settings(ValidateSettings, argv, {})
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
        write_output(Path(out), text)
    else:
        sys.stdout.write(text)


def summarize(argv: list[str] | None = None) -> int:
    from PersonalWAB.leaderboard.summarize import RENDERERS, summarize_files

    args = _settings(SummarizeSettings, argv, {"out": FILE})
    if not _names_match(args):
        return EXIT_USAGE

    rows, _ = summarize_files([*args.files], args.name)
    _emit(RENDERERS[args.format](rows), args.out)
    return EXIT_OK


def _comparisons(paths: list[Path | str], force: bool, mixed_tracks: bool) -> list[Any] | int:
    """Each file after the first compared with the first, or the exit status after saying why not:
    2 for files that cannot be compared without --force or a file that is invalid or cannot be read."""
    from PersonalWAB.leaderboard.compare import CompareError, compare_files

    try:
        return compare_files(paths, force, mixed_tracks)
    except CompareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID


def compare(argv: list[str] | None = None) -> int:
    from PersonalWAB.leaderboard.compare import RENDERERS

    args = _settings(CompareSettings, argv, {"out": FILE})
    if len(args.files) < 2:
        print("error: compare needs the baseline file and at least one file to compare with it", file=sys.stderr)
        return EXIT_USAGE
    comparisons = _comparisons([*args.files], args.force, args.allow_mixed_tracks)
    if isinstance(comparisons, int):
        return comparisons
    _emit(RENDERERS[args.format](comparisons), args.out)
    return EXIT_OK


def plot(argv: list[str] | None = None) -> int:
    from PersonalWAB.leaderboard.plots import write_plots

    args = _settings(PlotSettings, argv, {"out": CONTAINER})
    if not _names_match(args):
        return EXIT_USAGE
    for path in write_plots([*args.files], args.out, args.name):
        print(path)
    return EXIT_OK


def report(argv: list[str] | None = None) -> int:
    from PersonalWAB.leaderboard.report import write_report_page
    from PersonalWAB.leaderboard.validate import read_valid

    args = _settings(ReportSettings, argv, {"out": CONTAINER})
    if not _names_match(args):
        return EXIT_USAGE
    comparisons = (_comparisons([args.compare, *args.files], args.force, args.allow_mixed_tracks) if args.compare
                   else [None] * len(args.files))
    if isinstance(comparisons, int):
        return comparisons
    data = _load_data(args.data_dir)
    checked = [read_valid(path, data) for path in args.files]  # every file, before any page is written
    for i, valid in enumerate(checked):
        print(write_report_page(valid, args.out, args.name[i] if args.name else None, comparisons[i], data))
    return EXIT_OK


def pack(argv: list[str] | None = None) -> int:
    from PersonalWAB.leaderboard.pack import pack_file

    args = _settings(PackSettings, argv, {"out": CONTAINER}, _beside_the_file)
    bundle, report = pack_file(args.file, args.out, _load_data(args.data_dir), args.force)
    print("\n".join(report.lines()))
    print(f"bundle: {bundle}")
    if "synthetic" in report.flags:
        print("note: the run used synthetic data; the leaderboard ranks runs on the official data only")
    return EXIT_OK if report.valid else EXIT_INVALID
