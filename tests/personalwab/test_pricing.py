"""What a run says about money (`PersonalWAB.pricing`): the agent's and the user's cost under the
results table, a warning when a server of one's own is billed at a hosted model's price, the run's
own rate, and an unpriced model named as such."""

from __future__ import annotations

import pytest

from PersonalWAB.pricing import (Rate, cost_lines, hosted_price_warning, is_local_endpoint, parse_rate,
                                 warn_hosted_prices)
from PersonalWAB.runner.cli import main as run_main
from devtools.doubles.responders import conversation
from devtools.doubles.scripted_server import ScriptedLLMServer


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.mark.parametrize("url,local", [("http://127.0.0.1:8000/v1", True), ("http://localhost:11434", True),
                                       ("http://10.1.2.3/v1", True), ("http://192.168.0.7:8000/v1", True),
                                       ("http://[::1]:8000/v1", True), ("https://api.openai.com/v1", False),
                                       ("https://8.8.8.8/v1", False), (None, False)])
def test_local_endpoints_are_this_machine_or_a_private_network(url, local):
    assert is_local_endpoint(url) is local


def test_a_rate_is_zero_or_two_numbers_per_million_tokens():
    assert parse_rate(None) is None
    assert parse_rate("0") == Rate(0.0, 0.0)
    assert parse_rate("0.15, 0.6").usd(1_000_000, 2_000_000) == pytest.approx((0.15, 1.2))
    for bad in ("free", "1", "1,2,3", "-1,2", "inf,1", "1e308,1e308", "10001,1"):
        with pytest.raises(ValueError, match="--user_price_per_mtok"):
            parse_rate(bad, "--user_price_per_mtok")


def test_a_price_that_would_make_the_cost_infinite_stops_the_run_before_it_starts(tiny_data_dir, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert run_main(["--data_dir", str(tiny_data_dir), "--out", str(out), "--agent_strategy", "function_calling",
                     "--model", "gpt-4o-mini", "--price_per_mtok", "1e308,1e308"]) == 2
    err = capsys.readouterr().err
    assert "--price_per_mtok '1e308,1e308': expected 0 or IN,OUT, two numbers from 0 to 10,000" in err
    assert err.count("\n") == 1 and not out.exists()


def test_a_loopback_server_priced_as_a_hosted_model_is_warned():
    warning = hosted_price_warning("gpt-4o-mini", "http://127.0.0.1:8000/v1", None)
    assert warning is not None and "--price_per_mtok 0" in warning and "$0.15" in warning
    assert hosted_price_warning("gpt-4o-mini", "http://127.0.0.1:8000/v1", "0") is None  # its own rate
    assert hosted_price_warning("gpt-4o-mini", "https://api.openai.com/v1", None) is None  # the provider
    assert hosted_price_warning("my-local-model", "http://127.0.0.1:8000/v1", None) is None  # not in the table


def test_each_hosted_price_warning_is_said_once(monkeypatch):
    class Settings:
        model, api_base, price_per_mtok = "gpt-4o-mini", "http://127.0.0.2:1/v1", None
        user_mode, user_model, user_api_base, user_price_per_mtok = "naive", "gpt-4o-mini", api_base, None

    said: list[str] = []
    warn_hosted_prices(Settings(), said.append)
    warn_hosted_prices(Settings(), said.append)
    assert [line.split()[1] for line in said] == ["--api_base", "--user_api_base"]


def test_cost_lines_name_the_agent_the_user_and_how_each_was_priced():
    run_args = {"model": "gpt-4o-mini", "api_base": "http://127.0.0.1:1/v1", "price_per_mtok": "0",
                "user_mode": "naive", "user_model": "my-user-model", "user_api_base": "http://127.0.0.1:1/v1",
                "user_price_per_mtok": None}
    [line] = cost_lines(0.0, 0.0, run_args)
    assert "agent $0.0000 (gpt-4o-mini at --price_per_mtok 0)" in line
    assert "user $0.0000 (my-user-model has no price in litellm's table: counted as 0" in line
    lines = cost_lines(1.5, 0.25, {**run_args, "user_price_per_mtok": "1,2"}, {"hits": 3, "saved_usd": 0.5})
    assert lines[0].startswith("cost: $1.75 = agent $1.50")
    assert lines[1] == "paid: $1.25; saved: $0.5000 (3 call(s) answered from the response cache)"
    fully_cached = cost_lines(0.0057, 0.0, {**run_args, "user_mode": "no"}, {"hits": 4, "saved_usd": 0.0057})
    assert fully_cached[1] == "paid: $0.0000; saved: $0.0057 (4 call(s) answered from the response cache)"
    assert cost_lines(0.0, 0.0, {"model": None, "user_mode": "offline"}) == []  # no model called


@pytest.mark.slow
def test_a_multi_turn_run_prints_agent_and_user_cost_and_the_hosted_price_warning(tiny_engines, tiny_data_dir,
                                                                                  tmp_path, capsys):
    with ScriptedLLMServer(conversation) as server:
        code = run_main(["--data_dir", str(tiny_data_dir), "--out", str(tmp_path / "run.json"),
                         "--agent_strategy", "function_calling", "--model", "gpt-4o-mini", "--api_base", server.url,
                         "--user_mode", "naive", "--user_model", "scripted-user", "--user_api_base", server.url,
                         "--user_price_per_mtok", "1,2", "--max_steps", "5", "--agent_memory", "none",
                         "--end_index", "2", "--quiet", "1"])
    assert code == 0
    out = capsys.readouterr().out
    assert "warning: --api_base" in out and "--price_per_mtok 0" in out
    [line] = [line for line in out.splitlines() if line.startswith("cost: ")]
    assert "agent $0.0" in line and "gpt-4o-mini, litellm's price table" in line
    assert "user $0.0" in line and "scripted-user at --user_price_per_mtok 1,2" in line
    assert "user $0.0000 " not in line  # the user simulator was called and priced
