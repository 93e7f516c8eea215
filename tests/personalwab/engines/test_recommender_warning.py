"""A trained recommender that does not beat popularity on held-out data is warned about,
on stderr and in the report beside its checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.engines.recommender import train
from PersonalWAB.engines.recommender.train import SASRecTrainConfig, popularity_warning, train_sasrec
from tests.personalwab.engines.test_recommender import write_cyclic_data


def test_warning_only_when_popularity_is_not_beaten() -> None:
    assert popularity_warning({"hr@10": 0.05}, {"hr@10": 0.01}) is None
    for sasrec in (0.01, 0.0):
        message = popularity_warning({"hr@10": sasrec}, {"hr@10": 0.01})
        assert message is not None and "does not beat popularity" in message and "0.0100" in message


def test_training_that_loses_to_popularity_warns_and_records_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = load_benchmark_data(write_cyclic_data(tmp_path / "data", users=8))
    # a model that never ranks the held-out item, whatever the training did
    monkeypatch.setattr(train, "model_metrics", lambda *_: {"hr@10": 0.0, "ndcg@10": 0.0})
    report = train_sasrec(data, tmp_path / "out" / "a.pth", tmp_path / "out" / "ids.json",
                          SASRecTrainConfig(epochs=1, hidden_units=8, num_blocks=1))
    assert report["popularity"]["hr@10"] > 0, "the cyclic data gives popularity some hits"
    assert report["warning"] == popularity_warning(report["sasrec"], report["popularity"])
    assert json.loads((tmp_path / "out" / "a.pth.json").read_text())["warning"] == report["warning"]
    assert f"warning: {tmp_path / 'out' / 'a.pth'}: {report['warning']}" in capsys.readouterr().err
