"""Create the InteRecAgent memory file that `run.py --agent_memory interecagent
--interec_memory_file FILE` starts from.

    python scripts/tools/init_interecagent_memory.py --data_dir DIR --out FILE [--max_items 30]

The initialisation is offline (no language model) and reads training data only:

* like: products of each user's behaviours of split "history" or "train" rated 4 or
  more, as "title (store, main category, $price, parent ASIN)";
* dislike: the same for ratings of 2 or less;
* expect: short phrases (first sentence, at most 12 words) of the user's train-split
  search and recommendation instructions.

Test-split behaviours and instructions are never read, so evaluating on the test
split leaks nothing. (Train-split targets are among the likes: do not evaluate the
train split with this file.) During a run the agent's model adds to the lists after
each task, and the file is saved after every update.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PersonalWAB.data.loader import load_benchmark_data  # noqa: E402
from PersonalWAB.errors import DataError  # noqa: E402
from PersonalWAB.interec_memory import MAX_ITEMS, initial_memory, write_memory_file  # noqa: E402
from PersonalWAB.paths import default_data_dir  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=None, help="data directory (default: official data, else synthetic)")
    parser.add_argument("--out", required=True, help="memory file to write (JSON)")
    parser.add_argument("--max_items", type=int, default=MAX_ITEMS, help="longest list kept per user and kind")
    args = parser.parse_args(argv)
    try:
        data = load_benchmark_data(args.data_dir or default_data_dir())
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    entries = initial_memory(data, args.max_items)
    write_memory_file(args.out, entries)
    totals = {kind: sum(len(e[kind]) for e in entries.values()) for kind in ("like", "dislike", "expect")}
    print(f"wrote {args.out}: {len(entries)} users, "
          + ", ".join(f"{n} {kind}s" for kind, n in totals.items()) + f" (from {data.source} data)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
