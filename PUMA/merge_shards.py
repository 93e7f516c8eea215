"""Steps 3 and 4 in shards: `puma generate --shard I/N` and `puma score --shard I/N` each do
every N-th instruction of the step's ordered list (the rule of `PersonalWAB.shards`), writing
a part whose record (`*.puma_run.json`) names the shard and where each of its instructions
stands in the whole list; `puma merge_shards PART... --out FILE` joins the parts into the file
the step writes unsharded, in the same order.

The join is refused, one line naming the parts, when they are not parts of one step run
(another step, recipe, setting or input, or other data), when two hold the same shard or
instructions, when they split the step into different numbers of shards, or when a shard is
absent. Sampled generation draws each part's candidates apart, so only greedy or beam
decoding gives the unsharded step's very outputs; scoring gives them always.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError
from PersonalWAB.settings import setting
from PersonalWAB.shards import Shard, absent_parts, one_count

# the settings that may differ between the parts of one step run
PER_PART = ("shard", "output_file")
# a record's keys that describe the run (the rest are the step's facts)
RECORD_KEYS = ("step", "recipe", "departures_from_release", "recipe_departures", "recipe_changes",
               "shared_with_release", "readings", "settings", "inputs", "written", "shard_plan")
SHARDABLE = ("generate", "score")


@dataclass
class MergeShardsConfig:
    """Joining the parts of a sharded generate or score."""

    parts: list[str] = setting(list, "the parts of one `puma generate --shard I/N` or `puma score --shard I/N` "
                               "(all N of them)", positional=True, nargs="+", metavar="PART")
    output_file: str = setting(str, "the joined file, as the step writes it unsharded (its record beside it)",
                               flag="out", metavar="FILE", required=True)


@dataclass
class Part:
    path: str
    record: dict[str, Any]
    shard: Shard
    output: dict[str, Any]
    positions: list[int]


def read_part(path: str) -> Part:
    """A part and its record; DataError naming the file when it is none."""
    from PUMA.modeling import read_json
    from PUMA.recipe import read_record, record_path

    record = read_record(path)
    settings = (record or {}).get("settings") or {}
    if record is None or record.get("step") not in SHARDABLE or not settings.get("shard"):
        raise DataError(f"{path}: not a part of puma generate/score --shard I/N (its record {record_path(path)} "
                        "names no shard)")
    output = read_json(path)
    positions = (record.get("shard_plan") or {}).get("positions")
    if not isinstance(output, dict) or not isinstance(positions, list) or len(positions) != len(output):
        raise DataError(f"{path}: its outputs and its record's shard_plan ({record_path(path)}) disagree; make the "
                        "part again")
    return Part(path, record, Shard.parse(settings["shard"]), output, positions)


def _run_of(part: Part) -> dict[str, Any]:
    """What makes parts one step run: step, recipe, settings but the per-part ones, inputs, data, list size."""
    settings = {key: value for key, value in part.record["settings"].items() if key not in PER_PART}
    return {"step": part.record["step"], "recipe": part.record["recipe"], "settings": settings,
            "inputs": part.record.get("inputs"), "data_fingerprint": part.record.get("data_fingerprint"),
            "selected": part.record["shard_plan"].get("selected")}


def join_parts(paths: Sequence[str]) -> tuple[dict[str, Any], Part]:
    """The step's whole output from its parts (in the unsharded order) and the first part; DataError at the
    first reason not to join."""
    parts = [read_part(path) for path in paths]
    first = parts[0]
    want = _run_of(first)
    for part in parts[1:]:
        have = _run_of(part)
        differing = [key for key in want if key != "settings" and have[key] != want[key]]
        differing += [f"{key}: {want['settings'].get(key)!r} in {first.path}, {have['settings'].get(key)!r} in "
                      f"{part.path}" for key in {**want["settings"], **have["settings"]}
                      if want["settings"].get(key) != have["settings"].get(key)]
        if differing:
            raise DataError(f"{part.path} is a part of another step run than {first.path} "
                            f"({'; '.join(differing)}); join the parts of one run")
    one_count([(part.path, part.shard) for part in parts])
    holder: dict[int, str] = {}
    for part in parts:
        stride = set(range(part.shard.index, want["selected"], part.shard.count))
        if not set(part.positions) <= stride:
            raise DataError(f"{part.path}: its record places outputs outside shard {part.shard}; make the part again")
        shared = [place for place in part.positions if place in holder]
        if shared:
            raise DataError(f"{holder[shared[0]]} and {part.path} overlap: both hold shard {part.shard}'s "
                            f"{len(shared)} instruction(s); give each shard once")
        holder.update((place, part.path) for place in part.positions)
    absent = absent_parts([(part.path, part.shard) for part in parts])
    if absent:
        count = first.shard.count
        raise DataError(f"missing shard(s) {', '.join(f'{index}/{count}' for index in absent)} of "
                        f"{first.record['step']} ({want['selected']} instructions in all): run them with --shard "
                        "I/N and join all the parts")
    items = sorted(((place, key, value) for part in parts for place, (key, value) in
                    zip(part.positions, part.output.items())), key=lambda item: item[0])
    return {key: value for _, key, value in items}, first


def merge_file(config: MergeShardsConfig, log: Any = print) -> Path:
    from PUMA.modeling import write_json
    from PUMA.recipe import get_recipe, write_record

    output, first = join_parts(config.parts)
    record = first.record
    settings = {**record["settings"], "shard": None, "output_file": config.output_file}
    facts = {key: value for key, value in record.items() if key not in RECORD_KEYS}
    if record["step"] == "score":
        from PUMA.candidate_scores import score_summary

        facts.update(score_summary(output))
    path = write_json(config.output_file, output)
    write_record(path, record["step"], get_recipe(record["recipe"]), settings, record.get("inputs"), **facts,
                 joined_from=list(config.parts))
    log(f"{path}: {len(output)} instructions from {len(config.parts)} parts of {record['step']}")
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    merge_file(parse_step(MergeShardsConfig, argv, "python -m PUMA.merge_shards", __doc__, "merge_shards"))
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
