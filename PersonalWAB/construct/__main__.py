"""`python -m PersonalWAB.construct {fetch,build,consistency,stats} ...`

  fetch        download Amazon Reviews 2023 raw files of some categories (needs internet)
  build        raw files -> a benchmark directory in the official layout (OUT/data), resumable;
               --dry_run prints the model calls still to make and their estimated cost
  consistency  profile -> behaviour matching and profile -> product ranking with an LLM judge
  stats        Table 2-style statistics and a figure for one or more data directories

See docs/construct.md for the paper's setting and for building a new category.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from PersonalWAB.construct.config import add_arguments as add_build_arguments
from PersonalWAB.construct.config import names
from PersonalWAB.errors import DataError
from PersonalWAB.llm import LLMError
from PersonalWAB.cli import check_command_outputs

# Each command's outputs: a folder (True) or a file (False); checked before any work.
OUTPUTS = {"fetch": {"raw_dir": True}, "build": {"out": True}, "consistency": {"out": False},
           "stats": {"out": False, "plot": False}}


def _fetch(args: argparse.Namespace) -> int:
    from PersonalWAB.construct.fetch import fetch_categories

    fetch_categories(list(names(args.categories)), args.raw_dir, base_url=args.base_url, max_lines=args.max_lines,
                     reviews=not args.meta_only, meta=not args.reviews_only, force=args.force)
    return 0


def _build(args: argparse.Namespace) -> int:
    from PersonalWAB.construct.config import config_from_args
    from PersonalWAB.construct.pipeline import build

    config = config_from_args(args)
    steps = tuple(s for s in args.steps.split(",") if s) if args.steps else None
    result = build(config, steps=steps, force=args.force, dry_run=args.dry_run)
    if result.dry_run is not None:
        print(result.dry_run.table(config.model))
        print(f"free steps run now: {', '.join(result.ran) or 'none (up to date)'}; their outputs are kept")
        return 0
    print(f"steps run: {', '.join(result.ran) or 'none'}; up to date: {', '.join(result.skipped) or 'none'}")
    if result.manifest is not None:
        m, c = result.manifest, result.manifest["counts"]
        print(f"{config.data_dir}: {m['source']}; {c['users']} users, {c['behaviours']} behaviours, "
              f"{c['products']} products, {c['train_tasks']} train / {c['test_tasks']} test instructions")
        print(f"model calls this run: {m['llm_calls']} made, {m['llm_calls_cached']} from the cache "
              f"(cost {m['llm_cost_usd']:.4f} USD{'' if m['llm_price_known'] else ', price unknown for this model'})")
    return 0


def _consistency(args: argparse.Namespace) -> int:
    from PersonalWAB.construct.consistency import (
        ConsistencyConfig,
        estimate_consistency,
        evaluate_consistency,
        format_report,
    )
    from PersonalWAB.construct.llm_cache import LLMSettings

    judge = LLMSettings(model=args.model, api_base=args.api_base, temperature=args.temperature,
                        max_retries=args.max_retries, max_concurrency=args.max_concurrency)
    config = ConsistencyConfig(
        data_dir=Path(args.data_dir), judge=judge, users=args.users, options=args.options, behaviours=args.behaviours,
        match_splits=names(args.match_splits), positives=args.positives, negatives=args.negatives, seed=args.seed,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None)
    if args.dry_run:
        for name, e in estimate_consistency(config).items():
            cost = "unknown" if e.cost_usd is None else f"{e.cost_usd:.4f} USD"
            print(f"{name}: {e.requests} judge calls, {e.cached} cached, {e.prompt_tokens} prompt tokens to send, "
                  f"estimated cost {cost}")
        return 0
    report = evaluate_consistency(config)
    print(format_report(report))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"report: {args.out}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from PersonalWAB.construct.stats import data_statistics, format_summary, markdown_table, plot_statistics
    from PersonalWAB.data.loader import load_benchmark_data

    labels = args.label or [Path(d).name for d in args.data_dir]
    if len(labels) != len(args.data_dir):
        raise DataError(f"--label: give one label per --data_dir ({len(args.data_dir)}), got {len(labels)}")
    reports = [data_statistics(load_benchmark_data(d)) for d in args.data_dir]
    for report in reports:
        print(format_summary(report))
    table = markdown_table(reports, labels, published=not args.no_published)
    print(table)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(dict(zip(labels, reports)), indent=2), encoding="utf-8")
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_statistics(reports, labels, args.plot)
        print(f"figure: {args.plot}")
    return 0


def _parser() -> argparse.ArgumentParser:
    from PersonalWAB.data.amazon_raw import HF_BASE_URL, PAPER_CATEGORIES

    parser = argparse.ArgumentParser(prog="python -m PersonalWAB.construct", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    fetch = commands.add_parser("fetch", help="download Amazon Reviews 2023 raw files")
    fetch.add_argument("--raw_dir", required=True)
    fetch.add_argument("--categories", nargs="+", default=list(PAPER_CATEGORIES))
    fetch.add_argument("--base_url", default=HF_BASE_URL)
    fetch.add_argument("--max_lines", type=int, default=None, help="keep only each file's first lines (a sample)")
    fetch.add_argument("--reviews_only", action="store_true")
    fetch.add_argument("--meta_only", action="store_true")
    fetch.add_argument("--force", action="store_true", help="fetch again even when a whole copy is present")
    fetch.set_defaults(func=_fetch)

    build = commands.add_parser("build", help="build a benchmark directory from raw files")
    add_build_arguments(build)
    build.add_argument("--steps", default=None,
                       help="comma-separated steps to run (select,join,split,profiles,instructions,write,"
                            "recommender,index); default: all that are not up to date")
    build.add_argument("--force", action="store_true", help="re-run the steps even when up to date")
    build.add_argument("--dry_run", action="store_true",
                       help="run the free steps, then print the model calls still to make and their estimated cost")
    build.set_defaults(func=_build)

    consistency = commands.add_parser("consistency", help="profile-consistency evaluation with an LLM judge")
    consistency.add_argument("--data_dir", required=True)
    consistency.add_argument("--model", default="gpt-4o-mini")
    consistency.add_argument("--api_base", default=None)
    consistency.add_argument("--temperature", type=float, default=0.0)
    consistency.add_argument("--users", type=int, default=200, help="users evaluated (0: all)")
    consistency.add_argument("--options", type=int, default=4, help="histories the judge chooses from")
    consistency.add_argument("--behaviours", type=int, default=10, help="behaviours shown per history")
    consistency.add_argument("--match_splits", nargs="+", default=["history", "train", "test"],
                             help="splits the shown behaviours come from")
    consistency.add_argument("--positives", type=int, default=1, help="bought target products to rank")
    consistency.add_argument("--negatives", type=int, default=9, help="never-bought products among them")
    consistency.add_argument("--seed", type=int, default=0)
    consistency.add_argument("--max_concurrency", type=int, default=8)
    consistency.add_argument("--max_retries", type=int, default=5)
    consistency.add_argument("--cache_dir", default=None, help="judge-call cache (default: DATA_DIR's cache/llm)")
    consistency.add_argument("--out", default=None, help="write the report as JSON")
    consistency.add_argument("--dry_run", action="store_true", help="print the calls and estimated cost only")
    consistency.set_defaults(func=_consistency)

    stats = commands.add_parser("stats", help="data statistics and a figure")
    stats.add_argument("--data_dir", action="append", required=True, help="repeat to compare directories")
    stats.add_argument("--label", action="append", default=None, help="a name per --data_dir")
    stats.add_argument("--out", default=None, help="write the statistics as JSON")
    stats.add_argument("--plot", default=None, help="write the figure (PNG)")
    stats.add_argument("--no_published", action="store_true", help="leave out the paper's published column")
    stats.set_defaults(func=_stats)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        check_command_outputs(args, OUTPUTS[args.command])
        return args.func(args)
    except (DataError, LLMError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from PersonalWAB.cli import run_command

    sys.exit(run_command(main))
