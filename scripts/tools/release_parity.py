"""Side-by-side parity of this project with the original PersonalWAB release.

    .venv/bin/python scripts/tools/release_parity.py --release_dir DIR --data_dir DATA \
        [--split test] [--limit N] [--report FILE] [observations] [first_request] [multiturn_user] [puma]

Runs the release's own code (imported at run time from the checkout DIR of
HongruCai/PersonalWAB at 23ff65c, through a temporary mirror whose data paths point at
DATA) and this project's code on the same synthetic data, and compares what they produce:

* observations:   the same actions replayed through both environments: observation
                  strings, [function_acc, result_acc] and done, per task and action kind;
* first_request:  each agent configuration run by both run.py's against local scripted
                  model servers with the same deterministic model: the first request body of
                  every task (messages and tools byte for byte; other fields reported apart);
* multiturn_user: the multi-turn track with the LLM user: the user simulator's requests;
* puma:           PUMA's steps under --recipe release beside the release's own PUMA scripts
                  (SFT data, SFT batches and loss, generation, scores, DPO pairs, the agent),
                  on both splits (--limit N: the first N tasks of each). Run only when named.
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

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # devtools/ lives at the repository root, outside the installed packages



def build_parser() -> argparse.ArgumentParser:
    from devtools.parity_requests import VARIANTS
    from devtools.parity_session import CHECKS, DEFAULT_CHECKS

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checks", nargs="*", metavar="check", help=f"which checks to run: {', '.join(CHECKS)} (default: {', '.join(DEFAULT_CHECKS)})")
    p.add_argument("--release_dir", required=True, help="a checkout of HongruCai/PersonalWAB at 23ff65c")
    p.add_argument("--data_dir", required=True, help="this project's data directory, artefacts built")
    p.add_argument("--split", default="test", choices=["train", "test"])
    p.add_argument("--limit", type=int, default=None, help="compare only the first N tasks of the split")
    p.add_argument("--report", default=None, help="JSON report file (default: print only)")
    p.add_argument("--extra_path", action="append", default=[],
                   help="a folder with packages the release needs and this project does not install "
                        "(repeatable; default: $PWAB_PARITY_EXTRA if set)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"first_request configurations, comma-separated, of: {', '.join(VARIANTS)}")
    p.add_argument("--agent_model", default="gpt-4o-mini", help="model name both runs send for the agent")
    p.add_argument("--user_model", default="gpt-4o", help="model name for the LLM user (must differ from the agent's)")
    p.add_argument("--protocol_file", default=None, help="passed to this project's run.py --protocol_file")
    p.add_argument("--interec_memory_file", default=None,
                   help="InteRecAgent memory both runs start from (default: made with the project's initialiser)")
    p.add_argument("--puma_function_file", default=None,
                   help="function file for taskspe memory (default: the heuristic's choice for every task)")
    p.add_argument("--work_dir", default=None, help="keep the mirror, logs and run outputs here (default: temp, removed)")
    p.add_argument("--timeout_s", type=float, default=3600, help="limit for each run of the release or the project")
    p.add_argument("--puma_model", default=None,
                   help="puma check: the stand-in model folder both sides load (default: a tiny Llama made from the data)")
    p.add_argument("--puma_new_tokens", type=int, default=48, help="puma check: new tokens of the greedy parameter outputs")
    p.add_argument("--release_libs", default=os.environ.get("PWAB_RELEASE_LIBS") or None,
                   help="puma check (required): the folder of the release-era libraries the release's PUMA code runs "
                        "on, made by `bash scripts/tools/install_release_libs.sh DIR` (default: $PWAB_RELEASE_LIBS)")
    p.add_argument("--puma_steps", default="1,2,3,4,5,6,eval,sft_train,merge,dpo_train,agent",
                   help="puma check: which steps to compare (step 1 always runs, or is reused from --work_dir)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from devtools.parity_session import DEFAULT_CHECKS, ParityConfig, run_session
    from devtools.release_mirror import ParityError

    extra = args.extra_path or [p for p in os.environ.get("PWAB_PARITY_EXTRA", "").split(os.pathsep) if p]

    def absolute(path: str | None) -> str | None:  # both runs work in folders of their own
        return str(Path(path).resolve()) if path else None

    config = ParityConfig(
        release_dir=Path(args.release_dir).resolve(), data_dir=Path(args.data_dir).resolve(), split=args.split,
        limit=args.limit, checks=tuple(args.checks or DEFAULT_CHECKS), extra_paths=[absolute(p) for p in extra],
        variants=tuple(v for v in args.variants.split(",") if v),
        agent_model=args.agent_model, user_model=args.user_model, protocol_file=absolute(args.protocol_file),
        interec_memory_file=absolute(args.interec_memory_file), puma_function_file=absolute(args.puma_function_file),
        work_dir=Path(args.work_dir).resolve() if args.work_dir else None, timeout_s=args.timeout_s,
        puma_model=absolute(args.puma_model), puma_new_tokens=args.puma_new_tokens,
        release_libs=absolute(args.release_libs), puma_steps=tuple(s for s in args.puma_steps.split(",") if s))
    try:
        config.validate()
        with tempfile.TemporaryDirectory(prefix="release_parity_") as scratch:
            report = run_session(config, Path(scratch), REPO_ROOT, log=print)
    except ParityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"report: {args.report}")
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
