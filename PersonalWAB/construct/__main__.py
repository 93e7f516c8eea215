"""`python -m PersonalWAB.construct {fetch,build,consistency,stats} ...`

  fetch        download Amazon Reviews 2023 raw files of some categories (needs internet)
  build        raw files -> a benchmark directory in the official layout (OUT/data), resumable;
               --dry_run prints the model calls still to make and their estimated cost
  consistency  profile -> behaviour matching and profile -> product ranking with an LLM judge
  stats        Table 2-style statistics and a figure for one or more data directories

See docs/construct.md for the paper's setting and for building a new category.
"""

from __future__ import annotations

import sys

from PersonalWAB.cli import BAD_INPUT, dispatch
from PersonalWAB.llm import LLMError

# command -> ("module:function" run with the remaining arguments, one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "fetch": ("PersonalWAB.construct.commands:fetch", "download Amazon Reviews 2023 raw files (needs internet)"),
    "build": ("PersonalWAB.construct.commands:build", "build a benchmark directory from raw files (resumable)"),
    "consistency": ("PersonalWAB.construct.commands:consistency",
                    "profile-consistency evaluation with an LLM judge"),
    "stats": ("PersonalWAB.construct.commands:stats", "data statistics and a figure"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("python -m PersonalWAB.construct", "Construct a PersonalWAB-style benchmark from raw reviews.",
                    COMMANDS, argv, bad_input=(*BAD_INPUT, LLMError))


if __name__ == "__main__":
    sys.exit(main())
