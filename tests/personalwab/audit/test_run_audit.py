"""The run audit: what the agent was given that a deployed agent would not have, per task; the strict
protocol removes what it can; the counts reach the header, validate's flags and the audit command."""

from __future__ import annotations

import json

import pytest

from PersonalWAB.audit.run import RunTexts, run_summary, task_privileges
from PersonalWAB.envs.users.offline_user import OfflineUser
from PersonalWAB.leaderboard.validate import PRIVILEGED, validate_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run

MULTI = {"user_mode": "naive", "max_steps": 5}


def record(messages: list[str], kind: str = "search", actions: list[str] | None = None, **info):
    traj = [{"role": "system", "content": "s"}, {"role": "user", "content": "USER U1: find it"}]
    for message in messages:
        traj += [{"role": "assistant", "content": "which one?"}, {"role": "user", "content": message}]
    return {"task_id": 0, "trial": 0, "action_acc": [], "res_acc": [], "traj": traj,
            "info": {"task": {"user_id": "U1", "task": "find it", "type": kind, "timestamp": 1, "target": "B0TARGET01"},
                     "actions": [{"name": name, "arguments": {}} for name in actions or []], "usage": {}, **info}}


TEXTS = RunTexts.of({})


def test_user_messages_naming_the_target_are_counted_and_the_first_observation_is_not():
    leaky = record(["it is b0target01, the blue one", "no idea"])
    assert task_privileges(leaky, MULTI, TEXTS)["user_messages_naming_target"] == 1
    first = record([])
    first["traj"][1]["content"] = "USER U1: find it\nProduct B0TARGET01"  # the environment's, not the user's
    assert task_privileges(first, MULTI, TEXTS)["user_messages_naming_target"] == 0
    assert task_privileges(leaky, {"user_mode": "no"}, TEXTS)["user_messages_naming_target"] == 0  # no user


def test_masked_messages_and_a_clean_run_count_zero_reaching_the_agent():
    masked = record(["it is [masked]"], leak_guard=[{"step": 1, "masked": ["target_asin"], "message": "[masked]"}])
    privileges = task_privileges(masked, MULTI, TEXTS)
    assert privileges["user_messages_naming_target"] == 0 and privileges["leak_guard_masked"] == 1
    summary = run_summary(MULTI, [record(["nothing to see"])])
    assert all(value == {"tasks": 0, "count": 0} for value in summary["privileged_inputs"].values())


@pytest.mark.parametrize(("settings", "privileged"), [
    ({"agent_strategy": "puma", "recipe": "release", "agent_settings": {"outputs": "generated"}}, True),
    ({"agent_strategy": "puma", "recipe": "improved", "agent_settings": {"outputs": "generated"}}, False),
    ({"agent_strategy": "puma", "recipe": "improved", "agent_settings": {"outputs": "files"}}, True),
    ({"agent_strategy": "function_calling"}, False),
])
def test_puma_memory_formatted_for_the_true_type_is_read_from_the_run_args(settings, privileged):
    wrong = record([], kind="review", actions=["search_product_by_query"])
    summary = run_summary({"user_mode": "no", **settings}, [wrong, record([], actions=["search_product_by_query"])])
    counts = summary["privileged_inputs"]
    assert counts["memory_by_true_type"]["tasks"] == (2 if privileged else 0)
    assert counts["memory_by_true_type_decisive"]["tasks"] == (1 if privileged else 0)
    assert ("memory_by_true_type" in summary["remaining"]) is privileged


@pytest.fixture()
def leaking_user(monkeypatch):
    """The offline user, made to give away the target's ASIN in every reply."""
    original = OfflineUser.reply
    monkeypatch.setattr(OfflineUser, "reply", lambda self, message: original(self, message)
                        + f" It is {self.product['parent_asin']}.")


@pytest.mark.parametrize("strict", [False, True])
def test_strict_removes_the_leaking_messages_and_the_header_says_so(leaking_user, tiny_data_dir, tiny_engines, tmp_path,
                                                                   strict, capsys):
    config = RunConfig(data_dir=str(tiny_data_dir), out=str(tmp_path / "r.json"), agent_memory="last",
                       search_backend="bm25s", end_index=4, max_steps=4, user_mode="offline", strict=strict)
    header, path, _ = run(config, log=lambda _: None)
    counts = header["audit"]["privileged_inputs"]
    if strict:
        assert counts["user_messages_naming_target"]["tasks"] == 0 and counts["leak_guard_masked"]["tasks"] > 0
        assert header["audit"]["removed"] == ["user_messages_naming_target"]
        assert any("strict" in line for line in header["run_args"]["protocol"]["departures"])
    else:
        assert counts["user_messages_naming_target"]["tasks"] > 0 and counts["leak_guard_masked"]["tasks"] == 0
    report = validate_file(path)
    assert report.valid and (PRIVILEGED in report.flags) is not strict
    from PersonalWAB.audit.cli import main

    assert main([str(path), "--format", "json"]) == 0
    audited = json.loads(capsys.readouterr().out)["runs"][0]
    assert audited["summary"] == header["audit"]


def test_a_tampered_audit_is_an_error(result_file, tmp_path):
    content = json.loads(result_file.read_text())
    content[0]["audit"]["privileged_inputs"]["leak_guard_masked"]["tasks"] = 3
    tampered = tmp_path / "t.json"
    tampered.write_text(json.dumps(content))
    report = validate_file(tampered)
    assert not report.valid and any("header audit." in p.message for p in report.problems)
