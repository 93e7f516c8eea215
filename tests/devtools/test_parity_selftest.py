"""The parity self-test's own machinery: every injection still matches the code it edits, a
copy of the tree holds the sources and nothing ignored, and the verdict needs every named
item to report its injection (the full cheap run is a CI step: scripts/tools/parity_selftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.parity.selftest import (INJECTIONS, Injection, Outcome, SelfTestError, check_injection, inject,
                                      source_files, tree_copy, unreported)
from tests.conftest import REPO_ROOT

REQUIRED = {"top_p", "top_k", "LoRA dropout default", "DPO beta", "learning-rate schedule", "epochs",
            "memory cut length", "recommend ASIN order", "empty review scored as the placeholder",
            "num_return_sequences default", "max_new_tokens default", "recipe LoRA rank",
            "recipe generation temperature", "recipe global batch"}


def test_every_injection_matches_its_code_once() -> None:
    assert {injection.name for injection in INJECTIONS} >= REQUIRED
    # changes of values, not only of code: the release recipe file and the steps' documented defaults
    assert {"PUMA/configs/release.yaml", "PUMA/generate.py", "PUMA/lora.py"} <= {i.path for i in INJECTIONS}
    for injection in INJECTIONS:
        check_injection(injection)
        assert injection.old != injection.new and injection.probe_items and injection.items


def test_an_injection_that_no_longer_matches_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("x = 1\nx = 1\n")
    twice = Injection("twice", "f.py", "x = 1", "x = 2", {"generation": ("a",)}, ("a",), "3")
    with pytest.raises(SelfTestError, match="'twice': f.py holds its text 2 times"):
        inject(twice, tmp_path)
    gone = Injection("gone", "f.py", "y = 1", "y = 2", {"generation": ("a",)}, ("a",), "3")
    with pytest.raises(SelfTestError, match="0 times"):
        check_injection(gone, tmp_path)
    once = Injection("once", "f.py", "x = 1\nx", "x = 3\nx", {"generation": ("a",)}, ("a",), "3")
    inject(once, tmp_path)
    assert (tmp_path / "f.py").read_text() == "x = 3\nx = 1\n"


def test_a_copy_holds_the_sources_and_nothing_ignored(tmp_path: Path) -> None:
    names = source_files()
    assert "PUMA/modeling.py" in names and "devtools/parity/probe.py" in names
    assert not any(name.startswith((".venv/", "data/")) for name in names)
    copy = tree_copy(tmp_path / "copy")
    assert (copy / "PUMA/modeling.py").read_text() == (REPO_ROOT / "PUMA/modeling.py").read_text()


def test_the_verdict_needs_every_named_item_to_report() -> None:
    assert unreported(("SFT training", "DPO training"), ["SFT training losses"]) == ["DPO training"]
    outcome = Outcome(clean={"sft": True}, detected={"a": ["SFT training losses"]}, missed={"a": []})
    assert outcome.passed
    outcome.missed["b"], outcome.detected["b"] = ["DPO training"], []
    assert not outcome.passed and any("NOT REPORTED" in line for line in outcome.lines())
    # a probe whose two clean runs differ would "detect" anything: the self-test fails
    assert not Outcome(clean={"sft": False}, detected={"a": ["x"]}, missed={"a": []}).passed
