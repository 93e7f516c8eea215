"""scripts/embedding_agreement.py end to end on the tiny data: bf16 against fp32 over a few test
tasks, their users' texts encoded at both precisions, and the offline agent's two runs."""

from __future__ import annotations

import json
from types import ModuleType

import pytest
from tests.conftest import REPO_ROOT, load_script

from PersonalWAB.engines.text_embedding import cpu_has_bf16

TASKS = 4


@pytest.fixture(scope="module")
def agreement() -> ModuleType:
    return load_script(REPO_ROOT / "scripts" / "embedding_agreement.py")


@pytest.mark.slow
@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no bf16 instructions")
def test_bf16_is_compared_with_fp32_task_by_task_and_by_result_acc(agreement, tiny_engines, tiny_data_dir, tmp_path,
                                                                   capsys):
    out = tmp_path / "agreement.json"
    assert agreement.main(["--data_dir", str(tiny_data_dir), "--end_index", str(TASKS), "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    identity = figures["memory_identity"]["test"]
    assert identity["tasks"] == TASKS and 0 <= identity["same_list"] <= identity["same_set"] <= TASKS
    assert figures["encodings"]["fp32"]["what"] == "the tasks' users' texts"  # not the whole caches
    assert 0 < figures["memory_identity"]["score_difference"]["max"] < 1e-2
    for precision in ("fp32", "bf16"):
        run = figures["runs"][precision]
        low, high = run["interval_95"]
        assert run["tasks"] == TASKS and low <= run["result_acc"] <= high
    low, high = figures["runs"]["difference_interval_95"]
    assert -1 <= low <= high <= 1
    table = capsys.readouterr().out
    assert f"the first {TASKS} test tasks" in table and f"| {tiny_data_dir.name} | " in table
    assert not list(tiny_data_dir.glob("cache/*_bf16.*"))  # a comparison over some tasks writes no cache
