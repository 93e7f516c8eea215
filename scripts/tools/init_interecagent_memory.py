"""Create the InteRecAgent memory file that `run.py --agent_memory interecagent
--interec_memory_file FILE` starts from.

    python scripts/tools/init_interecagent_memory.py --data_dir DIR --out FILE \
        [--model gpt-4o-mini] [--api_base URL] [--max_concurrency 4] [--protocol_file PACK]
    python scripts/tools/init_interecagent_memory.py --data_dir DIR --out FILE --offline

As in the release, a language model reads each user's history-split reviews (the newest
200) and writes the parent ASINs the user likes and dislikes (one call per user,
temperature 0); expectations start empty. The file is saved after every user, and a
second run with the same --out skips the users already in it. `--offline` writes it
without a model, by rating (4 or more: like; 2 or less: dislike): a departure from the
release, for runs with no key.

Only the history split is read, so evaluating on the train or test split leaks nothing.
During a run the agent's model updates the lists after each task and the file is saved
after every update.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.cli import run_command
from PersonalWAB.outputs import check_output
from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.errors import DataError
from PersonalWAB.memory.interec import (KINDS, initial_memory, llm_initial_memory, read_memory_file,
                                        write_memory_file)
from PersonalWAB.paths import default_data_dir
from PersonalWAB.settings import parse, setting


@dataclass
class InitMemorySettings:
    """The data, the output file and the model that writes the lists."""

    data_dir: str | None = setting(None, "data directory whose history split is read",
                                   default_text="the official data when present, else synthetic")
    out: str = setting(str, "memory file to write (JSON); an existing one is resumed", required=True)
    model: str = setting("gpt-4o-mini", "the model that writes each user's likes and dislikes (any litellm model "
                                        "string)")
    api_base: str | None = setting(None, "base URL of an OpenAI-compatible server (a local model)")
    max_concurrency: int = setting(4, "model calls in flight; raise it where the API allows")
    max_retries: int = setting(5, "retries of a call on rate limits, timeouts and server errors")
    protocol_file: str | None = setting(None, "release protocol pack whose prompt is sent",
                                        default_text="the default pack when placed, else the project's texts")
    offline: bool = setting(False, "no model: like (rating 4 or more) and dislike (2 or less) by rating, for runs "
                                   "with no key (a departure from the release)")


def main(argv: list[str] | None = None) -> int:
    args = parse(InitMemorySettings, argv, prog="scripts/tools/init_interecagent_memory.py", description=__doc__)
    try:
        if args.max_concurrency < 1:
            raise DataError(f"--max_concurrency {args.max_concurrency}: must be at least 1")
        check_output(args.out, "--out")  # before reading it back: a FIFO would block the read
        data = load_benchmark_data(args.data_dir or default_data_dir())
        if args.offline:
            entries, unreadable = initial_memory(data), []
        else:
            from tqdm import tqdm

            from PersonalWAB.llm import LLMClient
            from PersonalWAB.protocol import load_protocol

            protocol = load_protocol(args.protocol_file)
            done = read_memory_file(args.out) if Path(args.out).exists() else {}
            client = LLMClient(args.model, api_base=args.api_base, temperature=0.0, max_retries=args.max_retries)
            with tqdm(total=len(set(data.histories) - set(done)), desc="initial InteRecAgent memory",
                      unit="user") as bar:
                entries, unreadable = llm_initial_memory(
                    data, client, protocol, done=done, max_concurrency=args.max_concurrency,
                    checkpoint=lambda e: write_memory_file(args.out, e), progress=bar.update)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_memory_file(args.out, entries)
    totals = {kind: sum(len(e[kind]) for e in entries.values()) for kind in KINDS}
    how = "offline, by rating" if args.offline else f"written by {args.model}"
    print(f"wrote {args.out}: {len(entries)} users ({how}), "
          + ", ".join(f"{n} {kind}s" for kind, n in totals.items()) + f" (from {data.source} data)")
    if unreadable:
        print(f"warning: {len(unreadable)} user(s) got an answer that is not a JSON object and start with empty "
              f"lists (e.g. {unreadable[0]})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
