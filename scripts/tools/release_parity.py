"""Side-by-side parity of this project with the original PersonalWAB release.

    .venv/bin/python scripts/tools/release_parity.py --release_dir DIR --data_dir DATA \
        [--split test] [--limit N] [--out FILE] [observations] [first_request] [multiturn_user] [puma]

Runs the release's own code (imported at run time from the checkout DIR of
HongruCai/PersonalWAB at 23ff65c, through a temporary mirror whose data paths point at
DATA) and this project's code on the same synthetic data, and compares what they produce:

* observations:   the same actions replayed through both environments: observation
                  strings, [function_acc, result_acc] and done, per task and action kind;
* first_request:  each agent configuration run by both run.py's against local scripted
                  model servers with the same deterministic model: the first request body of
                  every task (messages and tools byte for byte; other fields reported apart);
* multiturn_user: the multi-turn track with the LLM user: the user simulator's requests;
* puma:           a user's `puma run --recipe release` beside the release's own PUMA scripts run
                  with the flags of their .sh files: every setting each step ran with, then step
                  by step (SFT data, SFT batches and loss, generation, scores, DPO pairs,
                  training, the agent), on both splits (--limit N: N tasks of each type on each
                  split, drawn with --seed so that every type's scores can be above 0). Run only
                  when named. Without --protocol_file, the release protocol pack is built from
                  --release_dir (and the data's index for its texts).
                  The release runs on the libraries of its time (transformers 4.45, TRL 0.11,
                  ...), installed once into a folder of their own with
                  `bash scripts/tools/install_release_libs.sh DIR` and passed as --release_libs
                  DIR (or $PWAB_RELEASE_LIBS); the report names both sides' library versions.

Prints one summary per check and writes everything to a JSON report; exits 1 when anything
differs, 2 on a bad setting. Nothing of the release is copied into the project. The
release's code needs packages this project does not install (tenacity, termcolor): put them
in a folder of their own (`.venv/bin/pip install --target /work/parity_extra tenacity
termcolor`) and pass `--extra_path /work/parity_extra`. See docs/fidelity.md.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # devtools/ lives at the repository root, outside the installed packages

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.settings import parse  # noqa: E402
from devtools.parity.settings import ParitySettings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from devtools.parity.mirror import ParityError
    from devtools.parity.session import run_session

    settings = parse(ParitySettings, argv, prog="scripts/tools/release_parity.py", description=__doc__).settled()
    try:
        settings.validate()
        with tempfile.TemporaryDirectory(prefix="release_parity_") as scratch:
            report = run_session(settings, Path(scratch), REPO_ROOT, log=print)
    except ParityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if settings.out:
        Path(settings.out).parent.mkdir(parents=True, exist_ok=True)
        Path(settings.out).write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"report: {settings.out}")
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(run_command(main))
