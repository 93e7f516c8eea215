"""PUMA's learning benchmark (scripts/benchmark_puma_learning.py): the control's shuffled labels,
the --full preset, a work folder of other settings refused, and (slow) a
whole run of both recipes and every stage on tiny data with the tiny model."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark_puma_learning",
                                                  REPO_ROOT / "scripts" / "benchmark_puma_learning.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_control_shuffles_labels_across_examples_and_says_so(bench, tmp_path: Path):
    source = tmp_path / "data"
    source.mkdir()
    for name in ("function_train", "param_train", "function_test", "param_test"):
        examples = [{"instruction": f"{name} {i}", "prompt": f"p{i}", "label": f"{name} label {i}"} for i in range(20)]
        (source / f"{name}.json").write_text(json.dumps(examples))
        (source / f"{name}.puma_run.json").write_text(json.dumps({"recipe": "improved", "settings": {}}))
    bench.shuffled_labels(source, tmp_path / "control", seed=0)
    for name in ("function_train", "param_train"):
        before = json.loads((source / f"{name}.json").read_text())
        after = json.loads((tmp_path / "control" / f"{name}.json").read_text())
        assert sorted(e["label"] for e in after) == sorted(e["label"] for e in before)
        assert [e["prompt"] for e in after] == [e["prompt"] for e in before]
        assert sum(a["label"] != b["label"] for a, b in zip(after, before)) > 15
        record = json.loads((tmp_path / "control" / f"{name}.puma_run.json").read_text())
        assert record["recipe"] == "improved" and "labels shuffled" in record["negative_control"]
    for name in ("function_test.json", "param_test.json", "param_test.puma_run.json"):
        assert (tmp_path / "control" / name).read_text() == (source / name).read_text()


def test_full_takes_the_papers_values_where_no_flag_is_given(bench, tmp_path: Path):
    from PersonalWAB.settings import parse

    argv = ["--full", "--candidates", "6"]
    settings = bench.with_full_preset(parse(bench.LearningSettings, argv), argv)
    assert (settings.train_tasks, settings.mem_token_length, settings.candidate_tokens) == (-1, 768, 256)
    assert settings.candidates == 6
    config = tmp_path / "c.yaml"
    config.write_text("full: true\nsft_epochs: 5\n")
    argv = ["--config", str(config)]
    settings = bench.with_full_preset(parse(bench.LearningSettings, argv), argv)
    assert settings.sft_epochs == 5 and settings.sft_max_length == 1280
    plain = parse(bench.LearningSettings, [])
    assert bench.with_full_preset(plain, []) == plain


def test_a_work_folder_of_other_settings_is_refused(bench, tmp_path: Path):
    runner = bench.Runner(tmp_path, False, {"train_tasks": 72, "out": "a"})
    runner.stages["release:data"] = {"seconds": 1.0}
    runner.save()
    assert bench.Runner(tmp_path, False, {"train_tasks": 72, "out": "b"}).stages == runner.stages
    with pytest.raises(ValueError, match=r"made with other settings \(train_tasks\); pass --fresh"):
        bench.Runner(tmp_path, False, {"train_tasks": 96, "out": "a"})
    assert bench.Runner(tmp_path, True, {"train_tasks": 96}).stages == {}


def test_a_partial_report_says_so(bench):
    report = {"settings": {"train_tasks": 72}, "machine": {"cpu": "cpu", "cores": 2, "torch_threads": 2, "gpu": None},
              "complete": False, "missing": ["improved:grpo"], "failed_stages": ["improved:grpo"],
              "total_seconds": 60.0, "results": {}, "comparisons": [], "stages": {}}
    text = bench.tables(report, "python scripts/benchmark_puma_learning.py")
    assert "PARTIAL run (missing: improved:grpo; failed: improved:grpo)" in text


def test_each_claim_is_answered_by_its_comparisons_test_and_direction(bench):
    def compared(name: str, difference: float, verdict: str) -> dict:
        p = {"differs": 0.001, "no test": None}.get(verdict, 0.4)
        row = {"baseline": 0.2, "other": 0.2 + difference, "difference": difference, "low": difference - 0.01,
               "high": difference + 0.01, "p": p, "verdict": verdict}
        return {"name": name, "groups": {"overall": {"Result Acc": row}}}

    lines = bench.verdicts([compared("improved: dpo vs sft", 0.05, "differs"),
                            compared("improved: grpo vs sft", 0.01, "no difference shown"),
                            compared("improved: control vs sft", -0.1, "differs"),
                            compared("release: control vs sft", 0.1, "differs"),
                            compared("sft: improved vs release", -0.05, "differs"),
                            compared("base: improved vs release", 0.0, "no test")])
    assert [line.split("**")[1] for line in lines] == ["yes", "not shown", "yes", "no: the other way",
                                                       "no: the other way", "no test: neither run varies"]
    assert lines[0].startswith("improved: DPO beats SFT?") and lines[4].startswith("sft: improved beats release?")


@pytest.mark.slow
def test_every_stage_of_both_recipes_runs_on_tiny_data(bench, tiny_data_dir: Path, tiny_model_dir: Path,
                                                      tmp_path: Path):
    out = tmp_path / "out.json"
    status = bench.main(["--data_dir", str(tiny_data_dir), "--model_path", str(tiny_model_dir), "--work_dir",
                         str(tmp_path / "work"), "--out", str(out), "--doc", "", "--train_tasks", "24",
                         "--mem_token_length", "64", "--sft_epochs", "1", "--sft_max_length", "192", "--candidates",
                         "2", "--candidate_tokens", "8", "--dpo_max_length", "192", "--dpo_max_prompt_length", "160",
                         "--grpo_steps", "2", "--grpo_tokens", "8", "--test_tokens", "16"])
    report = json.loads(out.read_text())
    assert status == 0 and report["complete"] and report["missing"] == []
    for recipe in ("release", "improved"):
        stages = {"base", "sft", "dpo", "grpo"} | ({"control"} if recipe == "improved" else set())
        assert set(report["results"][recipe]) == stages
        for figures in report["results"][recipe].values():
            overall = figures["overall"]
            assert overall["tasks"] == 40
            assert overall["function_acc"]["low"] <= overall["function_acc"]["mean"] <= overall["function_acc"]["high"]
    names = [c["name"] for c in report["comparisons"]]
    assert "release: sft vs base" in names and "dpo: improved vs release" in names
    assert "improved: control vs sft" in names
    table = out.with_suffix(".md").read_text()
    assert out.with_suffix(".yaml").is_file() and "| recipe | stage |" in table
    assert "improved: DPO beats SFT? **" in table and "| improved | " in table.split("Why the stages")[1]
