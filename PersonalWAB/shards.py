"""Shards: one long job cut into N parts that run anywhere (a Slurm job array, Kubernetes
jobs, Ray tasks) and are joined afterwards. One rule says which items part I of N takes —
every N-th item of the job's ordered list, starting at item I — so `pwab run`, `pwab
leaderboard merge` and PUMA's `generate` / `score` agree on it without talking to each other,
and a merge can name the items an absent part held."""

from __future__ import annotations

import argparse
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from PersonalWAB.errors import DataError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

SHARD_HELP = ("run only part I of N (0 <= I < N, e.g. 0/4): every N-th item of the selection starting at item I; "
              "join the parts afterwards")


@dataclass(frozen=True)
class Shard:
    """Part `index` of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N`; ValueError saying the expected form otherwise."""
        index, slash, count = str(text).partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            shard = cls(-1, 0)
        if not slash or shard.count < 1 or not 0 <= shard.index < shard.count:
            raise ValueError(f"{text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def take(self, items: Sequence[T]) -> list[T]:
        """This part's items of the whole ordered list (their order kept)."""
        return list(items[self.index::self.count])

    def take_some(self, items: Sequence[T], what: str) -> list[T]:
        """`take`, or a DataError when the part would hold nothing (an empty part is no work done,
        yet it would join like one): `what` names the items ("task(s)", "instruction(s)")."""
        part = self.take(items)
        if not part:
            raise DataError(f"--shard {self}: the {len(items)} {what} leave this shard none; split them into at "
                            f"most {max(len(items), 1)} shards")
        return part


def shard_setting(text: str) -> str:
    """A `--shard` flag's value checked and written as `I/N` (the parser's usage error otherwise)."""
    try:
        return str(Shard.parse(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def task_selection(start: int, end: int, shuffle: bool, seed: int) -> list[int]:
    """The task ids a run selects from a split, in its order: `start` to before `end`, in a
    seeded random order with `shuffle`. A shard of the run takes its part of this list."""
    task_ids = list(range(start, end))
    if shuffle:
        random.Random(seed).shuffle(task_ids)
    return task_ids


def shard_part(ordered: Sequence[K], shard_text: str | None) -> tuple[set[K], dict[K, int]]:
    """The items of `ordered` (a job's whole list) the shard `shard_text` does (all of them without
    one), and each item's place in the whole list; a DataError when the shard would do none."""
    places = {item: place for place, item in enumerate(ordered)}
    if not shard_text:
        return set(ordered), places
    return set(Shard.parse(shard_text).take_some(ordered, "instruction(s)")), places


def shard_plan(places: Mapping[K, int], done: Sequence[K]) -> dict[str, object]:
    """A part's record of where the items it did stand in the whole list: what a join orders and
    checks the parts by."""
    return {"selected": len(places), "positions": [places[item] for item in done]}


def one_count(parts: Sequence[tuple[str, Shard]]) -> None:
    """DataError naming the parts (name, shard) when they split the job into different numbers of parts."""
    if len({shard.count for _, shard in parts}) > 1:
        listing = ", ".join(f"{name} ({shard})" for name, shard in parts)
        raise DataError(f"parts of different splits into shards: {listing}; give the parts of one I/N split")


def absent_parts(parts: Sequence[tuple[str, Shard]]) -> list[int]:
    """The part indices none of `parts` (name, shard) holds; DataError naming the names when
    they split the job into different numbers of parts or two hold the same part."""
    one_count(parts)
    seen: dict[int, str] = {}
    for name, shard in parts:
        if shard.index in seen:
            raise DataError(f"{seen[shard.index]} and {name} are both shard {shard}; give each part once")
        seen[shard.index] = name
    count = parts[0][1].count if parts else 0
    return [index for index in range(count) if index not in seen]
