"""`python -m PersonalWAB.build` (`PersonalWAB.build`): the command that builds a data folder's
derived artefacts keeps its old spellings, reads config files and records its settings."""

from __future__ import annotations

import json

from PersonalWAB.data.loader import load_benchmark_data
from tests.conftest import copy_data_dir


def test_build_command_keeps_old_spellings_reads_config_files_and_records_its_settings(tiny_data_dir, tmp_path,
                                                                                         monkeypatch, capsys):
    import PersonalWAB.build as build_command
    from PersonalWAB.settings import parse

    data_dir = copy_data_dir(tiny_data_dir, tmp_path / "data", artefacts=True)
    asked = {}
    monkeypatch.setattr(build_command, "build_artifacts", lambda data, backends, **options: asked.update(
        backends=backends, **options) or {})
    assert build_command.main(["--data_dir", str(data_dir), "--no_recommender", "--no_memory_embeddings",
                               "--search_backend", "bm25s"]) == 0
    err = capsys.readouterr().err
    assert "--no_recommender is deprecated; use --recommender 0" in err
    assert "--no_memory_embeddings is deprecated; use --memory_embeddings 0" in err
    assert asked["backends"] == ("bm25s",) and asked["recommender"] is False and asked["memory_embeddings"] is False
    record = json.loads((load_benchmark_data(data_dir).artifacts.cache_dir / "build_command.json").read_text())
    assert record["settings"]["recommender"] is False and record["settings"]["search_backend"] == "bm25s"
    config = tmp_path / "build.yaml"
    config.write_text(f"data_dir: {data_dir}\nrecommender: 0\nmemory_embeddings: false\nsearch_backend: bm25s\n")
    flags = ["--data_dir", str(data_dir), "--recommender", "0", "--memory_embeddings", "0", "--search_backend", "bm25s"]
    assert parse(build_command.BuildSettings, ["--config", str(config)]) == parse(build_command.BuildSettings, flags)
