"""The parity harness's settings, once: the command line's flags (scripts/tools/release_parity.py)
and what the session and every check read."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.settings import setting
from devtools.parity.checks import BY_NAME, CHECKS, DEFAULT_CHECKS
from devtools.parity.mirror import ParityError, check_release_dir, data_sources
from devtools.parity.puma_context import STEPS
from devtools.parity.requests import VARIANTS
from devtools.parity.selection import DEFAULT_SEED

CHECK_HELP = "; ".join(f"{entry.name}: {entry.about}" for entry in CHECKS)


@dataclass
class ParitySettings:
    """The two code bases, the data, the checks run and where the report goes."""

    checks: list[str] = setting(list, f"which checks to run ({CHECK_HELP})", positional=True, nargs="*",
                                metavar="CHECK", factory=list, default_text=", ".join(DEFAULT_CHECKS))
    release_dir: str = setting(str, "a checkout of HongruCai/PersonalWAB at 23ff65c", required=True)
    data_dir: str = setting(str, "this project's data directory, artefacts built", required=True)
    split: str = setting("test", "task split compared", choices=["train", "test"])
    limit: int | None = setting(None, "compare only the first N tasks of the split (the puma check: N tasks of "
                                      "each type on each split, drawn with --seed)")
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
    protocol_file: str | None = setting(None, "the release protocol pack both sides' texts come from",
                                        default_text="built from --release_dir into the work folder")
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
    seed: int = setting(DEFAULT_SEED, "puma check: the seed of the draw of --limit tasks of each type per split "
                                      "(recorded in the report)")
    release_libs: str | None = setting(None, "puma check (required): the folder of the release-era libraries the "
                                             "release's PUMA code runs on, made by `bash "
                                             "scripts/tools/install_release_libs.sh DIR`",
                                       default_text="$PWAB_RELEASE_LIBS")
    puma_steps: str = setting(",".join(STEPS), "puma check: which steps to compare, comma-separated (step 1 always "
                                               "runs, or is reused from --work_dir)")

    @property
    def chosen_checks(self) -> tuple[str, ...]:
        return tuple(self.checks or DEFAULT_CHECKS)

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.variants.split(",") if name)

    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(step for step in self.puma_steps.split(",") if step)

    def settled(self) -> ParitySettings:
        """These settings with every path absolute (both runs work in folders of their own) and the
        environment's defaults for the extra package folders and the release's libraries."""
        def absolute(path: str | None) -> str | None:
            return str(Path(path).resolve()) if path else None

        extra = self.extra_path or [p for p in os.environ.get("PWAB_PARITY_EXTRA", "").split(os.pathsep) if p]
        return dataclasses.replace(
            self, release_dir=str(Path(self.release_dir).resolve()), data_dir=str(Path(self.data_dir).resolve()),
            extra_path=[str(Path(p).resolve()) for p in extra], protocol_file=absolute(self.protocol_file),
            interec_memory_file=absolute(self.interec_memory_file),
            puma_function_file=absolute(self.puma_function_file), work_dir=absolute(self.work_dir),
            puma_model=absolute(self.puma_model),
            release_libs=absolute(self.release_libs or os.environ.get("PWAB_RELEASE_LIBS") or None))

    def validate(self) -> None:
        """Every setting, before any file is written or process started."""
        from devtools.parity.libraries import check_release_libs

        unknown = [c for c in self.chosen_checks if c not in BY_NAME]
        if unknown:
            raise ParityError(f"unknown check {unknown[0]!r}; expected some of {', '.join(BY_NAME)}")
        unknown = [v for v in self.variant_names if v not in VARIANTS]
        if unknown:
            raise ParityError(f"--variants: unknown {unknown[0]!r}; expected some of {', '.join(VARIANTS)}")
        if self.limit is not None and self.limit < 1:
            raise ParityError(f"--limit {self.limit}: give a positive number of tasks")
        if self.agent_model == self.user_model:
            raise ParityError("--agent_model and --user_model must differ: requests are told apart by model name")
        if self.timeout_s <= 0:
            raise ParityError(f"--timeout_s {self.timeout_s}: must be positive")
        unknown = [step for step in self.step_names if step not in STEPS]
        if unknown:
            raise ParityError(f"--puma_steps: unknown {unknown[0]!r}; expected some of {','.join(STEPS)}")
        if "puma" in self.chosen_checks or self.release_libs:
            check_release_libs(self.release_libs)
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
        for path in self.extra_path:
            if Path(path).name in BY_NAME and not Path(path).is_dir():
                raise ParityError(f"--extra_path {path}: {Path(path).name} is a check; --extra_path takes the folders "
                                  "up to the next flag, so name the checks before it")
            if not Path(path).is_dir():
                raise ParityError(f"--extra_path {path}: not a directory")
        check_release_dir(Path(self.release_dir))
        if self.protocol_file:  # without one, the pack and its index are made first (session.release_pack)
            data_sources(Path(self.data_dir), self.protocol_file)
        tasks = load_tasks(Path(self.data_dir))
        if self.split not in tasks or not tasks[self.split]:
            raise ParityError(f"--data_dir {self.data_dir}: no tasks in split {self.split!r}")


def load_tasks(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    path = Path(data_dir) / "user_instructions.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParityError(f"{path}: cannot read the tasks ({exc})") from None
