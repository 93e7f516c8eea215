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
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # devtools/ lives at the repository root, outside the installed packages

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.settings import parse, setting  # noqa: E402
from devtools.parity_puma import STEPS  # noqa: E402
from devtools.parity_requests import VARIANTS  # noqa: E402
from devtools.parity_session import CHECKS, DEFAULT_CHECKS  # noqa: E402


@dataclass
class ReleaseParitySettings:
    """The two code bases, the data, the checks run and where the report goes."""

    checks: list[str] = setting(None, f"which checks to run, of: {', '.join(CHECKS)}", positional=True, nargs="*",
                                metavar="CHECK", factory=list, default_text=", ".join(DEFAULT_CHECKS))
    release_dir: str = setting(None, "a checkout of HongruCai/PersonalWAB at 23ff65c", required=True)
    data_dir: str = setting(None, "this project's data directory, artefacts built", required=True)
    split: str = setting("test", "task split compared", choices=["train", "test"])
    limit: int | None = setting(None, "compare only the first N tasks of the split (the puma check: N tasks of "
                                      "each type on each split, drawn with --seed)", kind=int)
    out: str | None = setting(None, "JSON report file (per check: tallies, the first difference, every differing "
                                    "task)", default_text="print only", aliases=("report",))
    extra_path: list[str] = setting(None, "folders with packages the release needs and this project does not "
                                          "install (e.g. tenacity, termcolor)", nargs="+", metavar="DIR",
                                    factory=list, default_text="$PWAB_PARITY_EXTRA, folders separated by :")
    variants: str = setting(",".join(VARIANTS), f"first_request configurations, comma-separated, of: "
                                                f"{', '.join(VARIANTS)}")
    agent_model: str = setting("gpt-4o-mini", "model name both runs send for the agent")
    user_model: str = setting("gpt-4o", "model name for the LLM user (must differ from the agent's: requests are "
                                        "told apart by it)")
    protocol_file: str | None = setting(None, "passed to this project's run.py --protocol_file (the release "
                                              "protocol pack)")
    interec_memory_file: str | None = setting(None, "InteRecAgent memory both runs start from",
                                              default_text="made with the project's initialiser")
    puma_function_file: str | None = setting(None, "function file for taskspe memory",
                                             default_text="the heuristic's choice for every task")
    work_dir: str | None = setting(None, "keep the mirror, logs and run outputs here, for a closer look and for "
                                         "reusing step 1 of the puma check", default_text="temporary, removed")
    timeout_s: float = setting(3600.0, "limit for each run of the release or the project")
    puma_model: str | None = setting(None, "puma check: the stand-in model folder both sides load",
                                     default_text="a tiny Llama made from the data")
    puma_new_tokens: int = setting(48, "puma check: new tokens of the greedy parameter outputs")
    seed: int = setting(0, "puma check: the seed of the draw of --limit tasks of each type per split (recorded in "
                           "the report)")
    release_libs: str | None = setting(None, "puma check (required): the folder of the release-era libraries the "
                                             "release's PUMA code runs on, made by `bash "
                                             "scripts/tools/install_release_libs.sh DIR`",
                                       default_text="$PWAB_RELEASE_LIBS")
    puma_steps: str = setting(",".join(STEPS), "puma check: which steps to compare, comma-separated (step 1 always "
                                               "runs, or is reused from --work_dir)")


def main(argv: list[str] | None = None) -> int:
    args = parse(ReleaseParitySettings, argv, prog="scripts/tools/release_parity.py", description=__doc__)
    from devtools.parity_session import ParityConfig, run_session
    from devtools.release_mirror import ParityError

    extra = args.extra_path or [p for p in os.environ.get("PWAB_PARITY_EXTRA", "").split(os.pathsep) if p]
    release_libs = args.release_libs or os.environ.get("PWAB_RELEASE_LIBS") or None

    def absolute(path: str | None) -> str | None:  # both runs work in folders of their own
        return str(Path(path).resolve()) if path else None

    config = ParityConfig(
        release_dir=Path(args.release_dir).resolve(), data_dir=Path(args.data_dir).resolve(), split=args.split,
        limit=args.limit, checks=tuple(args.checks or DEFAULT_CHECKS), extra_paths=[absolute(p) for p in extra],
        variants=tuple(v for v in args.variants.split(",") if v),
        agent_model=args.agent_model, user_model=args.user_model, protocol_file=absolute(args.protocol_file),
        interec_memory_file=absolute(args.interec_memory_file), puma_function_file=absolute(args.puma_function_file),
        work_dir=Path(args.work_dir).resolve() if args.work_dir else None, timeout_s=args.timeout_s,
        puma_model=absolute(args.puma_model), puma_new_tokens=args.puma_new_tokens, seed=args.seed,
        release_libs=absolute(release_libs), puma_steps=tuple(s for s in args.puma_steps.split(",") if s))
    try:
        config.validate()
        with tempfile.TemporaryDirectory(prefix="release_parity_") as scratch:
            report = run_session(config, Path(scratch), REPO_ROOT, log=print)
    except ParityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"report: {args.out}")
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(run_command(main))
