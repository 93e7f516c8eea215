"""The PUMA parity check shown able to fail: small differences injected into copies of this
project's PUMA code, each of which the check must report, naming the item.

Each `Injection` edits one line of one file in a copy of the source tree (its `old` text must
occur exactly once, so an injection that no longer matches the code is an error, never a
silent pass). Two forms:

- cheap (no release needed; CI runs it): the project side of the items (`devtools.parity.probe`)
  runs in the clean tree twice (the two runs must agree: a check whose own runs differ would
  "detect" anything) and in each injected copy; the harness's comparators must report every
  injection in the items it names;
- against the release (`scripts/tools/parity_selftest.py --release_dir ...`): each injected copy's
  own `release_parity.py ... puma` runs against the release, and its report must show a
  difference in every item the injection names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from devtools.parity.compare import Tally, first_difference

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Injection:
    """One small difference: `old` becomes `new` in `path`. Each name in `probe_items` (cheap
    form) and in `items` (against the release) is a prefix of item names, one of which at least
    must report it."""

    name: str
    path: str
    old: str
    new: str
    probe_items: dict[str, tuple[str, ...]]  # probe -> item prefixes
    items: tuple[str, ...]
    steps: str  # the harness's --puma_steps that compute `items`

    @property
    def probes(self) -> tuple[str, ...]:
        return tuple(self.probe_items)


GENERATE_PARAM = ("settings [generate_param]",)
INJECTIONS: tuple[Injection, ...] = (
    # --- code
    Injection("top_p", "PUMA/modeling.py", '"top_k": 50, "top_p": 1.0,', '"top_k": 50, "top_p": 0.9,',
              {"generation": ("step3 DPO candidates generate settings",), "settings": GENERATE_PARAM},
              ("step3 DPO candidates generate settings", *GENERATE_PARAM), "3,settings"),
    Injection("top_k", "PUMA/modeling.py", '"top_k": 50, "top_p": 1.0,', '"top_k": 40, "top_p": 1.0,',
              {"generation": ("step3 DPO candidates generate settings",), "settings": GENERATE_PARAM},
              ("step3 DPO candidates generate settings", *GENERATE_PARAM), "3,settings"),
    Injection("memory cut length", "PUMA/prompting.py",
              "room = max(0, max_tokens - tokenizer.num_special_tokens_to_add())",
              "room = max(0, max_tokens - 1 - tokenizer.num_special_tokens_to_add())",
              {"generation": ("step3 DPO candidates prompt ids",)},
              ("step1 param data", "step3 param (greedy) prompt ids"), "3"),
    Injection("recommend ASIN order", "PUMA/prompting.py",
              'return list(dict.fromkeys(part.strip() for part in text.split(",") if keep_empty or part.strip()))',
              'return sorted(dict.fromkeys(part.strip() for part in text.split(",") if keep_empty or part.strip()))',
              {"scores": ("step4 candidate scores",)}, ("step4 candidate scores",), "4"),
    Injection("empty review scored as the placeholder", "PUMA/candidate_scores.py",
              'texts = [actions[i].arguments["review"] if raw_review else actions[i].arguments["review"] or',
              'texts = [actions[i].arguments["review"] or',
              {"scores": ("step4 candidate scores",)}, ("step4 candidate scores",), "4"),
    Injection("epochs", "PUMA/sft.py", "num_train_epochs=config.num_train_epochs,\n",
              "num_train_epochs=config.num_train_epochs + 1,\n",
              {"sft": ("SFT training",), "settings": ("settings [sft]",)}, ("SFT training", "settings [sft]"),
              "sft_train,settings"),
    Injection("DPO beta", "PUMA/dpo.py", "dict(output_dir=config.output_dir, beta=config.beta,",
              "dict(output_dir=config.output_dir, beta=config.beta * 2,",
              {"dpo": ("DPO training",), "settings": ("settings [dpo]",)}, ("DPO training", "settings [dpo]"),
              "dpo_train,settings"),
    # --- values: a step's documented default, and the release recipe file
    Injection("learning-rate schedule", "PUMA/lora.py",
              'lr_scheduler_type: Scheduler = setting("linear",', 'lr_scheduler_type: Scheduler = setting("cosine",',
              {"sft": ("SFT training",), "settings": ("settings [sft]",)}, ("SFT training", "settings [sft]"),
              "sft_train,settings"),
    Injection("LoRA dropout default", "PUMA/lora.py", 'lora_dropout: float = setting(0.0, "dropout on the LoRA input")',
              'lora_dropout: float = setting(0.05, "dropout on the LoRA input")',
              {"settings": ("documented defaults [sft]", "documented defaults [dpo]")},
              ("documented defaults [sft]", "documented defaults [dpo]"), "settings"),
    Injection("num_return_sequences default", "PUMA/generate.py",
              'num_return_sequences: int = setting(10, "param mode:',
              'num_return_sequences: int = setting(5, "param mode:',
              {"settings": ("documented defaults [generate_param]",)}, ("documented defaults [generate_param]",),
              "settings"),
    Injection("max_new_tokens default", "PUMA/generate.py",
              'max_new_tokens: int = setting(256, "param mode:', 'max_new_tokens: int = setting(128, "param mode:',
              {"settings": ("documented defaults [generate_param]",)}, ("documented defaults [generate_param]",),
              "settings"),
    Injection("recipe LoRA rank", "PUMA/configs/release.yaml", "max_length: 1280, lora_r: 16,",
              "max_length: 1280, lora_r: 8,", {"settings": ("settings [sft]",), "sft": ("SFT training",)},
              ("settings [sft]", "SFT training"), "settings,sft_train"),
    Injection("recipe generation temperature", "PUMA/configs/release.yaml", "do_sample: true, temperature: 1.5,",
              "do_sample: true, temperature: 1.0,",
              {"settings": GENERATE_PARAM, "generation": ("step3 DPO candidates generate settings",)},
              (*GENERATE_PARAM, "step3 DPO candidates generate settings"), "settings,3"),
    Injection("recipe global batch", "PUMA/configs/release.yaml",
              "packing: false,\n        per_device_train_batch_size: 1, gradient_accumulation_steps: 0, "
              "global_batch_size: 64,", "packing: false,\n        per_device_train_batch_size: 1, "
              "gradient_accumulation_steps: 0, global_batch_size: 32,",
              {"settings": ("settings [sft]",)}, ("settings [sft]",), "settings"),
)


class SelfTestError(Exception):
    """The self-test itself cannot run (an injection no longer matches the code, a probe failed)."""


# --- copies of the tree -------------------------------------------------------------------------------------------
def source_files(root: Path = REPO_ROOT) -> list[str]:
    """The tree's files as git sees them: tracked, and untracked ones not ignored (no data, no .venv)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, text=True, check=True).stdout
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def tree_copy(out: Path, root: Path = REPO_ROOT) -> Path:
    """A copy of the source tree in `out` (replaced if there)."""
    if out.exists():
        shutil.rmtree(out)
    for name in source_files(root):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return out


def check_injection(injection: Injection, root: Path = REPO_ROOT) -> str:
    """The file's text; raises unless `old` occurs exactly once in it."""
    text = (root / injection.path).read_text(encoding="utf-8")
    count = text.count(injection.old)
    if count != 1:
        raise SelfTestError(f"injection {injection.name!r}: {injection.path} holds its text {count} times "
                            f"(expected once): {injection.old!r}; update devtools/parity_selftest.INJECTIONS")
    return text


def inject(injection: Injection, root: Path) -> None:
    text = check_injection(injection, root)
    (root / injection.path).write_text(text.replace(injection.old, injection.new), encoding="utf-8")


# --- the cheap form -----------------------------------------------------------------------------------------------
def prepare_inputs(out: Path, log: Callable[[str], None] = print) -> Path:
    """Tiny synthetic data with its engines, a stand-in model whose folder carries Llama-2-chat's
    generation defaults, parameter examples whose memory is longer than the 768-token cut, and
    step-4 candidates that hit (written once; every tree's probes read them)."""
    from devtools.parity.puma import with_chat_generation_defaults
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.data.synthetic import generate_synthetic
    from PUMA.tiny_model import make_tiny_model

    out.mkdir(parents=True, exist_ok=True)
    if (out / "ready").exists():
        return out
    log("self-test: tiny data, its engines and a stand-in model ...")
    generate_synthetic(out / "data", scale="tiny", seed=0)
    data = load_benchmark_data(out / "data")
    build_artifacts(data, ("bm25s",), recommender=True, log=lambda _: None)
    with_chat_generation_defaults(make_tiny_model(out / "data", out / "model"))
    tasks = data.split("train")
    titles = [t["target"]["product_info"]["title"] for t in tasks]
    memory = "\n".join(f"Title:{title}|Rating:5" for title in titles * 40)  # well past 768 tokens
    examples = [{"instruction": t["task"], "type": t["type"], "memory": memory, "product": None,
                 "prompt": t["task"], "label": ""} for t in tasks[:2]]
    (out / "param.json").write_text(json.dumps(examples), encoding="utf-8")
    (out / "functions.json").write_text(json.dumps({e["instruction"]: ["search_product_by_query"] for e in examples}),
                                        encoding="utf-8")
    (out / "candidates.json").write_text(json.dumps(hitting_candidates(data, tasks)), encoding="utf-8")
    (out / "ready").write_text("", encoding="utf-8")
    return out


def hitting_candidates(data: Any, tasks: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per train task, candidates that score above 0: the target's title as a query (and its first
    words); for recommend, the user's latest history ASINs with the target in several orders; for
    review, the real review and its first half, and an empty one."""
    candidates: dict[str, list[str]] = {}
    for task in tasks:
        target = task["target"]["product_info"]
        if task["type"] == "search":
            words = target["title"].split()
            candidates[task["task"]] = [target["title"], " ".join(words[:3]), "unrelated words"]
        elif task["type"] == "recommend":
            history = [b["product_info"]["parent_asin"]
                       for b in data.behaviours_before(task["user_id"], task["timestamp"])][-4:]
            asins = [*history, target["parent_asin"]]
            candidates[task["task"]] = [", ".join(asins), ", ".join(reversed(asins)),
                                        ", ".join(asins[1:] + asins[:1]), ", ".join(sorted(asins))]
        else:  # an empty review scores as the release scores "", the real one close to 1
            review = task["target"]["review"]["text"]
            candidates[task["task"]] = ["", review, review[: len(review) // 2]]
    return candidates


def run_probe(tree: Path, probe: str, inputs: Path, out: Path, timeout_s: float = 900) -> dict[str, Any]:
    """One probe in `tree` (a subprocess, so `PUMA` is that tree's)."""
    environment = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "TOKENIZERS_PARALLELISM": "false", "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, "-m", "devtools.parity.probe", probe, "--inputs", str(inputs),
                           "--out", str(out)], cwd=tree, env=environment, capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode != 0:
        raise SelfTestError(f"probe {probe} in {tree} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


def compare_probe(probe: str, reference: dict[str, Any], observed: dict[str, Any]) -> dict[str, Tally]:
    """The harness's comparisons of one probe's two observations, by item name."""
    if probe == "generation":
        from devtools.parity.puma import compare_settings

        results = {"step3 DPO candidates generate settings": compare_settings(reference["calls"], observed["calls"])}
        for part in ("prompt_ids", "outputs"):
            tally = Tally()
            same = reference[part] == observed[part]
            tally.add(part, same, None if same else {"diff": first_difference(json.dumps(reference[part]),
                                                                               json.dumps(observed[part]))})
            results[f"step3 DPO candidates {part.replace('_', ' ')}"] = tally
        return results
    if probe == "scores":
        from devtools.parity.puma import compare_scores

        return {"step4 candidate scores": compare_scores(reference["scores"], observed["scores"], {})}
    if probe == "settings":
        from devtools.parity.step_settings import compare_values

        return {**compare_values(reference["values"], observed["values"], [], "settings"),
                **compare_values(reference["defaults"], observed["defaults"], [], "documented defaults",
                                 stated_only=True)}
    from devtools.parity.training import compare_training

    return compare_training(probe, reference, observed)


@dataclass
class Outcome:
    """What the self-test saw: per injection, the items that reported it; the clean reruns' verdict."""

    clean: dict[str, bool] = field(default_factory=dict)  # probe -> the two clean runs agree
    detected: dict[str, list[str]] = field(default_factory=dict)  # injection -> items that differ
    missed: dict[str, list[str]] = field(default_factory=dict)  # injection -> expected items that did not

    @property
    def passed(self) -> bool:
        return all(self.clean.values()) and not any(self.missed.values()) and all(self.detected.values())

    def lines(self) -> list[str]:
        out = [f"clean tree, probe {probe}: two runs {'agree' if ok else 'DIFFER (the probe is not deterministic)'}"
               for probe, ok in self.clean.items()]
        for name, items in self.detected.items():
            missed = self.missed.get(name, [])
            verdict = "reported" if items and not missed else "NOT REPORTED"
            out.append(f"injection {name!r}: {verdict}; differing items: {', '.join(items) or 'none'}"
                       + (f"; no difference in: {', '.join(missed)}" if missed else ""))
        return out


def unreported(prefixes: tuple[str, ...], differing: list[str]) -> list[str]:
    """The prefixes no differing item name starts with."""
    return [prefix for prefix in prefixes if not any(name.startswith(prefix) for name in differing)]


def cheap_selftest(work: Path, injections: tuple[Injection, ...] = INJECTIONS,
                   log: Callable[[str], None] = print) -> Outcome:
    for injection in injections:
        check_injection(injection)
    inputs = prepare_inputs(work / "inputs", log)
    probes = sorted({probe for injection in injections for probe in injection.probes})
    clean = tree_copy(work / "clean")
    outcome, reference = Outcome(), {}
    for probe in probes:
        log(f"self-test: probe {probe} in the clean tree, twice ...")
        reference[probe] = run_probe(clean, probe, inputs, work / f"clean_{probe}_1.json")
        again = run_probe(clean, probe, inputs, work / f"clean_{probe}_2.json")
        outcome.clean[probe] = all(t.compared > 0 and t.all_identical
                                   for t in compare_probe(probe, reference[probe], again).values())
    for number, injection in enumerate(injections):
        log(f"self-test: injection {injection.name!r} into {injection.path} ...")
        tree = tree_copy(work / f"injected_{number}")
        inject(injection, tree)
        differing: list[str] = []
        for probe in injection.probes:
            results = compare_probe(probe, reference[probe],
                                    run_probe(tree, probe, inputs, work / f"injected_{number}_{probe}.json"))
            differing += [name for name, tally in results.items() if not (tally.compared > 0 and tally.all_identical)]
        outcome.detected[injection.name] = differing
        outcome.missed[injection.name] = unreported(
            tuple(prefix for prefixes in injection.probe_items.values() for prefix in prefixes), differing)
        shutil.rmtree(tree, ignore_errors=True)
    return outcome


# --- against the release ------------------------------------------------------------------------------------------
def release_selftest(work: Path, parity_args: list[str], injections: tuple[Injection, ...] = INJECTIONS,
                     log: Callable[[str], None] = print, timeout_s: float = 7200) -> Outcome:
    """Each injected copy's own harness against the release (`parity_args`: release_parity.py's
    arguments before the check name, without --work_dir and --out); the release's step-1
    files of a first clean run are reused by every copy, whose own step 1 runs again."""
    for injection in injections:
        check_injection(injection)
    outcome = Outcome()
    clean_work = work / "clean_work"
    steps = ",".join(sorted({step for injection in injections for step in injection.steps.split(",")}))
    clean_report = work / "clean_report.json"
    if clean_report.is_file() and (clean_work / "puma" / "release").is_dir():  # a kept --work_dir
        log(f"self-test: reusing the clean run in {clean_work}")
        clean = json.loads(clean_report.read_text(encoding="utf-8"))["checks"].get("puma", {}).get("items", {})
    else:
        clean = run_harness(tree_copy(work / "clean"), parity_args, clean_work, clean_report, steps, log, timeout_s)
    outcome.clean["release check, clean tree"] = bool(clean) and all(
        "not_run" in item or reported_identical(item) for item in clean.values())
    for number, injection in enumerate(injections):
        tree = tree_copy(work / f"injected_{number}")
        inject(injection, tree)
        injected_work = work / f"injected_{number}_work"
        seed_release_side(clean_work, injected_work)
        report = run_harness(tree, parity_args, injected_work, work / f"injected_{number}_report.json",
                             injection.steps, log, timeout_s)
        differing = [name for name, item in report.items() if "not_run" not in item and not reported_identical(item)]
        outcome.detected[injection.name] = differing
        outcome.missed[injection.name] = unreported(injection.items, differing)
        shutil.rmtree(tree, ignore_errors=True)
    return outcome


def seed_release_side(clean_work: Path, target: Path) -> None:
    """The release's step-1 files and the stand-in model of the clean run, so that only the
    project's side of step 1 runs again in the injected copy."""
    source, into = clean_work / "puma", target / "puma"
    names = ("function_data.json", "param_data.json", "label_requests.json")
    missing = [name for name in names if not (source / "release" / name).is_file()]
    if missing:
        raise SelfTestError(f"the clean run left no {', '.join(missing)} in {source / 'release'}; see its report")
    (into / "release").mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy2(source / "release" / name, into / "release" / name)
    for folder in ("tiny_model", "adapter"):
        if (source / folder).is_dir() and not (into / folder).exists():
            shutil.copytree(source / folder, into / folder)


def run_harness(tree: Path, parity_args: list[str], work: Path, report: Path, steps: str,
                log: Callable[[str], None], timeout_s: float) -> dict[str, Any]:
    log(f"self-test: {tree.name}: release_parity.py puma --puma_steps {steps} ...")
    command = [sys.executable, str(tree / "scripts/tools/release_parity.py"), *parity_args, "--work_dir", str(work),
               "--out", str(report), "--puma_steps", steps, "puma"]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONPATH": str(tree)})
    if done.returncode not in (0, 1) or not report.exists():
        raise SelfTestError(f"{tree.name}: release_parity.py exited {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(report.read_text(encoding="utf-8"))["checks"].get("puma", {}).get("items", {})


def reported_identical(item: dict[str, Any]) -> bool:
    """A report item found every part it compared identical, and compared something (or said why
    these inputs give it nothing to compare)."""
    if item.get("not_comparable"):
        return item.get("compared") == item.get("identical")
    return item.get("compared", 0) > 0 and item.get("compared") == item.get("identical")
