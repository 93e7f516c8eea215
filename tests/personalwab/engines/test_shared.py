"""The engines a run shares (`PersonalWAB.engines.shared`): a failure of the benchmark's own
machinery is never scored as the agent's failure. A broken artefact found at the start stops the
run before any task, naming it; an engine that fails during a task marks the task errored (exit 3,
run again on resume); an index the protocol cannot use is an engine error, not an observation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from PersonalWAB.engines.recommender.engine import SASRecRecommender
from PersonalWAB.engines.shared import Engines
from PersonalWAB.envs.pwab.env import PWABEnv
from PersonalWAB.errors import EngineError
from PersonalWAB.results import load_result_file
from PersonalWAB.runner.cli import main


# The tiny test split's first four tasks are search and recommendation tasks (no MiniLM needed).
FIRST_TASKS = ["--end_index", "4"]


@pytest.fixture()
def built_copy(tiny_engines, tiny_data_dir: Path, tmp_path: Path) -> Path:
    """A copy of the tiny data with its built index and recommender, free to break."""
    return shutil.copytree(tiny_data_dir, tmp_path / "data")


def artefacts(data_dir: Path):
    from PersonalWAB.data.loader import load_benchmark_data

    data = load_benchmark_data(data_dir)
    return data, Engines(data, "lucene")


def run_cli(data_dir: Path, output: Path, *extra: str) -> int:
    return main(["--data_dir", str(data_dir), "--out", str(output), *FIRST_TASKS, *extra])


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def corrupt_lucene_index(index_dir: Path) -> None:
    for segment_file in index_dir.iterdir():
        if segment_file.name.startswith("_") or segment_file.name.startswith("segments_"):
            segment_file.write_bytes(b"\0" * 64)


BREAKAGES = {
    "truncated SASRec checkpoint": (lambda engines: truncate(engines.checkpoint), "checkpoint"),
    "missing item map": (lambda engines: engines.item_map.unlink(), "item_map"),
    "corrupt Lucene index": (lambda engines: corrupt_lucene_index(engines.search_index), "search_index"),
}


@pytest.mark.parametrize("breakage", BREAKAGES, ids=list(BREAKAGES))
def test_broken_artefact_stops_the_run_before_any_task(built_copy, tmp_path, capsys, breakage):
    _, engines = artefacts(built_copy)
    breaks, named = BREAKAGES[breakage]
    breaks(engines)
    output = tmp_path / "out.json"
    assert run_cli(built_copy, output) == 2
    message = capsys.readouterr().err
    assert str(getattr(engines, named)) in message
    assert "broken" in message
    assert not output.exists(), "no result file is written for a run that cannot score"


def test_engine_failure_during_a_task_is_an_error_not_a_score(built_copy, tmp_path, capsys, monkeypatch):
    """The recommender fails after the start-of-run probe: the recommendation tasks are
    recorded as errored (not 0 scores), the run exits 3, and a resume runs them again."""
    real_score_rows = SASRecRecommender._score_rows
    calls = {"n": 0}

    def fails_after_the_probe(self, rows):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("CUDA error: device-side assert triggered")
        return real_score_rows(self, rows)

    monkeypatch.setattr(SASRecRecommender, "_score_rows", fails_after_the_probe)
    monkeypatch.setenv("PERSONALWAB_RECOMMENDER_BACKEND", "torch")  # the PyTorch recommender fails here
    output = tmp_path / "out.json"
    assert run_cli(built_copy, output) == 3
    records = load_result_file(output)[1]
    recommend = [r for r in records if r["info"]["task"]["type"] == "recommend"]
    assert recommend and all("EngineError" in r["info"]["error"] and "SASRec" in r["info"]["error"] for r in recommend)
    assert all(not r["info"].get("error") for r in records if r["info"]["task"]["type"] == "search")

    monkeypatch.setattr(SASRecRecommender, "_score_rows", real_score_rows)
    capsys.readouterr()
    resumed = tmp_path / "resumed.json"
    assert run_cli(built_copy, resumed, "--resume_from", str(output)) == 0
    again = load_result_file(resumed)[1]
    assert len(again) == len(records) and not any(r["info"].get("error") for r in again)


def test_an_index_the_protocol_cannot_use_is_an_engine_error_not_an_observation(built_copy, fake_protocol):
    """The index on disk holds the project's product texts; a run with other texts must not
    show the agent an `Error:` for it."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.errors import DataError

    engines = Engines(load_benchmark_data(built_copy), "lucene", fake_protocol)
    env = PWABEnv(engines, "test", protocol=fake_protocol)
    env.reset(0)
    with pytest.raises(EngineError, match=str(engines.search_index)):
        env.step({"name": "search_product_by_query", "arguments": {"query": "headphones"}})
    with pytest.raises(DataError, match="broken"):
        engines.check(search=True, recommender=False)
