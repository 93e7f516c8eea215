"""The build: eight steps from raw Amazon Reviews 2023 files to a benchmark directory.

    select -> join -> split -> profiles -> instructions -> write -> recommender, index

Each step writes its output to `OUT/work/<step>.json` and records in
`OUT/work/state.json` a fingerprint of what it was made from: its settings, the
pipeline version and the exact bytes of its inputs' outputs. A step whose fingerprint
still matches (and whose files are still there) is skipped, so a build resumes where it
stopped and a changed setting re-runs only the steps it reaches. Model calls are cached
by request (`llm_cache`), so even a re-run step pays only for prompts it never sent.

`write` puts the official layout in `OUT/data` together with
`construction_manifest.json` (sources and their checksums, settings, model, calls,
tokens and cost, counts, date); `recommender` trains SASRec and `index` builds the
search index through the project's own builders.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PersonalWAB.construct import histories as history_steps
from PersonalWAB.construct import instructions as instruction_step
from PersonalWAB.construct import profiles as profile_step
from PersonalWAB.construct import prompts
from PersonalWAB.construct.config import BuildConfig
from PersonalWAB.construct.llm_cache import CachedLLM, CallStats, Estimate
from PersonalWAB.construct.users import select_users
from PersonalWAB.data import amazon_raw
from PersonalWAB.data.layout import json_bytes, official_files, write_atomic, write_files
from PersonalWAB.data.loader import load_benchmark_data, read_json
from PersonalWAB.data.schema import PROFILE_FIELDS, TASK_TYPES
from PersonalWAB.errors import DataError
from PersonalWAB.paths import CONSTRUCTION_MANIFEST, SYNTHETIC_MANIFEST, ArtifactPaths, remove_derived_artifacts
from PersonalWAB.protocol import load_protocol

PIPELINE_VERSION = "1.0"
Log = Callable[[str], None]
PROMPTS_SHA = hashlib.sha256("\n".join([
    prompts.PROFILE_SYSTEM, prompts.INSTRUCTION_SYSTEM, *prompts.TASK_TEXT.values(), prompts.PROFILE_RETRY,
    prompts.INSTRUCTION_RETRY, prompts.INSTRUCTION_DUPLICATE]).encode("utf-8")).hexdigest()[:16]


@dataclass
class Context:
    """What steps share during one invocation."""

    config: BuildConfig
    log: Log
    state: dict[str, Any]
    llm_stats: dict[str, CallStats] = field(default_factory=dict)
    _outputs: dict[str, Any] = field(default_factory=dict)

    def output(self, step: str) -> Any:
        if step not in self._outputs:
            self._outputs[step] = read_json(self.config.work_dir / f"{step}.json")
        return self._outputs[step]

    def remember(self, step: str, output: Any) -> None:
        self._outputs[step] = output

    def llm(self, step: str) -> CachedLLM:
        """A cache-backed model for one step, its calls counted under the step's name."""
        cached = CachedLLM(self.config.llm(), self.config.llm_cache_dir)
        self.llm_stats[step] = cached.stats
        return cached


@dataclass(frozen=True)
class Step:
    """A step: the earlier steps it reads, the settings its output depends on, how it runs
    (returning its JSON output) and, for steps that write elsewhere, a check that those
    files are still in place."""

    name: str
    inputs: tuple[str, ...]
    params: Callable[[BuildConfig], dict[str, Any]]
    run: Callable[[Context], Any]
    outputs_ok: Callable[[Context], bool] = lambda ctx: True


# ---------------------------------------------------------------- step bodies


def _raw_identity(config: BuildConfig, relative: Callable[[str], str]) -> list[list[Any]]:
    """Path, size and modification time of raw files: cheap change detection (the full
    SHA-256 is taken while the step reads them and goes into the manifest)."""
    out = []
    for category in config.categories:
        path = amazon_raw.locate(config.raw_dir, relative(category))
        stat = path.stat()
        out.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
    return out


def _select(ctx: Context) -> Any:
    return select_users(ctx.config, ctx.log)


def _join(ctx: Context) -> Any:
    return history_steps.join_products(ctx.config, ctx.output("select"), ctx.log)


def _split(ctx: Context) -> Any:
    return history_steps.split_users(ctx.config, ctx.output("select"), ctx.output("join"), ctx.log)


def _profiles(ctx: Context) -> Any:
    return profile_step.write_profiles(ctx.config, ctx.llm("profiles"), ctx.output("split")["histories"], ctx.log)


def _instructions(ctx: Context) -> Any:
    split = ctx.output("split")
    return instruction_step.write_instructions(ctx.config, ctx.llm("instructions"), split["histories"],
                                               ctx.output("profiles")["profiles"], split["plan"], ctx.log)


def _layout(ctx: Context) -> dict[str, bytes]:
    profiles = ctx.output("profiles")["profiles"]
    histories = {u: h for u, h in ctx.output("split")["histories"].items() if u in profiles}
    products = {b["product_info"]["parent_asin"]: b["product_info"] for h in histories.values() for b in h}
    return official_files(sorted(products.items()), list(histories.items()), ctx.output("instructions")["tasks"],
                          profiles)


def _write(ctx: Context) -> Any:
    data_dir = ctx.config.data_dir
    files = _layout(ctx)
    data_dir.mkdir(parents=True, exist_ok=True)
    # the manifest goes first: a folder with data but no manifest would be refused as foreign
    checksums = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    write_atomic(data_dir / CONSTRUCTION_MANIFEST, json_bytes(manifest(ctx, checksums)))
    changed = write_files(data_dir, files)
    if changed:
        remove_derived_artifacts(data_dir)
        ArtifactPaths.for_data_dir(data_dir).item_map.unlink(missing_ok=True)
    ctx.log(f"write: {data_dir} ({'updated ' + ', '.join(changed) if changed else 'unchanged'})")
    return {"files": checksums}


def _written_files_ok(ctx: Context) -> bool:
    recorded = ctx.state.get("write", {}).get("files", {})
    return bool(recorded) and all(
        (ctx.config.data_dir / name).is_file()
        and hashlib.sha256((ctx.config.data_dir / name).read_bytes()).hexdigest() == sha
        for name, sha in recorded.items())


def _recommender(ctx: Context) -> Any:
    from PersonalWAB.engines.recommender.train import SASRecTrainConfig, train_sasrec

    config = ctx.config
    data = load_benchmark_data(config.data_dir, reload=True)
    artifacts = data.artifacts
    for stale in (artifacts.checkpoint, artifacts.item_map):  # a kept item map would pin old ids
        stale.unlink(missing_ok=True)
    train = SASRecTrainConfig(epochs=config.sasrec_epochs, patience=config.sasrec_patience, seed=config.sasrec_seed,
                              num_threads=config.sasrec_threads)
    extra = list(ctx.output("select")["extra_sequences"].values())
    ctx.log(f"recommender: training SASRec on {len(data.histories)} benchmark + {len(extra)} extra users")
    report = train_sasrec(data, artifacts.checkpoint, artifacts.item_map, train, extra_sequences=extra)
    ctx.log(f"recommender: held-out HR@10 {report['sasrec']['hr@10']:.4f} NDCG@10 {report['sasrec']['ndcg@10']:.4f} "
            f"(popularity {report['popularity']['hr@10']:.4f}), {report['train_seconds']:.0f} s")
    return {key: value for key, value in report.items() if key not in ("train_seconds", "checkpoint", "item_map")}


def _recommender_ok(ctx: Context) -> bool:
    artifacts = ArtifactPaths.for_data_dir(ctx.config.data_dir)
    return artifacts.checkpoint.is_file() and artifacts.item_map.is_file()


def _index(ctx: Context) -> Any:
    from PersonalWAB.build import build_artifacts

    data = load_benchmark_data(ctx.config.data_dir, reload=True)
    build_artifacts(data, ctx.config.search_backends, recommender=False, force=True, log=ctx.log,
                    protocol=load_protocol(ctx.config.protocol_file))
    return {"backends": list(ctx.config.search_backends), "documents": len(data.products)}


def _index_params(config: BuildConfig) -> dict[str, Any]:
    """The backends and the product texts the index holds: new texts re-run the step."""
    protocol = load_protocol(config.protocol_file)
    return {"backends": list(config.search_backends), "protocol": protocol.name,
            "contents": protocol.contents_fingerprint}


def _index_ok(ctx: Context) -> bool:
    artifacts = ArtifactPaths.for_data_dir(ctx.config.data_dir)
    return all(artifacts.index_root(b).is_dir() and any(artifacts.index_root(b).iterdir())
               for b in ctx.config.search_backends)


def _llm_params(config: BuildConfig, max_tokens: int) -> dict[str, Any]:
    return {"model": config.model, "temperature": config.temperature, "max_tokens": max_tokens,
            "prompts": PROMPTS_SHA}


STEPS: tuple[Step, ...] = (
    Step("select", (), lambda c: {
        "categories": list(c.categories), "num_users": c.num_users, "min_interactions": c.min_interactions,
        "max_interactions": c.max_interactions, "min_categories": c.min_categories, "seed": c.seed,
        "sasrec_extra_users": c.sasrec_extra_users, "files": _raw_identity(c, amazon_raw.review_file)}, _select),
    Step("join", ("select",), lambda c: {"files": _raw_identity(c, amazon_raw.meta_file)}, _join),
    Step("split", ("select", "join"), lambda c: {
        "num_users": c.num_users, "min_interactions": c.min_interactions, "max_interactions": c.max_interactions,
        "seed": c.seed, "train_tasks_per_target": c.train_tasks_per_target,
        "test_tasks_per_target": c.test_tasks_per_target}, _split),
    Step("profiles", ("split",), lambda c: {
        **_llm_params(c, c.profile_max_tokens), "profile_splits": list(c.profile_splits),
        "profile_max_behaviours": c.profile_max_behaviours}, _profiles),
    Step("instructions", ("split", "profiles"), lambda c: {
        **_llm_params(c, c.instruction_max_tokens), "recent_behaviours": c.recent_behaviours},
        _instructions),
    Step("write", ("split", "profiles", "instructions"), lambda c: {}, _write, _written_files_ok),
    Step("recommender", ("write", "select"), lambda c: {
        "epochs": c.sasrec_epochs, "patience": c.sasrec_patience, "seed": c.sasrec_seed,
        "threads": c.sasrec_threads}, _recommender, _recommender_ok),
    Step("index", ("write",), _index_params, _index, _index_ok),
)
STEP_NAMES = tuple(step.name for step in STEPS)
FREE_STEPS_FOR_ESTIMATE = ("select", "join", "split")


# ---------------------------------------------------------------- state


def _state_path(config: BuildConfig) -> Path:
    return config.work_dir / "state.json"


def _load_state(config: BuildConfig) -> dict[str, Any]:
    path = _state_path(config)
    if not path.exists():
        return {}
    state = read_json(path)
    if not isinstance(state, dict) or state.get("pipeline_version") != PIPELINE_VERSION:
        return {}  # another pipeline version: everything is re-run (model calls still come from the cache)
    return state.get("steps", {})


def _save_state(config: BuildConfig, steps: dict[str, Any]) -> None:
    write_atomic(_state_path(config), json_bytes({"pipeline_version": PIPELINE_VERSION, "steps": steps}))


def fingerprint(step: Step, config: BuildConfig, state: dict[str, Any]) -> str | None:
    """What the step's output depends on; None while an input has no output yet."""
    inputs = {}
    for name in step.inputs:
        if name not in state:
            return None
        inputs[name] = state[name]["output_sha256"]
    payload = {"version": PIPELINE_VERSION, "step": step.name, "params": step.params(config), "inputs": inputs}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _output_ok(ctx: Context, step: Step) -> bool:
    path = ctx.config.work_dir / f"{step.name}.json"
    record = ctx.state.get(step.name)
    if record is None or not path.is_file():
        return False
    return hashlib.sha256(path.read_bytes()).hexdigest() == record["output_sha256"] and step.outputs_ok(ctx)


def up_to_date(ctx: Context, step: Step) -> bool:
    record = ctx.state.get(step.name)
    current = fingerprint(step, ctx.config, ctx.state)
    return record is not None and current is not None and record["fingerprint"] == current and _output_ok(ctx, step)


def _run_step(ctx: Context, step: Step) -> None:
    started = time.perf_counter()
    current = fingerprint(step, ctx.config, ctx.state)
    output = step.run(ctx)
    data = json_bytes(output)
    write_atomic(ctx.config.work_dir / f"{step.name}.json", data)
    ctx.remember(step.name, output)
    record: dict[str, Any] = {"fingerprint": current, "output_sha256": hashlib.sha256(data).hexdigest(),
                              "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              "seconds": round(time.perf_counter() - started, 2)}
    if step.name in ctx.llm_stats:
        record["llm"] = ctx.llm_stats[step.name].as_dict()
    if step.name == "write":
        record["files"] = output["files"]
    ctx.state[step.name] = record
    _save_state(ctx.config, ctx.state)


# ---------------------------------------------------------------- manifest


def source_label(config: BuildConfig, raw_synthetic: dict[str, Any] | None, users: int) -> str:
    """How result files and summaries name data built by this pipeline."""
    if raw_synthetic is not None:
        origin = f"synthetic raw scale={raw_synthetic.get('scale')} seed={raw_synthetic.get('seed')}"
    else:
        origin = "amazon-reviews-2023 " + "+".join(config.categories)
    return f"constructed({origin}; users={users} seed={config.seed})"


def _raw_synthetic(config: BuildConfig) -> dict[str, Any] | None:
    path = config.raw_dir / SYNTHETIC_MANIFEST
    return read_json(path) if path.exists() else None


def _counts(ctx: Context) -> dict[str, Any]:
    tasks = ctx.output("instructions")["tasks"]
    profiles = ctx.output("profiles")
    split = ctx.output("split")
    select = ctx.output("select")
    kept = {u: h for u, h in split["histories"].items() if u in profiles["profiles"]}
    counts = {
        "users_seen": select["users_seen"], "eligible_users": select["eligible_users"],
        "users": len(kept), "users_dropped_at_profiles": len(profiles["dropped"]),
        "users_with_train_tasks": len({t["user_id"] for t in tasks["train"]}),
        "behaviours": sum(len(h) for h in kept.values()),
        "products": len({b["product_info"]["parent_asin"] for h in kept.values() for b in h}),
        "missing_products": ctx.output("join")["missing_products"],
        "train_tasks": len(tasks["train"]), "test_tasks": len(tasks["test"]),
        "train_types": {t: sum(x["type"] == t for x in tasks["train"]) for t in TASK_TYPES},
        "test_types": {t: sum(x["type"] == t for x in tasks["test"]) for t in TASK_TYPES},
        "instructions_dropped": ctx.output("instructions")["dropped"],
        "instructions_repeated": ctx.output("instructions")["repeated"],
        "repair_requests": {"profiles": profiles["repair_requests"],
                            "instructions": ctx.output("instructions")["repair_requests"]},
        "sasrec_extra_users": len(select["extra_sequences"]),
    }
    return counts


def manifest(ctx: Context, files: dict[str, str]) -> dict[str, Any]:
    """The construction manifest as of now (needs the steps up to `instructions`);
    `files` are the data files' SHA-256."""
    config = ctx.config
    raw_synthetic = _raw_synthetic(config)
    counts = _counts(ctx)
    llm_steps = {name: ctx.state[name]["llm"] for name in STEP_NAMES if "llm" in ctx.state.get(name, {})}
    for name, stats in ctx.llm_stats.items():  # a step finishing right now
        llm_steps[name] = stats.as_dict()
    now = CallStats()
    for stats in ctx.llm_stats.values():
        now.merge(stats)
    raw_root = config.raw_dir.resolve()
    sources = []
    for entry in [*ctx.output("select")["sources"], *ctx.output("join")["sources"]]:
        path = Path(entry["path"]).resolve()
        sources.append({**entry, "path": str(path.relative_to(raw_root)) if raw_root in path.parents else str(path)})
    return {
        "constructed": True,
        "pipeline_version": PIPELINE_VERSION,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "source": source_label(config, raw_synthetic, counts["users"]),
        "raw_dir": str(config.raw_dir),
        "raw_synthetic": raw_synthetic,
        "sources": sources,
        "files": files,
        "parameters": config.describe(),
        "model": {**config.llm().describe(), "prompts_sha": PROMPTS_SHA},
        "llm_calls": now.calls,
        "llm_calls_cached": now.cached,
        "llm_cost_usd": round(now.cost_usd, 6),
        "llm_steps": llm_steps,
        "llm_total_cost_usd": round(sum(s["total_cost_usd"] for s in llm_steps.values()), 6),
        "llm_price_known": all(s["price_known"] for s in llm_steps.values()),
        "profile_fields": list(PROFILE_FIELDS),
        "counts": counts,
        "steps": {name: {k: ctx.state[name][k] for k in ("finished", "seconds")}
                  for name in STEP_NAMES if name in ctx.state},
        "note": ("built from synthetic data: numbers measured on it are not comparable to the paper"
                 if raw_synthetic else "built from Amazon Reviews 2023 with this project's pipeline and prompts: "
                 "not the published PersonalWAB release; numbers are not comparable to the paper's"),
    }


# ---------------------------------------------------------------- dry run


@dataclass
class DryRun:
    """Forecast of the model steps: per step, the calls still to make and their cost."""

    estimates: dict[str, Estimate]
    notes: list[str]

    def table(self, model: str) -> str:
        lines = [f"dry run for model {model!r} (no model was called)",
                 f"{'step':<13}{'requests':>10}{'cached':>9}{'to call':>9}{'prompt tok':>12}{'answer tok':>12}"
                 f"{'est. USD':>11}{'max USD':>11}"]
        for name, e in self.estimates.items():
            cost = "unknown" if e.cost_usd is None else f"{e.cost_usd:.4f}"
            ceiling = "unknown" if e.cost_usd_max is None else f"{e.cost_usd_max:.4f}"
            lines.append(f"{name:<13}{e.requests:>10}{e.cached:>9}{e.calls:>9}{e.prompt_tokens:>12}"
                         f"{e.completion_tokens:>12}{cost:>11}{ceiling:>11}")
        known = [e.cost_usd for e in self.estimates.values() if e.cost_usd is not None]
        if len(known) == len(self.estimates):
            lines.append(f"estimated total: {sum(known):.4f} USD (repairs of unusable answers not included; "
                         "max USD: every answer as long as max_tokens)")
        lines += [f"note: {n}" for n in self.notes + [n for e in self.estimates.values() for n in e.notes]]
        return "\n".join(lines)


def _placeholder_profile() -> dict[str, str]:
    """Stands in for profiles not written yet, about as long as a real one."""
    return {name: "Medium" if name in prompts.LEVEL_FIELDS else f"{name.lower()} words of a typical profile"
            for name in PROFILE_FIELDS}


def _estimate(ctx: Context) -> DryRun:
    config = ctx.config
    split = ctx.output("split")
    notes = []
    profile_requests = list(profile_step.profile_requests(config, split["histories"]).values())
    estimates = {"profiles": ctx.llm("profiles").estimate(profile_requests, profile_step.EXPECTED_COMPLETION_TOKENS)}
    profiles_step = next(s for s in STEPS if s.name == "profiles")
    if up_to_date(ctx, profiles_step):
        profiles = ctx.output("profiles")["profiles"]
    else:
        placeholder = _placeholder_profile()
        profiles = {u: placeholder for u in split["histories"]}
        notes.append("instruction prompts measured with a placeholder profile (profiles are not written yet)")
    requests = instruction_step.instruction_requests(config, split["histories"], profiles, split["plan"])
    estimates["instructions"] = ctx.llm("instructions").estimate(requests, instruction_step.EXPECTED_COMPLETION_TOKENS)
    return DryRun(estimates, notes)


# ---------------------------------------------------------------- entry point


@dataclass
class BuildResult:
    ran: list[str]
    skipped: list[str]
    manifest: dict[str, Any] | None
    dry_run: DryRun | None = None


def build(config: BuildConfig, steps: tuple[str, ...] | None = None, force: bool = False, dry_run: bool = False,
          log: Log = print) -> BuildResult:
    """Run (or, with `dry_run`, cost) the build; steps already up to date are skipped
    unless `force`. `steps` limits the run to some steps, whose inputs must be up to date."""
    unknown = [s for s in steps or () if s not in STEP_NAMES]
    if unknown:
        raise DataError(f"--steps: unknown step(s) {', '.join(unknown)}; steps: {', '.join(STEP_NAMES)}")
    config.check()
    wanted = set(steps or STEP_NAMES)
    if dry_run:
        wanted &= set(FREE_STEPS_FOR_ESTIMATE)
    config.work_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(config, log, _load_state(config))
    ran, skipped = [], []
    for step in STEPS:
        if step.name not in wanted:
            continue
        if not force and up_to_date(ctx, step):
            skipped.append(step.name)
            continue
        stale = [name for name in step.inputs if not up_to_date(ctx, _step(name))]
        if stale:
            raise DataError(f"step {step.name!r} needs {', '.join(stale)} to be up to date first; run them "
                            f"(e.g. without --steps)")
        log(f"== {step.name}")
        _run_step(ctx, step)
        ran.append(step.name)
    if dry_run:
        if not up_to_date(ctx, _step("split")):
            raise DataError("--dry_run needs the free steps select, join and split; run them (not limited by --steps)")
        return BuildResult(ran, skipped, None, _estimate(ctx))
    result = None
    if up_to_date(ctx, _step("write")):
        result = manifest(ctx, ctx.state["write"]["files"])
        write_atomic(config.data_dir / CONSTRUCTION_MANIFEST, json_bytes(result))
    return BuildResult(ran, skipped, result)


def _step(name: str) -> Step:
    return next(step for step in STEPS if step.name == name)
