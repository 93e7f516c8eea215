"""What a PUMA step run by hand shows: one line for a model it cannot load or a label endpoint
that fails, the label requests' progress and cost, the loss while training, and no library
warnings."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from PersonalWAB.errors import DataError
from PUMA.quiet import VERBOSITY_ENV
from tests.conftest import HANG_GUARD_S, REPO_ROOT


class HubAnswering503:
    """A stand-in hub on 127.0.0.1 that answers every request 503 and counts them."""

    def __init__(self) -> None:
        owner = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
                owner.requests += 1
                self.send_response(503)
                self.end_headers()

            do_GET = do_HEAD

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> HubAnswering503:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def online(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The hub switched on, with an empty cache of its own (the suite runs offline)."""
    from huggingface_hub import constants

    from PUMA import modeling

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))
    modeling.hub_problem.cache_clear()
    yield constants
    modeling.hub_problem.cache_clear()


def test_a_hub_id_the_hub_cannot_serve_is_one_request_and_one_line(online, monkeypatch: pytest.MonkeyPatch):
    from PUMA.modeling import checked_tokenizer, load_tokenizer

    with HubAnswering503() as hub:
        monkeypatch.setattr(online, "ENDPOINT", hub.url)
        with pytest.raises(DataError) as raised:
            checked_tokenizer("nobody/no-such-model")
        with pytest.raises(DataError):
            load_tokenizer("nobody/no-such-model")  # every load goes through the same check
    message = str(raised.value)
    assert message == (f"--model_path nobody/no-such-model: not a local folder, and the Hugging Face hub ({hub.url}) "
                       "answered HTTP 503: give a local model folder, or check the network (HF_ENDPOINT, proxy "
                       "settings); with HF_HUB_OFFLINE=1 a copy in the hub cache is used")
    assert hub.requests == 1  # one probe, never retried, and its verdict reused by the second load


def test_offline_without_a_cached_copy_says_so():
    from PUMA.modeling import local_files_only

    assert os.environ["HF_HUB_OFFLINE"] == "1"  # the suite's setting
    with pytest.raises(DataError, match="HF_HUB_OFFLINE is set but the hub cache has no copy of it: give a local "
                                        "model folder"):
        local_files_only("nobody/no-such-model", "--model_path")
    with pytest.raises(DataError, match=r"^--model_path \./missing: no such model folder$"):
        local_files_only("./missing", "--model_path")


def test_a_step_with_an_unreachable_hub_model_ends_in_one_line(tiny_data_dir: Path, tmp_path: Path):
    with socket.socket() as closed:  # a port nothing listens on: the hub refuses connections
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HOME=str(tmp_path / "hf_home"))
    done = subprocess.run([sys.executable, "-m", "PUMA.data", "param", "--model_path", "some-org/some-model",
                           "--data_dir", str(tiny_data_dir), "--out_dir", str(tmp_path / "out")],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: --model_path some-org/some-model: not a local folder, and the Hugging Face hub "
        f"(http://127.0.0.1:{port}) refuses connections: give a local model folder, or check the network "
        "(HF_ENDPOINT, proxy settings); with HF_HUB_OFFLINE=1 a copy in the hub cache is used")
    assert "Traceback" not in done.stderr and "Retrying" not in done.stderr  # no hub retry loop ran
    assert not (tmp_path / "out").exists()


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


LOSS_LINE = r"^{step} step 1/(\d+) \(\d+%\), epoch \d+\.\d\d: loss \d+\.\d{{4}}, lr \d\.\d\de[-+]\d\d"


@pytest.mark.slow
def test_sft_and_dpo_show_their_loss_and_keep_its_history(tiny_data, tiny_model_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture):
    from PUMA.data import function_examples
    from PUMA.dpo import DPOStepConfig, train_dpo
    from PUMA.modeling import write_json
    from PUMA.sft import SFTConfig, train_sft
    from PersonalWAB.protocol import load_protocol

    examples = function_examples(load_protocol(), tiny_data.split("train")[:4], "train")
    write_json(tmp_path / "function_train.json", examples)
    sft = train_sft(SFTConfig(model_path=str(tiny_model_dir), train_on="function",
                              function_data=str(tmp_path / "function_train.json"), output_dir=str(tmp_path / "sft"),
                              num_train_epochs=2, per_device_train_batch_size=2, gradient_accumulation_steps=1,
                              max_length=96, save_strategy="no", logging_steps=2))
    out = capsys.readouterr().out
    total = int(re.search(LOSS_LINE.format(step="sft"), out, re.MULTILINE).group(1))
    history = json.loads((sft / "puma_run.json").read_text())["loss_history"]
    assert [entry["step"] for entry in history] == [1, *range(2, total + 1, 2)]  # the first step, then every 2nd
    assert re.search(rf"^sft: {total} optimizer steps in \d+ s, mean training loss \d+\.\d{{4}}$", out, re.MULTILINE)
    assert "{'loss'" not in out  # no raw log dicts

    pairs = [{"prompt": e["prompt"], "chosen": e["label"], "rejected": "add_product_review"} for e in examples]
    write_json(tmp_path / "dpo.json", pairs)
    dpo = train_dpo(DPOStepConfig(model_path=str(tiny_model_dir), data_file=str(tmp_path / "dpo.json"),
                                  output_dir=str(tmp_path / "dpo"), num_train_epochs=1, per_device_train_batch_size=2,
                                  gradient_accumulation_steps=1, max_length=96, max_prompt_length=64,
                                  save_strategy="no", logging_steps=1))
    out = capsys.readouterr().out
    assert re.search(LOSS_LINE.format(step="dpo") + r", reward acc \d\.\d{4}, margin -?\d+\.\d{4}$", out, re.MULTILINE)
    assert json.loads((dpo / "puma_run.json").read_text())["loss_history"][0]["step"] == 1


QUIET_PROBE = """
import sys
from PUMA.cli import run_step

def warn(argv):
    import torch
    from transformers.utils import logging
    torch.tensor(torch.tensor([1.0]))  # torch's UserWarning: copy construct from a tensor
    logging.get_logger("transformers.probe").warning("a transformers warning")
    print("step done", file=sys.stderr)
    return 0

sys.exit(run_step(warn))
"""


@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.slow
def test_library_warnings_stay_out_of_a_step_unless_verbose(verbose: bool):
    # a step run in-process earlier in the session leaves its library verbosity variables behind
    env = {k: v for k, v in os.environ.items() if k not in ("PUMA_VERBOSE", "PYTHONWARNINGS", *VERBOSITY_ENV)}
    if verbose:
        env["PUMA_VERBOSE"] = "1"
    done = subprocess.run([sys.executable, "-c", QUIET_PROBE], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert "step done" in done.stderr
    leaked = ("copy construct from a tensor" in done.stderr, "a transformers warning" in done.stderr)
    assert leaked == ((True, True) if verbose else (False, False))
