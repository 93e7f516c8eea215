"""The construction commands, each a function of its own command line with its own settings:
`python -m PersonalWAB.construct fetch|build|consistency|stats ...`. A bad setting or input
is one line on stderr and exit status 2."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.construct.config import BuildConfig, names
from PersonalWAB.data import amazon_raw
from PersonalWAB.data.schema import BEHAVIOUR_SPLITS
from PersonalWAB.errors import DataError
from PersonalWAB.outputs import FILE, FOLDER, parse_command, write_output
from PersonalWAB.settings import setting

CATEGORIES_HELP = ("Amazon Reviews 2023 categories, space- or comma-separated; another set makes a benchmark of "
                   "other products")
CATEGORIES_DEFAULT = "the paper's five: " + ", ".join(amazon_raw.PAPER_CATEGORIES)


def is_fetched(raw: Path) -> bool:
    """Whether a folder holds raw files this command fetched (its manifest), to complete."""
    from PersonalWAB.construct.fetch import FETCH_MANIFEST

    return (raw / FETCH_MANIFEST).exists()


def is_build(out: Path) -> bool:
    """Whether the build may write in OUT: it writes only OUT/work, OUT/data and OUT/cache (the rest
    of OUT, e.g. the raw files, is left as it is), and each of these is absent or its own (the work
    folder's state, the data's construction manifest, the answers cache)."""
    from PersonalWAB.paths import CONSTRUCTION_MANIFEST

    made = {"work": "state.json", "data": CONSTRUCTION_MANIFEST, "cache": "llm"}
    return all(not (out / folder).exists() or (out / folder / mark).exists() for folder, mark in made.items())


@dataclass
class FetchSettings:
    """Download Amazon Reviews 2023 raw files of some categories (needs internet)."""

    out: str = setting(str, "raw folder to fill (raw/review_categories, raw/meta_categories): the --raw_dir of "
                             "`construct build`", required=True, metavar="DIR", aliases=("raw_dir",))
    categories: tuple[str, ...] = setting(amazon_raw.PAPER_CATEGORIES, CATEGORIES_HELP, nargs="+",
                                          metavar="CATEGORY", default_text=CATEGORIES_DEFAULT)
    base_url: str = setting(amazon_raw.HF_BASE_URL, "where the raw files are served; change it to use a mirror")
    max_lines: int | None = setting(None, "keep only each file's first lines: a small sample to try the pipeline "
                                          "on", default_text="whole files")
    reviews_only: bool = setting(False, "fetch only the review files")
    meta_only: bool = setting(False, "fetch only the product metadata files")
    force: bool = setting(False, "fetch again even when a whole copy is present")


@dataclass
class BuildRun:
    """How `construct build` runs: which steps, and whether it spends anything."""

    steps: str | None = setting(None, "comma-separated steps to run (select, join, split, profiles, instructions, "
                                      "write, recommender, index)", default_text="every step not up to date")
    force: bool = setting(False, "run the steps again even when up to date")
    dry_run: bool = setting(False, "run only the free steps, then print the model calls still to make and their "
                                   "estimated cost")


@dataclass
class ConsistencySettings:
    """Profile -> behaviour matching and profile -> product ranking with an LLM judge."""

    data_dir: str = setting(str, "benchmark data folder whose profiles to judge", required=True, metavar="DIR")
    model: str = setting("gpt-4o-mini", "the judge: any litellm model string")
    api_base: str | None = setting(None, "OpenAI-compatible server for --model (vLLM, Ollama, ...)", metavar="URL",
                                   default_text="the provider's own endpoint")
    temperature: float = setting(0.0, "the judge's sampling temperature")
    users: int = setting(200, "users evaluated; 0 evaluates all (costlier, tighter numbers)")
    options: int = setting(4, "histories the judge chooses the user's from (2-26; more is harder)")
    behaviours: int = setting(10, "behaviours shown per history")
    match_splits: tuple[str, ...] = setting(BEHAVIOUR_SPLITS, "splits the shown behaviours come from, space- or "
                                            "comma-separated", nargs="+", metavar="SPLIT")
    positives: int = setting(1, "bought target products among the products to rank")
    negatives: int = setting(9, "never-bought products among the products to rank")
    seed: int = setting(0, "random seed of the users, options and products drawn")
    max_concurrency: int = setting(8, "judge calls in flight; lower it on rate limits")
    max_retries: int = setting(5, "retries of a call on rate limits, timeouts and server errors")
    cache_dir: str | None = setting(None, "judge-call cache, so a rerun pays nothing twice", metavar="DIR",
                                    default_text="DATA_DIR's cache/llm")
    out: str | None = setting(None, "write the report as JSON to this file", metavar="FILE",
                              default_text="printed only")
    dry_run: bool = setting(False, "print the judge calls and their estimated cost only")


@dataclass
class StatsSettings:
    """Table 2-style statistics and a figure for one or more data directories."""

    data_dir: list[str] = setting(list, "a data folder; repeat the flag to compare folders", nargs=1, required=True,
                                  metavar="DIR")
    label: list[str] | None = setting(None, "a name per --data_dir, in order (repeat the flag)", nargs=1,
                                      metavar="NAME", default_text="each folder's name")
    out: str | None = setting(None, "write the statistics as JSON to this file", metavar="FILE",
                              default_text="printed only")
    plot: str | None = setting(None, "write the figure (PNG) to this file", metavar="FILE")
    published: bool = setting(True, "show the paper's published column beside the folders'",
                              aliases=("no_published",))


def fetch(argv: list[str] | None = None) -> int:
    from PersonalWAB.construct.fetch import fetch_categories

    args = parse_command([FetchSettings], argv, {"out": FOLDER}, own=lambda _: is_fetched,
                         description=FetchSettings.__doc__)[0]
    fetch_categories(list(names(args.categories)), args.out, base_url=args.base_url, max_lines=args.max_lines,
                     reviews=not args.meta_only, meta=not args.reviews_only, force=args.force)
    return 0


def build(argv: list[str] | None = None) -> int:
    from PersonalWAB.construct.pipeline import build as run_build

    config, run = parse_command([BuildConfig, BuildRun], argv, {"out": FOLDER}, own=lambda _: is_build,
                                description="Raw files -> a benchmark directory in the official layout (OUT/data), "
                                "resumable; --dry_run prints the model calls still to make and their estimated "
                                "cost. The manifest records these settings.")
    steps = tuple(s for s in run.steps.split(",") if s) if run.steps else None
    result = run_build(config, steps=steps, force=run.force, dry_run=run.dry_run)
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


def consistency(argv: list[str] | None = None) -> int:
    from PersonalWAB.construct.consistency import (
        ConsistencyConfig,
        estimate_consistency,
        evaluate_consistency,
        format_report,
    )
    from PersonalWAB.construct.llm_cache import LLMSettings

    args = parse_command([ConsistencySettings], argv, {"out": FILE}, description=ConsistencySettings.__doc__)[0]
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
        write_output(Path(args.out), json.dumps(report, indent=2))
        print(f"report: {args.out}")
    return 0


def stats(argv: list[str] | None = None) -> int:
    from PersonalWAB.construct.stats import data_statistics, format_summary, markdown_table, plot_statistics
    from PersonalWAB.data.loader import load_benchmark_data

    args = parse_command([StatsSettings], argv, {"out": FILE, "plot": FILE}, description=StatsSettings.__doc__)[0]
    labels = args.label or [Path(d).name for d in args.data_dir]
    if len(labels) != len(args.data_dir):
        raise DataError(f"--label: give one label per --data_dir ({len(args.data_dir)}), got {len(labels)}")
    reports = [data_statistics(load_benchmark_data(d)) for d in args.data_dir]
    for report in reports:
        print(format_summary(report))
    print(markdown_table(reports, labels, published=args.published))
    if args.out:
        write_output(Path(args.out), json.dumps(dict(zip(labels, reports)), indent=2))
    if args.plot:
        write_output(Path(args.plot), plot_statistics(reports, labels))
        print(f"figure: {args.plot}")
    return 0
