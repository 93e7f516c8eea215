"""`pwab`: one command for the benchmark's tools, each the same as its `python -m` form.

    pwab run ...          = python run.py ...                    (evaluate an agent)
    pwab data ...         = python -m PersonalWAB.data ...       (synthetic, download, validate, protocol)
    pwab build ...        = python -m PersonalWAB.build ...      (indexes, recommender, embeddings)
    pwab construct ...    = python -m PersonalWAB.construct ...  (build a benchmark from raw reviews)
    pwab leaderboard ...  = python -m PersonalWAB.leaderboard ...(validate, summarize, report, plot)

Each command's module is imported only when it is chosen, so `pwab --help` is instant.
"""

from __future__ import annotations

import importlib
import sys

# command -> ("module:function" called with the remaining arguments, one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("PersonalWAB.runner.cli:cli", "evaluate an agent on a task split (python run.py)"),
    "data": ("PersonalWAB.data.__main__:main", "write synthetic data, download or validate data, build the "
                                               "release protocol pack"),
    "build": ("PersonalWAB.build:main", "build a data folder's search index, recommender and embeddings"),
    "construct": ("PersonalWAB.construct.__main__:main", "construct a PersonalWAB-style benchmark from raw reviews"),
    "leaderboard": ("PersonalWAB.leaderboard.__main__:main", "validate, summarize, report and plot result files"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {help_line}" for name, (_, help_line) in COMMANDS.items()]
    return ("usage: pwab COMMAND [ARGS...]   (pwab COMMAND --help for a command's flags)\n\n"
            "PersonalWAB: the benchmark of personalized web agents.\n\ncommands:\n" + "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"pwab: unknown command {name!r}; expected one of {', '.join(COMMANDS)}\n\n{usage()}", file=sys.stderr)
        return 2
    module, _, function = COMMANDS[name][0].partition(":")
    sys.argv = [f"pwab {name}", *rest]  # each command's parser names itself from argv[0]
    code = getattr(importlib.import_module(module), function)(rest)
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
