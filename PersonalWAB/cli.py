"""`pwab`: one command for the benchmark's tools, each the same as its `python -m` form.

    pwab run ...          = python run.py ...                    (evaluate an agent)
    pwab data ...         = python -m PersonalWAB.data ...       (synthetic, download, validate, protocol)
    pwab build ...        = python -m PersonalWAB.build ...      (indexes, recommender, embeddings)
    pwab construct ...    = python -m PersonalWAB.construct ...  (build a benchmark from raw reviews)
    pwab leaderboard ...  = python -m PersonalWAB.leaderboard ...(validate, summarize, compare, report, plot)
    pwab ablate ...       (memory arms of one agent at a matched token budget)
    pwab audit ...        (leakage and protocol audit of data and runs)

Each command's module is imported only when it is chosen, so `pwab --help` is instant.
`dispatch` serves PUMA's `puma` command too. Every command checks the output paths it was
given before any work (`PersonalWAB.outputs`: a folder that cannot be made or a file that
cannot be written is named with its flag, and no file is replaced that the command did not
write), and `run_command` ends bad input that escapes a command
in one line, never a traceback. While a command runs, Ctrl-C and SIGTERM stop it the same
clean way (`stop_signals`), and its claim on its outputs holds (`command_scope`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn

from PersonalWAB.errors import DataError, FatalError
from PersonalWAB.outputs import command_scope

# What a command's bad input or unwritable output raises when the command itself does not say
# it: the one line of the exception is shown, exit status 2 (never a traceback).
BAD_INPUT: tuple[type[Exception], ...] = (DataError, OSError)
EXIT_BAD_INPUT = 2
# A service the command needs failed for good (a model endpoint after its retries): one line, exit 1.
EXIT_FATAL = 1
# Stopped by Ctrl-C or SIGTERM, as a shell reports a process that SIGINT ended.
EXIT_INTERRUPTED = 130

# command -> ("module:function" called with the remaining arguments, one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("PersonalWAB.runner.cli:cli", "evaluate an agent on a task split (python run.py)"),
    "data": ("PersonalWAB.data.__main__:main", "write synthetic data, download or validate data, build the "
                                               "release protocol pack"),
    "build": ("PersonalWAB.build:main", "build a data folder's search index, recommender and embeddings"),
    "construct": ("PersonalWAB.construct.__main__:main", "construct a PersonalWAB-style benchmark from raw reviews"),
    "leaderboard": ("PersonalWAB.leaderboard.__main__:main",
                    "validate, summarize, compare, report and plot result files"),
    "reproduce": ("PersonalWAB.reproduce.cli:cli", "run the paper's table rows for a model and compare with the paper"),
    "ablate": ("PersonalWAB.ablate:main", "one agent over several memory arms at a matched token budget: a table, "
                                          "paired verdicts and a plot"),
    "audit": ("PersonalWAB.audit.cli:main", "leakage and protocol audit of a data folder and of result files"),
}


def usage(prog: str, title: str, commands: dict[str, tuple[str, str]], word: str = "COMMAND") -> str:
    width = max(map(len, commands))
    lines = [f"  {name:<{width}}  {help_line}" for name, (_, help_line) in commands.items()]
    return (f"usage: {prog} {word} [ARGS...]   ({prog} {word} --help for its flags)\n\n{title}\n\n"
            f"{word.lower()}s:\n" + "\n".join(lines))


def dispatch(prog: str, title: str, commands: dict[str, tuple[str, str]], argv: list[str] | None,
             word: str = "COMMAND", bad_input: tuple[type[Exception], ...] = BAD_INPUT) -> int:
    """Run the command `argv` names (`commands`: name -> ("module:function", help)) with the
    rest of `argv` (through `run_command`); its exit status. No command or `--help`: the list
    of commands."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage(prog, title, commands, word))
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in commands:
        print(f"{prog}: unknown {word.lower()} {name!r}; expected one of {', '.join(commands)}\n\n"
              f"{usage(prog, title, commands, word)}", file=sys.stderr)
        return 2
    module, _, function = commands[name][0].partition(":")
    sys.argv = [f"{prog} {name}", *rest]  # a command's parser that names itself from argv[0] says `prog name`
    return run_command(getattr(importlib.import_module(module), function), rest, bad_input)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """While the block runs, Ctrl-C (SIGINT) and SIGTERM (`kill`, a job scheduler's stop) raise
    KeyboardInterrupt in the main thread, so every command stops one way: its child processes
    killed, its scratch removed, what it finished kept. SIGINT is taken even when the process
    started with it ignored (a background job of a shell script inherits that): Python then
    installs no handler of its own, and the user's Ctrl-C or `kill -INT` would be lost. Only
    the main thread can take signals; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_command(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None,
                bad_input: tuple[type[Exception], ...] = BAD_INPUT) -> int:
    """`main(argv)`'s exit status; `bad_input` that escapes it (a DataError, an output that
    cannot be written, a file that cannot be read) ends it with one line naming the file, a
    FatalError (a service that failed for good) with its one line and exit status 1, and a stop
    (Ctrl-C, SIGTERM) that the command does not report itself with one line and exit status 130."""
    try:
        with stop_signals(), command_scope():
            return int(main(argv) or 0)
    except bad_input as exc:
        text = os_error_text(exc) if isinstance(exc, OSError) else str(exc)
        print(f"error: {text}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except FatalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FATAL
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def leave(code: int) -> NoReturn:
    """Exit with `code` now, without the interpreter's shutdown: for a command whose work is
    all on disk (a finished or stopped run, an interrupted build), where the shutdown would
    only tear down the loaded data and the JVM, or wait for threads still in flight (seconds
    on big data; minutes for a model call)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def os_error_text(exc: OSError) -> str:
    """An OSError as one line that names its file: `PATH: reason`."""
    if exc.filename is None:
        return exc.strerror or str(exc)
    names = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
    return f"{names}: {exc.strerror or exc}"


def main(argv: list[str] | None = None) -> int:
    return dispatch("pwab", "PersonalWAB: the benchmark of personalized web agents.", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
