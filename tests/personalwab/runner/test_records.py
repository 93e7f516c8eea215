"""What a run writes (`PersonalWAB.runner.records`): the result file's name, when the settings
name none, is unique per run."""

from __future__ import annotations

from datetime import datetime

from PersonalWAB.results import load_result_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run


def quiet(_: str) -> None:
    pass


def test_default_names_are_unique_per_run(tiny_data_dir, tiny_engines, tmp_path, monkeypatch):
    class SameMinute(datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 1, 2, 3, 4)

    monkeypatch.setattr("PersonalWAB.runner.records.datetime", SameMinute)
    paths = [run(RunConfig(data_dir=str(tiny_data_dir), log_dir=str(tmp_path), seed=seed, end_index=3), log=quiet)[1]
             for seed in (1, 2, 3)]
    assert len(set(paths)) == 3 and paths[0].name.endswith("_01020304.json")
    assert [paths[0].with_name(paths[0].stem + suffix + ".json") for suffix in ("-2", "-3")] == paths[1:]
    assert [load_result_file(p)[0]["run_args"]["seed"] for p in paths] == [1, 2, 3]
