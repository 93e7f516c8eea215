"""Show that the PUMA parity check can fail: small differences injected into copies of PUMA's
code (top-p, top-k, DPO beta, learning-rate schedule, epochs, memory cut length, recommend ASIN
order, an empty review scored as the placeholder) and of its values (the release recipe file's
LoRA rank, generation temperature and global batch; the documented defaults of LoRA dropout,
num_return_sequences and max_new_tokens), each of which must be reported, naming the item.

    .venv/bin/python scripts/tools/parity_selftest.py --work_dir /tmp/selftest            # cheap form (CI)
    .venv/bin/python scripts/tools/parity_selftest.py --work_dir /tmp/selftest --release_dir /path/to/release \\
        -- --data_dir data/synthetic/small --release_libs /work/release_libs --limit 3 ...   # against the release

Exit status: 0 when every injection was reported and the clean tree's runs agree, 1 otherwise,
2 when the self-test cannot run (an injection no longer matches the code, a probe failed).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.errors import DataError  # noqa: E402
from PersonalWAB.settings import parse, setting  # noqa: E402
from devtools.parity.selftest import INJECTIONS, SelfTestError, cheap_selftest, release_selftest  # noqa: E402


@dataclass
class SelfTestSettings:
    """Where the copies go, which injections run, and against what."""

    work_dir: str = setting(str, "copies, inputs and observations go here", required=True)
    release_dir: str | None = setting(None, "a checkout of the release at 23ff65c: run each copy's harness against it "
                                            "(arguments after -- go to release_parity.py)",
                                      default_text="the cheap form, no release")
    only: str = setting("", f"comma-separated injection names, of: {', '.join(i.name for i in INJECTIONS)}",
                        default_text="all")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parse(SelfTestSettings, argv[:split], prog="scripts/tools/parity_selftest.py", description=__doc__)
    chosen = tuple(i for i in INJECTIONS if not args.only or i.name in args.only.split(","))
    if not chosen:
        raise DataError(f"--only: no injection named {args.only!r}; known: {', '.join(i.name for i in INJECTIONS)}")
    work_dir = Path(args.work_dir).resolve()
    try:
        if args.release_dir:
            outcome = release_selftest(work_dir, ["--release_dir", args.release_dir, *argv[split + 1:]], chosen)
        else:
            outcome = cheap_selftest(work_dir, chosen)
    except SelfTestError as error:
        print(f"parity self-test: {error}", file=sys.stderr)
        return 2
    for line in outcome.lines():
        print(line)
    print("parity self-test: " + ("every injected difference was reported" if outcome.passed else "FAILED"))
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(run_command(main))
