"""`puma generate --shard I/N` and `puma score --shard I/N`: each part records its shard, and
`puma merge_shards` joins the parts into the very file the unsharded step writes, refusing parts
that are not all the parts of one step run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from PersonalWAB.cli import run_command
from PUMA.cli import STEP_BAD_INPUT
from PUMA.merge_shards import main as merge_shards
from PUMA.score import main as score


def step(main, *argv: object) -> int:
    return run_command(main, [str(a) for a in argv], STEP_BAD_INPUT)


@pytest.fixture(scope="module")
def candidates(tiny_data, tmp_path_factory) -> Path:
    """Three candidates for each of the train split's first 7 instructions (the right answer among them)."""
    path = tmp_path_factory.mktemp("candidates") / "candidates.json"
    answers = {"search": lambda t: t["target"]["product_info"]["title"],
               "recommend": lambda t: t["target"]["product_info"]["parent_asin"],
               "review": lambda t: t["target"]["review"]["text"]}
    tasks = tiny_data.split("train")[:7]
    path.write_text(json.dumps({t["task"]: ["nothing", answers[t["type"]](t), "a thing"] for t in tasks}))
    return path


def scored(tiny_data, candidates: Path, out: Path, *extra: str) -> int:
    return step(score, "--data_dir", tiny_data.data_dir, "--task_split", "train", "--search_backend", "bm25s",
                "--candidates_file", candidates, "--out", out, *extra)


@pytest.fixture(scope="module")
def score_parts(tiny_data, tiny_engines, candidates, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scores")
    made = {"whole": (), "0of2": ("--shard", "0/2"), "1of2": ("--shard", "1/2"), "1of3": ("--shard", "1/3")}
    for name, extra in made.items():
        assert scored(tiny_data, candidates, folder / f"{name}.json", *extra) == 0
    return {name: folder / f"{name}.json" for name in made}


def test_score_parts_joined_are_the_unsharded_scores_byte_for_byte(score_parts, tmp_path):
    parts = [json.loads(score_parts[name].read_text()) for name in ("0of2", "1of2")]
    assert len(parts[0]) == 4 and len(parts[1]) == 3 and not set(parts[0]) & set(parts[1])
    record = json.loads(score_parts["1of2"].with_name("1of2.puma_run.json").read_text())
    assert record["settings"]["shard"] == "1/2" and record["shard_plan"] == {"selected": 7, "positions": [1, 3, 5]}
    out = tmp_path / "joined.json"
    assert step(merge_shards, score_parts["1of2"], score_parts["0of2"], "--out", out) == 0
    assert out.read_bytes() == score_parts["whole"].read_bytes()
    joined = json.loads(out.with_name("joined.puma_run.json").read_text())
    whole = json.loads(score_parts["whole"].with_name("whole.puma_run.json").read_text())
    assert joined["settings"]["shard"] is None and joined["step"] == "score"
    for fact in ("candidates", "instructions", "mean_result_acc", "data_fingerprint",
                 "instructions_without_candidates"):
        assert joined[fact] == whole[fact], fact


def test_a_part_is_refused_as_the_next_steps_input(score_parts, tmp_path, capsys):
    from PUMA.dpo_data import main as dpo_data

    assert step(dpo_data, "--scores_file", score_parts["0of2"], "--out", tmp_path / "pairs.json") == 2
    assert "only shard 0/2 of the step's output" in capsys.readouterr().err


@pytest.mark.parametrize(("names", "message"), [
    (("0of2",), "missing shard(s) 1/2 of score (7 instructions in all)"),
    (("0of2", "0of2"), "overlap: both hold shard 0/2's 4 instruction(s)"),
    (("0of2", "1of3"), "parts of different splits into shards"),
    (("0of2", "whole"), "whole.json: not a part of puma generate/score --shard I/N"),
])
def test_parts_that_are_not_one_whole_are_refused(score_parts, tmp_path, capsys, names, message):
    out = tmp_path / "joined.json"
    assert step(merge_shards, *(score_parts[name] for name in names), "--out", out) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert not out.exists()


def test_a_part_as_out_is_refused_and_kept(score_parts, capsys):
    kept = score_parts["1of2"].read_bytes()
    assert step(merge_shards, score_parts["0of2"], score_parts["1of2"], "--out", score_parts["1of2"]) == 2
    assert f"--out {score_parts['1of2']}: is also this command's input (PART" in capsys.readouterr().err
    assert score_parts["1of2"].read_bytes() == kept


def test_a_part_of_other_settings_is_refused(tiny_data, score_parts, candidates, tmp_path, capsys):
    other = tmp_path / "lucene.json"
    assert scored(tiny_data, candidates, other, "--shard", "1/2", "--search_backend", "lucene") == 0
    assert step(merge_shards, score_parts["0of2"], other, "--out", tmp_path / "joined.json") == 2
    error = capsys.readouterr().err
    assert "lucene.json is a part of another step run" in error and "search_backend: 'bm25s' in" in error


@pytest.mark.slow
def test_greedy_generate_parts_joined_are_the_unsharded_outputs(tiny_model_dir, tmp_path):
    from PUMA.generate import main as generate
    from PUMA.modeling import write_json

    examples = [{"instruction": f"find thing {i}", "prompt": f"Instruction: find thing {i}\nParameter: "}
                for i in (0, 1, 2, 1, 3)]  # a repeated instruction keeps its first place
    write_json(tmp_path / "param.json", examples)
    base = ("--model_path", tiny_model_dir, "--mode", "param", "--recipe", "improved", "--backend", "hf",
            "--data_file", tmp_path / "param.json", "--num_beams", "1", "--num_return_sequences", "1",
            "--do_sample", "0", "--max_new_tokens", "6", "--batch_size", "1")
    for name, extra in {"whole": (), "p0": ("--shard", "0/2"), "p1": ("--shard", "1/2")}.items():
        assert step(generate, *base, "--out", tmp_path / f"{name}.json", *extra) == 0
    assert list(json.loads((tmp_path / "p1.json").read_text())) == ["find thing 1", "find thing 3"]
    assert step(merge_shards, tmp_path / "p0.json", tmp_path / "p1.json", "--out", tmp_path / "joined.json") == 0
    assert (tmp_path / "joined.json").read_bytes() == (tmp_path / "whole.json").read_bytes()


def test_a_shard_that_would_hold_no_instruction_is_refused(tiny_data, tiny_engines, candidates, tmp_path, capsys):
    out = tmp_path / "empty_part.json"
    assert scored(tiny_data, candidates, out, "--shard", "45/50") == 2
    error = capsys.readouterr().err
    assert "--shard 45/50: the 7 instruction(s) leave this shard none; split them into at most 7 shards" in error
    assert error.count("\n") == 1 and not out.exists()
