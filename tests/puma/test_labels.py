"""Step 1's label requests (`PUMA.labels`): a label endpoint that fails or is not there ends the
step in one line naming it, and the requests show their progress and record their cost."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest


def _param_argv(tiny_puma_data, tiny_model_dir: Path, out: Path, url: str, model: str) -> list[str]:
    return ["param", "--data_dir", str(tiny_puma_data.data_dir), "--out_dir", str(out), "--model_path",
            str(tiny_model_dir), "--splits", "train", "--mem_token_length", "64", "--query_model", model,
            "--api_base", url, "--max_retries", "1"]


def _search_tasks(tiny_puma_data) -> int:
    return sum(task["type"] == "search" for task in tiny_puma_data.split("train"))


@pytest.fixture()
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_a_label_endpoint_answering_500_ends_in_one_line(tiny_puma_data, tiny_model_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture, no_provider_keys):
    from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
    from PersonalWAB.cli import run_command
    from PUMA.cli import STEP_BAD_INPUT
    from PUMA.data import main

    argv = _param_argv(tiny_puma_data, tiny_model_dir, tmp_path / "out", "URL", "openai/label-writer")
    with ScriptedLLMServer([ScriptedReply(status=500)]) as server:
        code = run_command(main, [server.url if a == "URL" else a for a in argv], STEP_BAD_INPUT)  # as `puma data`
    err = capsys.readouterr().err
    assert code == 1
    assert len(server.requests) == 2  # the client's retry of a transient error came first
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: search labels: the label endpoint {server.url} answered HTTP 500 to request 1 "
                           f"of {_search_tasks(tiny_puma_data)}, so the step stopped and wrote nothing (")
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "param_train.json").exists()


def test_a_label_endpoint_that_is_not_there_is_named_too(no_provider_keys):
    from PersonalWAB.llm import LLMClient
    from PUMA.labels import LabelRequestError, LabelRequests

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    requests = LabelRequests(LLMClient("openai/label-writer", api_base=url, max_retries=1), total=3)
    with pytest.raises(LabelRequestError, match=rf"^search labels: request 1 of 3 to the label endpoint {url} got no "
                                                rf"usable answer, so the step stopped and wrote nothing \(model "
                                                rf"endpoint {url} refuses connections"):
        requests.complete([{"role": "system", "content": "a label prompt"}])


def test_label_requests_show_progress_and_record_their_cost(tiny_puma_data, tiny_model_dir: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture, no_provider_keys):
    from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
    from PUMA.data import main

    reply = ScriptedReply(content="wireless earbuds", prompt_tokens=100, completion_tokens=5)
    with ScriptedLLMServer([reply]) as server:
        code = main(_param_argv(tiny_puma_data, tiny_model_dir, tmp_path / "out", server.url, "gpt-4o-mini"))
    out, err = capsys.readouterr()
    searches = _search_tasks(tiny_puma_data)
    assert code == 0 and searches > 0
    record = json.loads((tmp_path / "out" / "param_train.puma_run.json").read_text())
    cost = record["label_requests"]
    assert {k: cost[k] for k in ("model", "endpoint", "requests", "prompt_tokens", "completion_tokens")} == {
        "model": "gpt-4o-mini", "endpoint": server.url, "requests": searches, "prompt_tokens": 100 * searches,
        "completion_tokens": 5 * searches}
    assert cost["cost_usd"] > 0  # gpt-4o-mini is in litellm's price table
    assert f"search labels: {searches} requests to gpt-4o-mini, {100 * searches:,} prompt + {5 * searches:,} " \
           f"completion tokens, ${cost['cost_usd']:.4f}" in out
    said = out.index(f"{searches} search labels from gpt-4o-mini at {server.url}")
    assert said < out.index("search labels: ")  # what the requests are for is said before they start
    assert re.search(rf"search labels: 100% {searches}/{searches}", err)  # the bar's line, on stderr (not a tty)
