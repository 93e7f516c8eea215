"""The sizes the paper publishes for the release: what identifies the official data (no digest
of its files is published) and what the downloader checks fetched files against."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from PersonalWAB.data import schema


@dataclass(frozen=True)
class OfficialCounts:
    """The sizes the paper publishes for the release.

    They are the only integrity check available (no checksums are published); tests
    pass small numbers that fit the files they serve. A different product count is
    only a warning, because the catalogue parts may be re-cut between releases.
    """

    users: int = 1000
    train: int = 6896
    test: int = 2174
    test_types: Mapping[str, int] = field(
        default_factory=lambda: {"search": 694, "recommend": 757, "review": 723}
    )
    products: int = 35772


PUBLISHED_COUNTS = OfficialCounts()


def type_mix(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts per task type in a fixed order, zero for a type that does not occur."""
    return {kind: counts.get(kind, 0) for kind in schema.TASK_TYPES}


def count_summary(data: Any) -> dict[str, Any]:
    """The counts of a loaded data folder that the paper publishes (products aside)."""
    return {
        "users": len(data.profiles),
        "train": len(data.tasks["train"]),
        "test": len(data.tasks["test"]),
        "test_types": type_mix(Counter(task["type"] for task in data.tasks["test"])),
    }


def matches_published_counts(data: Any, expected: OfficialCounts | None = None) -> bool:
    """Whether a loaded data folder has the release's published users and instructions."""
    expected = expected or PUBLISHED_COUNTS
    return count_summary(data) == {"users": expected.users, "train": expected.train, "test": expected.test,
                                   "test_types": type_mix(expected.test_types)}
