"""Settings of a benchmark build, checked before any file is touched."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.construct.llm_cache import LLMSettings
from PersonalWAB.data import amazon_raw
from PersonalWAB.data.loader import INSTRUCTIONS_FILE
from PersonalWAB.data.schema import BEHAVIOUR_SPLITS
from PersonalWAB.errors import DataError
from PersonalWAB.paths import CONSTRUCTION_MANIFEST, OFFICIAL_DATA_DIR
from PersonalWAB.engines.search import BACKENDS
from PersonalWAB.settings import resolved, setting


def names(values: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Names given space- or comma-separated ("a b", "a,b" and "a, b" alike)."""
    return tuple(part for value in values for part in re.split(r"[,\s]+", value) if part)


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides what a build produces (plus how fast it runs): the flags of
    `python -m PersonalWAB.construct build`, recorded in the manifest as given.

    Defaults follow the paper's setting where it states one (five categories, 1,000
    users, the 80/10/10 split) and the published benchmark's ratios where it does not:
    with ~40,600 behaviours the split leaves ~4,000 train and ~4,500 test targets (the
    80/10/10 cut rounds down twice), and 1.72 train and 0.47 test instructions per target
    give about the published 6,896 train and 2,174 test instructions; the release's
    recommender was trained on more users than the benchmark's (`sasrec_extra_users`).
    """

    raw_dir: Path = setting(Path, "folder holding raw/review_categories and raw/meta_categories (`construct fetch "
                                  "--out`, or `data synthetic --layout raw`)", required=True, metavar="DIR")
    out: Path = setting(Path, "build folder: OUT/data (the benchmark), OUT/work (step outputs), OUT/cache/llm (model "
                              "calls, so a rebuild pays nothing twice)", required=True, metavar="DIR")
    categories: tuple[str, ...] = setting(amazon_raw.PAPER_CATEGORIES, "Amazon Reviews 2023 categories to build "
                                          "from, space- or comma-separated; another set makes a benchmark of other "
                                          "products", nargs="+", metavar="CATEGORY",
                                          default_text="the paper's five: " + ", ".join(amazon_raw.PAPER_CATEGORIES))
    num_users: int = setting(1000, "users sampled into the benchmark; fewer make a cheaper, smaller benchmark")
    min_interactions: int = setting(10, "fewest reviews a user needs over the chosen categories to be sampled")
    max_interactions: int = setting(200, "most reviews a sampled user may have (very active users make long, costly "
                                         "profiles)")
    min_categories: int = setting(1, "in how many of the chosen categories a user must have reviews (more gives "
                                     "users with broader tastes)")
    seed: int = setting(0, "random seed of user sampling and task assignment; another seed builds another benchmark "
                           "of the same shape")
    train_tasks_per_target: float = setting(1.72, "instructions per train target behaviour on average (0-3, one per "
                                                  "task type at most)")
    test_tasks_per_target: float = setting(0.47, "instructions per test target behaviour on average (0-3); every "
                                                 "user gets at least one test instruction")
    profile_splits: tuple[str, ...] = setting(("history",), "behaviour splits the profile is written from, space- or "
                                              f"comma-separated (of {', '.join(BEHAVIOUR_SPLITS)}); history alone "
                                              "leaks no task target into the profile", nargs="+", metavar="SPLIT",
                                              default_text="history")
    profile_max_behaviours: int = setting(50, "most recent behaviours shown to the profile writer (longer is costlier)")
    recent_behaviours: int = setting(5, "earlier purchases shown when writing a recommendation request")
    model: str = setting("gpt-4o-mini", "model that writes profiles and instructions: any litellm model string")
    api_base: str | None = setting(None, "OpenAI-compatible server for --model (vLLM, Ollama, ...)", metavar="URL",
                                   default_text="the provider's own endpoint")
    temperature: float = setting(0.7, "sampling temperature of the writer model")
    max_concurrency: int = setting(8, "model calls in flight; lower it on rate limits")
    max_retries: int = setting(5, "retries of a call on rate limits, timeouts and server errors")
    profile_max_tokens: int = setting(600, "most tokens of a written profile")
    instruction_max_tokens: int = setting(200, "most tokens of a written instruction")
    sasrec_extra_users: int = setting(4000, "further sampled users whose reviews train SASRec only (fewer cold-start "
                                            "items, as the release's recommender)")
    sasrec_epochs: int = setting(400, "most SASRec training epochs (early stopping usually ends sooner)")
    sasrec_patience: int = setting(20, "SASRec validation checks without improvement before stopping")
    sasrec_seed: int = setting(42, "SASRec's random seed")
    sasrec_threads: int | None = setting(None, "torch threads of SASRec training; fix it for identical weights across "
                                               "machines", default_text="torch's default")
    search_backend: str = setting("lucene", "search index(es) to build: lucene (the release's engine, needs Java), "
                                            "bm25s (pure Python) or all", choices=(*BACKENDS, "all"))
    protocol_file: str | None = setting(None, "release protocol pack whose product texts the search index holds (as "
                                              "in `python -m PersonalWAB.build`)", metavar="FILE",
                                        default_text="the default pack when placed, else the project's texts")

    def __post_init__(self) -> None:
        """Paths as paths and name lists as tuples, however they were given (flags, a config
        file, code)."""
        if self.raw_dir is None or self.out is None:
            raise DataError("--raw_dir and --out are both needed")
        object.__setattr__(self, "raw_dir", Path(self.raw_dir))
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "categories", names(self.categories))
        object.__setattr__(self, "profile_splits", names(self.profile_splits))

    @property
    def search_backends(self) -> tuple[str, ...]:
        return BACKENDS if self.search_backend == "all" else (self.search_backend,)

    @property
    def work_dir(self) -> Path:
        return self.out / "work"

    @property
    def data_dir(self) -> Path:
        return self.out / "data"

    @property
    def llm_cache_dir(self) -> Path:
        return self.out / "cache" / "llm"

    def llm(self) -> LLMSettings:
        return LLMSettings(model=self.model, api_base=self.api_base, temperature=self.temperature,
                           max_retries=self.max_retries, max_concurrency=self.max_concurrency)

    def describe(self) -> dict[str, Any]:
        """The resolved settings, JSON-ready (the manifest's `parameters`)."""
        return {name: str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
                for name, value in resolved(self).items()}

    def check(self) -> None:
        """Every setting and input file, before anything is read or written."""
        problems = []
        unknown = [c for c in self.categories if c not in amazon_raw.CATEGORIES]
        if not self.categories:
            problems.append("--categories: give at least one category")
        if unknown:
            problems.append(f"--categories: unknown Amazon Reviews 2023 categor{'y' if len(unknown) == 1 else 'ies'} "
                            f"{', '.join(unknown)}; known: {', '.join(amazon_raw.CATEGORIES)}")
        if len(set(self.categories)) != len(self.categories):
            problems.append("--categories: a category is listed twice")
        if self.num_users < 1:
            problems.append(f"--num_users must be at least 1, got {self.num_users}")
        if not 1 <= self.min_interactions <= self.max_interactions:
            problems.append(f"--min_interactions/--max_interactions: need 1 <= min <= max, got "
                            f"{self.min_interactions} and {self.max_interactions}")
        if not 1 <= self.min_categories <= max(1, len(self.categories)):
            problems.append(f"--min_categories must be between 1 and the number of categories, "
                            f"got {self.min_categories}")
        for name in ("train_tasks_per_target", "test_tasks_per_target"):
            if not 0 <= getattr(self, name) <= 3:
                problems.append(f"--{name} must be between 0 and 3 (one task per type at most), "
                                f"got {getattr(self, name)}")
        bad_splits = [s for s in self.profile_splits if s not in BEHAVIOUR_SPLITS]
        if bad_splits or not self.profile_splits:
            problems.append(f"--profile_splits: expected some of {', '.join(BEHAVIOUR_SPLITS)}, "
                            f"got {list(self.profile_splits)}")
        for name in ("profile_max_behaviours", "max_concurrency", "profile_max_tokens", "instruction_max_tokens",
                     "sasrec_epochs"):
            if getattr(self, name) < 1:
                problems.append(f"--{name} must be at least 1, got {getattr(self, name)}")
        for name in ("recent_behaviours", "max_retries", "sasrec_extra_users", "sasrec_patience"):
            if getattr(self, name) < 0:
                problems.append(f"--{name} must not be negative, got {getattr(self, name)}")
        if not self.temperature >= 0:
            problems.append(f"--temperature must not be negative, got {self.temperature}")
        if self.search_backend not in (*BACKENDS, "all"):
            problems.append(f"--search_backend: expected lucene, bm25s or all, got {self.search_backend!r}")
        if not self.model.strip():
            problems.append("--model: give a litellm model string")
        if problems:
            raise DataError("; ".join(problems))
        self._check_paths()

    def _check_paths(self) -> None:
        official = OFFICIAL_DATA_DIR.resolve()
        target = self.data_dir.resolve()
        if target == official or official in target.parents or target in official.parents:
            raise DataError(f"--out {self.out}: refusing to build into or around the official data folder "
                            f"{OFFICIAL_DATA_DIR}")
        if (self.data_dir / INSTRUCTIONS_FILE).exists() and not (self.data_dir / CONSTRUCTION_MANIFEST).exists():
            raise DataError(f"{self.data_dir}: holds benchmark data that this pipeline did not build (no "
                            f"{CONSTRUCTION_MANIFEST}); refusing to overwrite it, choose another --out")
        for category in self.categories:
            amazon_raw.locate(self.raw_dir, amazon_raw.review_file(category))
            amazon_raw.locate(self.raw_dir, amazon_raw.meta_file(category))

