"""A PUMA step's inputs checked against each other before any work: a file of instructions
(candidates, scores, function or parameter outputs) belongs to the split, data folder or
examples a step reads it with only when they hold every instruction it names. Without this
check a file of another split or data folder scores nothing ("0 of 0"), scores the few
instructions that happen to coincide against the wrong targets, or makes no DPO pairs, and
the step still exits 0.

The message names the file and, where the instructions are another split's of the same
data, that split."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from PersonalWAB.errors import DataError

if TYPE_CHECKING:
    from PersonalWAB.data.loader import BenchmarkData

SHOWN = 80  # characters of an instruction a message quotes


def split_instructions(data: BenchmarkData, split: str) -> set[str]:
    return {task["task"] for task in data.split(split)}


def holding_split(data: BenchmarkData, instructions: Collection[str], but: str) -> str | None:
    """The split of `data` other than `but` whose tasks hold every one of `instructions`, if any."""
    return next((name for name in sorted(data.tasks) if name != but and instructions
                 and set(instructions) <= split_instructions(data, name)), None)


def refuse_foreign(flag: str, path: str, instructions: Collection[str], known: Collection[str], where: str,
                   fix: str) -> None:
    """DataError naming `flag` `path` when it is empty or names instructions outside `known` (`where` says
    what `known` is: "tasks of the 'train' split of DIR"); `fix` says what to give instead."""
    if not instructions:
        raise DataError(f"{flag} {path}: holds no instructions")
    foreign = [instruction for instruction in instructions if instruction not in known]
    if foreign:
        raise DataError(f"{flag} {path}: {len(foreign)} of its {len(instructions)} instructions are not {where} "
                        f"(e.g. {foreign[0][:SHOWN]!r}); {fix}")


def check_split_file(flag: str, path: str, instructions: Collection[str], data: BenchmarkData, split: str,
                     split_flag: str) -> None:
    """Refuse a file whose instructions are not all tasks of `split` of `data` (`split_flag`: the
    step's flag naming the split), saying which split holds them when one does."""
    other = holding_split(data, instructions, split)
    fix = (f"they are the {other!r} split's: give {split_flag} {other}, or the file made for {split!r}" if other
           else "it was made from another data folder or split: give the --data_dir and split it was made from")
    refuse_foreign(flag, path, instructions, split_instructions(data, split),
                   f"tasks of the {split!r} split of {data.data_dir}", fix)


def refuse_part(flag: str, path: str | None) -> None:
    """A part of a sharded step (`--shard I/N`) holds only some of the step's output: refused as an
    input until the parts are joined."""
    from PUMA.recipe import read_record, record_path

    record = read_record(path) if path else None
    shard = ((record or {}).get("settings") or {}).get("shard")
    if shard:
        raise DataError(f"{flag} {path}: only shard {shard} of the step's output (see {record_path(str(path))}); join "
                        "all its parts with puma merge_shards and give the joined file")


def check_scores_and_examples(scores_path: str, scores: Any, examples_path: str, examples: Any) -> None:
    """Step 5's inputs: scores (instruction -> {candidate: score}) of the split and the instructions of the
    parameter examples they pair with, else nothing would pair ("0 pairs")."""
    from PUMA.recipe import read_record, record_path

    if not isinstance(scores, dict):
        raise DataError(f"--scores_file {scores_path}: expected a JSON object instruction -> {{candidate: score}}")
    if not isinstance(examples, list) or not all(isinstance(e, dict) and "instruction" in e for e in examples):
        raise DataError(f"--param_data {examples_path}: expected step 1's list of parameter examples")
    scored_split = ((read_record(scores_path) or {}).get("settings") or {}).get("task_split")
    example_splits = sorted({e["split"] for e in examples if isinstance(e.get("split"), str)})
    if scored_split and example_splits and scored_split not in example_splits:
        raise DataError(f"--param_data {examples_path}: examples of the {', '.join(example_splits)} split, but "
                        f"--scores_file {scores_path} scored the {scored_split!r} split (see "
                        f"{record_path(scores_path)}); give the parameter data of the {scored_split!r} split")
    refuse_foreign("--scores_file", scores_path, list(scores), {e["instruction"] for e in examples},
                   f"instructions of --param_data {examples_path}",
                   "the scores and the parameter data come from different splits or data folders: give the "
                   "parameter data the scored candidates were generated from")
