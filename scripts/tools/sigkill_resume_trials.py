"""Kill run.py with SIGKILL at random moments, resume it, and check that nothing was lost.

    python scripts/tools/sigkill_resume_trials.py --data_dir data/synthetic/small --trials 10

Every trial starts `run.py` (offline agents, so no key is needed; single- and
multi-turn, one or three workers, alternating), kills it with SIGKILL once its
checkpoint holds a random number of finished tasks (or, in some trials, while it
is still starting up), sometimes kills the resumed run again, and resumes until
the run finishes. The finished file is then compared with an uninterrupted run of
the same settings: a task missing is *lost*, a task recorded twice *duplicated*,
and a task whose scores, actions or task fields differ *changed*. Every checkpoint
found after a kill must also parse. Exit status 1 when any count is not 0.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.cli import run_command
from PersonalWAB.results import read_run_file
from PersonalWAB.settings import parse, setting

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TrialSettings:
    """How many runs are killed, how long each is, and the seed of the kill moments."""

    data_dir: str = setting("data/synthetic/small", "data directory the runs use")
    trials: int = setting(10, "runs killed and resumed (each against an uninterrupted reference)")
    tasks: int = setting(40, "tasks per run (the first N of the test split)")
    seed: int = setting(0, "seed of the kill moments; another seed kills at other moments")

CONFIGS = [
    ["--agent_memory", "last"],
    ["--agent_memory", "none", "--max_concurrency", "3"],
    ["--max_steps", "5", "--user_mode", "offline", "--agent_memory", "last"],
    ["--max_steps", "5", "--user_mode", "offline", "--agent_memory", "last", "--max_concurrency", "3"],
]


def fingerprint(record: dict) -> str:
    """What must not change between an interrupted and an uninterrupted run of a task."""
    return json.dumps([record["action_acc"], record["res_acc"], record["info"]["task"], record["info"]["actions"],
                       "error" in record["info"]], sort_keys=True)


def command(args: TrialSettings, config: list[str], output: Path, resume: bool) -> list[str]:
    words = [sys.executable, "run.py", "--data_dir", args.data_dir, "--end_index", str(args.tasks), *config]
    return words + (["--resume_from", str(output)] if resume else ["--out", str(output)])


def records_in(path: Path) -> int:
    try:
        return len(read_run_file(path).records)
    except Exception:  # not there yet, or caught between two atomic writes' renames (cannot be half-written)
        return -1


def kill_when(process: subprocess.Popen, output: Path, at_records: int) -> bool:
    """SIGKILL once the checkpoint holds `at_records` finished tasks (0: as soon as the file exists);
    False when the run finished first."""
    while process.poll() is None:
        if output.exists() and records_in(output) >= at_records:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.02)
    return False


def trial(args: TrialSettings, number: int, rng: random.Random, workdir: Path,
          reference: dict[int, dict[tuple[int, int], str]]) -> dict[str, int]:
    config_index = number % len(CONFIGS)
    config = CONFIGS[config_index]
    output = workdir / f"trial{number:02d}.json"
    kills, unreadable = 0, 0
    first = subprocess.Popen(command(args, config, output, resume=False), cwd=REPO_ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    plan = [rng.randint(0, args.tasks - 1)] + ([rng.randint(1, args.tasks - 1)] if rng.random() < 0.5 else [])
    running = first
    for at_records in plan:
        if not kill_when(running, output, at_records):
            break
        kills += 1
        unreadable += output.exists() and records_in(output) < 0
        running = subprocess.Popen(command(args, config, output, resume=output.exists()), cwd=REPO_ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if running.wait() != 0:
        raise SystemExit(f"trial {number}: run.py exited {running.returncode}; rerun it by hand to see why")
    parsed = read_run_file(output)
    seen: dict[tuple[int, int], str] = {}
    duplicated = 0
    for record in parsed.records:
        key = (record["trial"], record["task_id"])
        duplicated += key in seen
        seen[key] = fingerprint(record)
    expected = reference[config_index]
    lost = len(set(expected) - set(seen))
    changed = sum(1 for key, value in seen.items() if key in expected and expected[key] != value)
    return {"config": config_index, "kills": kills, "unfinished_header": int(parsed.header is None),
            "unreadable": unreadable, "lost": lost, "duplicated": duplicated, "changed": changed}


def reference_runs(args: TrialSettings, workdir: Path) -> dict[int, dict[tuple[int, int], str]]:
    reference = {}
    for index, config in enumerate(CONFIGS):
        output = workdir / f"reference{index}.json"
        subprocess.run(command(args, config, output, resume=False), cwd=REPO_ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        reference[index] = {(r["trial"], r["task_id"]): fingerprint(r) for r in read_run_file(output).records}
    return reference


def main(argv: list[str] | None = None) -> int:
    args = parse(TrialSettings, argv, prog="scripts/tools/sigkill_resume_trials.py", description=__doc__)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        reference = reference_runs(args, workdir)
        results = []
        for number in range(args.trials):
            results.append(trial(args, number, rng, workdir, reference))
            print(f"trial {number}: {results[-1]}", flush=True)
    totals = {key: sum(r[key] for r in results) for key in ("kills", "unreadable", "lost", "duplicated", "changed",
                                                            "unfinished_header")}
    print(f"{args.trials} trials, {totals['kills']} SIGKILLs: lost {totals['lost']}, duplicated "
          f"{totals['duplicated']}, changed {totals['changed']}, unreadable checkpoints {totals['unreadable']}, "
          f"unfinished files {totals['unfinished_header']}")
    bad = totals["lost"] + totals["duplicated"] + totals["changed"] + totals["unreadable"] + totals["unfinished_header"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(run_command(main))
