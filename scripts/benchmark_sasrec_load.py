"""The one-time builds' torch work on a machine as found and beside competing CPU-bound processes.

    python scripts/benchmark_sasrec_load.py --data_dir data/synthetic/full --epochs 10 --busy 2

Two jobs: SASRec training for a fixed number of epochs (no early stop, so every
setting does the same work; the trainer's own `train_seconds`) and MiniLM encoding
of `--texts` review texts (what the embedding caches do). Each runs in a fresh
process (the OpenMP wait policy is read when torch loads), first as the machine is
and then while `--busy` processes spin on the CPU. Settings: the project's default
(what `python -m PersonalWAB.build` does: PersonalWAB sets OMP_WAIT_POLICY=PASSIVE,
torch picks the thread count) and the combinations it was chosen from. Figures are
medians of `--repeats`; the load average before each run is printed, because on a
shared machine other people's work is part of the conditions.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # devtools/ lives at the repository root, outside the installed packages

from PersonalWAB.cli import run_command  # noqa: E402
from PersonalWAB.settings import parse, resolved, setting  # noqa: E402
from devtools.doubles.cpu_load import competing_processes  # noqa: E402

TRAINER = "PersonalWAB.engines.recommender.train"
# name -> (thread count or None for torch's choice, OMP_WAIT_POLICY or None for the project's default)
SETTINGS = {
    "project default": (None, None),
    "torch threads, OpenMP spin-wait": (None, "ACTIVE"),
    "1 thread, OpenMP spin-wait": (1, "ACTIVE"),
}
ENCODE = """
import sys, time
import PersonalWAB
import torch
from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.engines.text_embedding import TextEmbedder
data_dir, texts, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if threads != "None":
    torch.set_num_threads(int(threads))
data = load_benchmark_data(data_dir)
reviews = [b["review"]["text"] for behaviours in data.histories.values() for b in behaviours][:texts]
embedder = TextEmbedder()
embedder.encode(reviews[:8])
start = time.perf_counter()
embedder.encode(reviews)
print(time.perf_counter() - start)
"""


@dataclass
class SasrecLoadSettings:
    """How much work each measurement does, and how busy the machine is made."""

    data_dir: str = setting("data/synthetic/full", "data directory SASRec trains on and MiniLM reads reviews from")
    epochs: int = setting(10, "SASRec epochs per measurement (no early stop: every setting does the same work)")
    texts: int = setting(1500, "review texts MiniLM encodes per measurement")
    repeats: int = setting(1, "runs of each measurement; the median is reported (more is steadier on a shared "
                              "machine)")
    busy: int = setting(2, "competing CPU-bound processes in the busy condition")
    out: str | None = setting(None, "also write the figures here as JSON")


def sasrec_seconds(args: SasrecLoadSettings, threads: int | None, env: dict[str, str], scratch: Path) -> float:
    """One training run in a fresh process; the trainer's own training time."""
    checkpoint = scratch / "sasrec.pth"
    command = [sys.executable, "-m", TRAINER, "--data_dir", args.data_dir, "--out", str(checkpoint),
               "--item_map", str(scratch / "item_map.json"), "--epochs", str(args.epochs), "--patience", "0",
               "--eval_every", str(args.epochs), *(["--num_threads", str(threads)] if threads else [])]
    subprocess.run(command, cwd=REPO_ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads(checkpoint.with_name(checkpoint.name + ".json").read_text())["train_seconds"]


def minilm_seconds(args: SasrecLoadSettings, threads: int | None, env: dict[str, str], scratch: Path) -> float:
    """MiniLM encoding of the first `--texts` review texts in a fresh process (model load excluded)."""
    out = subprocess.run([sys.executable, "-c", ENCODE, args.data_dir, str(args.texts), str(threads)],
                         cwd=REPO_ROOT, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


JOBS = {"SASRec training": sasrec_seconds, "MiniLM encoding": minilm_seconds}


def measure(args: SasrecLoadSettings, scratch: Path) -> dict[str, dict[str, dict[str, float]]]:
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for condition, spinners in (("as found", 0), (f"+{args.busy} busy", args.busy)):
        with competing_processes(spinners):
            for job, seconds in JOBS.items():
                for name, (threads, policy) in SETTINGS.items():
                    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
                    env.update({"OMP_WAIT_POLICY": policy} if policy else {})
                    runs = []
                    for _ in range(args.repeats):
                        load = os.getloadavg()[0]
                        runs.append(seconds(args, threads, env, scratch))
                        print(f"{condition:>9} | {job:<15} | {name:<31} | {runs[-1]:7.1f} s "
                              f"(load average before: {load:.1f})", flush=True)
                    figures.setdefault(job, {}).setdefault(name, {})[condition] = statistics.median(runs)
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse(SasrecLoadSettings, argv, prog="scripts/benchmark_sasrec_load.py", description=__doc__)
    with tempfile.TemporaryDirectory() as scratch:
        figures = measure(args, Path(scratch))
    print(f"\n{args.data_dir}, {os.cpu_count()} CPUs; SASRec {args.epochs} epochs, MiniLM {args.texts} texts "
          f"(median seconds):")
    for job, settings in figures.items():
        for name, row in settings.items():
            found, busy = row.values()
            print(f"  {job:<15} {name:<31} as found {found:7.1f}   +{args.busy} busy {busy:7.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps({**resolved(args), "cpus": os.cpu_count(), "seconds": figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
