"""One parity session: settings checked, the release mirrored, the chosen checks run, one report.
The command line is scripts/tools/release_parity.py; docs/fidelity.md says what is compared."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from devtools import parity_libraries, parity_observations, parity_puma, parity_requests, parity_selection
from devtools.release_mirror import (PINNED_COMMIT, ParityError, ReleaseRunner, build_mirror,
                                                check_release_dir, data_sources)

CHECKS = ("observations", "first_request", "multiturn_user", "puma")
DEFAULT_CHECKS = CHECKS[:3]  # `puma` trains, generates and re-embeds: run when named


@dataclass
class ParityConfig:
    release_dir: Path
    data_dir: Path
    split: str = "test"
    limit: int | None = None
    checks: tuple[str, ...] = DEFAULT_CHECKS
    extra_paths: list[str] = field(default_factory=list)
    variants: tuple[str, ...] = tuple(parity_requests.VARIANTS)
    agent_model: str = "gpt-4o-mini"
    user_model: str = "gpt-4o"
    protocol_file: str | None = None
    interec_memory_file: str | None = None
    puma_function_file: str | None = None
    work_dir: Path | None = None
    timeout_s: float = 3600
    puma_model: str | None = None  # the puma check's stand-in model folder (default: a tiny Llama made for the run)
    puma_new_tokens: int = 48
    seed: int = parity_selection.DEFAULT_SEED  # the puma check's draw of tasks (with `limit`)
    release_libs: str | None = None  # the libraries of the release's time (the puma check runs the release on them)
    puma_steps: tuple[str, ...] = parity_puma.STEPS

    def validate(self) -> None:
        """Every setting, before any file is written or process started."""
        unknown = [c for c in self.checks if c not in CHECKS]
        if unknown:
            raise ParityError(f"unknown check {unknown[0]!r}; expected some of {', '.join(CHECKS)}")
        unknown = [v for v in self.variants if v not in parity_requests.VARIANTS]
        if unknown:
            raise ParityError(f"--variants: unknown {unknown[0]!r}; expected some of "
                              f"{', '.join(parity_requests.VARIANTS)}")
        if self.limit is not None and self.limit < 1:
            raise ParityError(f"--limit {self.limit}: give a positive number of tasks")
        if self.agent_model == self.user_model:
            raise ParityError("--agent_model and --user_model must differ: requests are told apart by model name")
        if self.timeout_s <= 0:
            raise ParityError(f"--timeout_s {self.timeout_s}: must be positive")
        unknown = [step for step in self.puma_steps if step not in parity_puma.STEPS]
        if unknown:
            raise ParityError(f"--puma_steps: unknown {unknown[0]!r}; expected some of {','.join(parity_puma.STEPS)}")
        if "puma" in self.checks or self.release_libs:
            parity_libraries.check_release_libs(self.release_libs)
        if self.puma_model and not (Path(self.puma_model) / "config.json").is_file():
            raise ParityError(f"--puma_model {self.puma_model}: not a model folder (no config.json)")
        if self.puma_model and not (Path(self.puma_model) / "tokenizer.model").is_file():
            raise ParityError(f"--puma_model {self.puma_model}: no tokenizer.model (the release loads Llama's "
                              "SentencePiece tokenizer; make one with `python -m PUMA.tiny_model --tokenizer "
                              "sentencepiece ...`)")
        for name, value in (("--protocol_file", self.protocol_file),
                            ("--interec_memory_file", self.interec_memory_file),
                            ("--puma_function_file", self.puma_function_file)):
            if value and not Path(value).is_file():
                raise ParityError(f"{name} {value}: no such file")
        for path in self.extra_paths:
            if Path(path).name in CHECKS and not Path(path).is_dir():
                raise ParityError(f"--extra_path {path}: {Path(path).name} is a check; --extra_path takes the folders "
                                  "up to the next flag, so name the checks before it")
            if not Path(path).is_dir():
                raise ParityError(f"--extra_path {path}: not a directory")
        check_release_dir(self.release_dir)
        if self.protocol_file:  # without one, the pack and its index are made first (`release_pack`)
            data_sources(self.data_dir, self.protocol_file)
        tasks = load_tasks(self.data_dir)
        if self.split not in tasks or not tasks[self.split]:
            raise ParityError(f"--data_dir {self.data_dir}: no tasks in split {self.split!r}")


def load_tasks(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    path = Path(data_dir) / "user_instructions.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParityError(f"{path}: cannot read the tasks ({exc})") from None


def load_catalogue(data_dir: Path) -> frozenset[str]:
    """Every product ASIN of the data (the release's product files, read as the release reads them)."""
    asins: set[str] = set()
    for part in sorted(Path(data_dir).glob("all_products_part_*.json")):
        asins.update(json.loads(part.read_text(encoding="utf-8")))
    return frozenset(asins)


def interec_memory_file(config: ParityConfig, work: Path) -> Path:
    """The user's file, else one written by this project's initialiser (both runs get a copy)."""
    if config.interec_memory_file:
        return Path(config.interec_memory_file)
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory.interec import initial_memory, write_memory_file

    path = work / "interec_memory.json"
    write_memory_file(path, initial_memory(load_benchmark_data(config.data_dir)))
    return path


def function_file(config: ParityConfig, tasks: list[dict[str, Any]], work: Path) -> Path:
    """The user's file, else every instruction of the split mapped to the heuristic's choice
    (the release looks every instruction up and takes the first element of its list)."""
    if config.puma_function_file:
        return Path(config.puma_function_file)
    from PersonalWAB.agents.heuristic import choose_function

    path = work / "function_file.json"
    path.write_text(json.dumps({t["task"]: [choose_function(t["task"])] for t in tasks}), encoding="utf-8")
    return path


def release_pack(config: ParityConfig, work: Path, log: Callable[[str], None]) -> str:
    """The release protocol pack built from `--release_dir` (the release's own texts: both sides
    must read them, or the project's side would compare its own), and the data's Lucene index
    for its texts when missing, built once into the data folder as `pwab build --protocol_file`
    would. Returns the pack's path."""
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.engines.search import search_index_dir
    from PersonalWAB.errors import DataError
    from PersonalWAB.protocol import load_protocol
    from PersonalWAB.protocol.pack import build_pack, write_pack

    path = work / "release_protocol.json"
    log(f"no --protocol_file: building the release protocol pack from {config.release_dir} into {path}")
    try:
        write_pack(build_pack(config.release_dir), path)
        data = load_benchmark_data(config.data_dir)
        protocol = load_protocol(path)
        if not search_index_dir(data, "lucene", protocol).exists():
            log(f"building the Lucene index of {config.data_dir} for the release's product texts (once) ...")
            build_artifacts(data, ("lucene",), recommender=False, protocol=protocol, log=log)
    except DataError as exc:
        raise ParityError(f"--release_dir {config.release_dir}: {exc}") from None
    return str(path)


def run_session(config: ParityConfig, scratch: Path, repo_root: Path,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the chosen checks; the report says per check what was compared and what differed."""
    work = config.work_dir or scratch
    work.mkdir(parents=True, exist_ok=True)
    if config.protocol_file is None:
        config = dataclasses.replace(config, protocol_file=release_pack(config, work, log))
        data_sources(config.data_dir, config.protocol_file)
    split_tasks = load_tasks(config.data_dir)[config.split]
    tasks = split_tasks[:config.limit] if config.limit else split_tasks
    mirror = build_mirror(config.release_dir, config.data_dir, parent=work, protocol_file=config.protocol_file)
    runner = ReleaseRunner(mirror, [str(Path(p).resolve()) for p in config.extra_paths], sys.executable,
                           config.timeout_s)
    commit_note = ("" if mirror.commit in (None, PINNED_COMMIT) else
                   f" (warning: HEAD {mirror.commit[:7]} is not the pinned {PINNED_COMMIT[:7]})")
    log(f"release: {mirror.release_dir}{commit_note}; data: {config.data_dir}; split {config.split}, "
        f"{len(tasks)} task(s)")
    report: dict[str, Any] = {
        "release": {"dir": str(mirror.release_dir), "commit": mirror.commit, "pinned_commit": PINNED_COMMIT,
                    "py_sha256": mirror.fingerprint},
        "data_dir": str(Path(config.data_dir).resolve()), "split": config.split, "tasks": len(tasks),
        "agent_model": config.agent_model, "user_model": config.user_model, "protocol_file": config.protocol_file,
        "checks": {}}
    identical = True
    try:
        if "observations" in config.checks:
            log(f"observations: replaying {len(tasks)} task(s) through both environments ...")
            result = parity_observations.run_check(runner, config.data_dir, config.split, list(range(len(tasks))),
                                                   work, config.protocol_file)
            for line in parity_observations.summary_lines(result):
                log(line)
            report["checks"]["observations"] = parity_observations.report(result)
            identical &= parity_observations.all_identical(result)
        if "first_request" in config.checks or "multiturn_user" in config.checks:
            setup = parity_requests.RunSetup(
                data_dir=Path(config.data_dir).resolve(), split=config.split, task_count=len(tasks),
                agent_model=config.agent_model, user_model=config.user_model, repo_root=repo_root, work_dir=work,
                protocol_file=config.protocol_file,
                interec_memory_file=interec_memory_file(config, work) if "fc_interecagent" in config.variants else None,
                function_file=function_file(config, split_tasks, work) if "fc_taskspe" in config.variants else None,
                timeout_s=config.timeout_s, catalogue=load_catalogue(config.data_dir))
            results = {}
            if "first_request" in config.checks:
                for name in config.variants:
                    results[f"first_request[{name}]"] = parity_requests.first_request_check(setup, runner, tasks,
                                                                                              name, log)
                    for line in parity_requests.summary_lines(f"first_request[{name}]",
                                                              results[f"first_request[{name}]"]):
                        log(line)
            if "multiturn_user" in config.checks:
                results["multiturn_user"] = parity_requests.multiturn_check(setup, runner, tasks, log)
                for line in parity_requests.summary_lines("multiturn_user", results["multiturn_user"]):
                    log(line)
            for label, result in results.items():
                report["checks"][label] = parity_requests.report(result)
                identical &= parity_requests.all_identical(result)
        if "puma" in config.checks:
            runner = dataclasses.replace(runner, release_libs=config.release_libs)
            setup = parity_puma.PumaSetup(
                data_dir=Path(config.data_dir).resolve(), work=work / "puma", repo_root=repo_root,
                release_dir=Path(config.release_dir).resolve(), protocol_file=config.protocol_file,
                model_dir=Path(config.puma_model).resolve() if config.puma_model else None, limit=config.limit,
                seed=config.seed, param_new_tokens=config.puma_new_tokens, timeout_s=config.timeout_s,
                steps=config.puma_steps)
            results = parity_puma.run_check(setup, runner, log)
            for line in parity_puma.summary_lines(setup):
                log(line)
            report["libraries"] = parity_libraries.report(runner, setup.work / "puma_run")
            log(parity_libraries.summary_line(report["libraries"]))
            report["checks"]["puma"] = parity_puma.report(setup)
            identical &= parity_puma.all_identical(results)
    finally:
        if config.work_dir is None:
            mirror.remove()
    report["identical"] = identical
    log("parity: " + ("everything compared is identical" if identical else "differences found (see above)"))
    return report
