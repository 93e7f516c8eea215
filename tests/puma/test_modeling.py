"""How a PUMA step loads its model (`PUMA.modeling`): a hub id the hub cannot serve, an offline
run without a cached copy and an unreachable hub each end in one line naming the model."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from PersonalWAB.errors import DataError
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
