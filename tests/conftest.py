"""Shared fixtures: one tiny synthetic PersonalWAB with its artefacts, built once per session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

import PersonalWAB  # noqa: F401  (first: it sets the OpenMP wait policy before any test loads torch)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.pop("PWAB_CACHE", None)  # a developer's response cache must not answer the tests' model calls
REPO_ROOT = Path(__file__).resolve().parent.parent
# Every process a test starts inherits this mark (this pytest process's pid; each xdist worker
# sets its own), so one that outlives its test is found even after its parent died and it was
# handed to init.
SESSION_MARK = "PWAB_TEST_PROCESS_OF"
os.environ[SESSION_MARK] = str(os.getpid())
HANG_GUARD_S = 600  # how long a wait on another process's state may take before the test fails as hung


def _started_here() -> dict[tuple[int, float], psutil.Process]:
    """The live processes this pytest process started: its descendants, and orphans that carry its mark."""
    me = psutil.Process()
    descendants = {child.pid for child in me.children(recursive=True)}
    found = {}
    for process in psutil.process_iter():
        try:
            if process.pid == me.pid or process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.pid in descendants or process.environ().get(SESSION_MARK) == os.environ[SESSION_MARK]:
                found[(process.pid, process.create_time())] = process
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def end_leftovers(before: dict[tuple[int, float], psutil.Process], grace_s: float = 10) -> list[str]:
    """End the processes started here since `before` that are still running (after `grace_s`
    for ones that are ending as the test ends); a line for each: its pid and command."""
    left = [process for key, process in _started_here().items() if key not in before]
    _, still = psutil.wait_procs(left, timeout=grace_s)
    described = []
    for process in still:
        try:
            described.append(f"pid {process.pid}: {' '.join(process.cmdline())[:200]}")
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(still, timeout=30)
    return described


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """Fail a test that leaves a process of its own running (a server, an indexer, a run it
    started), and end those processes so the next test starts clean."""
    before = _started_here()
    yield
    left = end_leftovers(before)
    if left:
        pytest.fail("the test left processes running:\n  " + "\n  ".join(left), pytrace=False)


def load_script(path: Path):
    """A script (`scripts/...py`) imported as a module named after its file, for tests of its parts."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def as_background_job(command: list[str]) -> list[str]:
    """`command` as a shell script's background job runs it: with SIGINT ignored, which the
    process inherits (Python then installs no Ctrl-C handler of its own)."""
    starter = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
               "os.execv(sys.argv[1], sys.argv[1:])")
    return [sys.executable, "-c", starter, *command]


def wait_until(condition: Callable[[], bool], process: subprocess.Popen, what: str) -> None:
    """Poll `condition` until it holds; fail if `process` ends first. The guard only ends a
    hung test: nothing here depends on how fast the machine is."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the process ended (exit {process.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"hung: still waiting for {what} after {HANG_GUARD_S} s")
        time.sleep(0.05)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the golden records (tests/puma/golden/) from what the code computes now")


@pytest.fixture(autouse=True)
def progress_shown_again():
    """A command run in this process with --quiet hides progress bars for the rest of the process:
    each test starts with them shown, whichever test ran before it on the same worker."""
    from PersonalWAB.progress import set_quiet

    set_quiet(False)
    yield
    set_quiet(False)


@pytest.fixture(scope="session", autouse=True)
def own_text_store(tmp_path_factory: pytest.TempPathFactory):
    """Embedding vectors the tests make go to a store of their own, not the checkout's."""
    import os

    from PersonalWAB.memory.embeddings import STORE_ENV

    saved = os.environ.get(STORE_ENV)
    os.environ[STORE_ENV] = str(tmp_path_factory.mktemp("text_store"))
    yield
    if saved is None:
        os.environ.pop(STORE_ENV, None)
    else:
        os.environ[STORE_ENV] = saved


@pytest.fixture(scope="session", autouse=True)
def no_default_pack(tmp_path_factory: pytest.TempPathFactory):
    """Tests run with the project's texts unless they pass a pack: a release pack placed in
    this checkout must not change what they see."""
    import PersonalWAB.protocol as protocol

    saved, saved_env = protocol.DEFAULT_PACK, os.environ.get(protocol.PACK_ENV)
    protocol.DEFAULT_PACK = tmp_path_factory.mktemp("no_pack") / "release_protocol.json"
    os.environ[protocol.PACK_ENV] = str(protocol.DEFAULT_PACK)  # for run.py subprocesses too
    protocol._LOADED.clear()
    yield
    protocol.DEFAULT_PACK = saved
    if saved_env is None:
        os.environ.pop(protocol.PACK_ENV, None)
    else:
        os.environ[protocol.PACK_ENV] = saved_env
    protocol._LOADED.clear()


@pytest.fixture(scope="session")
def fake_release_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in release checkout with made-up texts (tests/release_fixture.py)."""
    from release_fixture import write_release_tree

    return write_release_tree(tmp_path_factory.mktemp("fake_release"))


@pytest.fixture(scope="session")
def fake_pack(fake_release_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PersonalWAB.protocol.pack import build_pack, write_pack

    return write_pack(build_pack(fake_release_dir, allow_unpinned=True),
                      tmp_path_factory.mktemp("fake_pack") / "release_protocol.json")


@pytest.fixture(scope="session")
def fake_protocol(fake_pack: Path):
    from PersonalWAB.protocol import load_protocol

    return load_protocol(fake_pack)


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PersonalWAB.data.synthetic import generate_synthetic

    out = tmp_path_factory.mktemp("tiny")
    generate_synthetic(out, scale="tiny", seed=0)
    return out


@pytest.fixture()
def data_copy(tiny_data_dir: Path, tmp_path: Path) -> Path:
    """The tiny data files alone (no index, recommender or cache), free to edit."""
    target = tmp_path / "data"
    shutil.copytree(tiny_data_dir, target, ignore=shutil.ignore_patterns("indexes", "recommender", "cache"))
    return target


def rewrite(path: Path, change) -> None:
    """Edit a JSON data file in place: `change` gets its parsed content."""
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content))


def make_fifo(tmp_path: Path, name: str = "out.json") -> Path:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    return fifo


@pytest.fixture()
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


def copy_data_dir(source: Path, target: Path, artefacts: bool = False) -> Path:
    """A copy of a data folder, free to edit; with `artefacts` its indexes and recommender too (never its cache)."""
    skipped = ("cache",) if artefacts else ("indexes", "recommender", "cache")
    return Path(shutil.copytree(source, target, ignore=shutil.ignore_patterns(*skipped)))


def edit_in_place(path: Path, old: bytes, new: bytes, after: int = 0) -> None:
    """Replace the first `old` after byte `after` by `new` of the same length, keeping the
    file's size and modification time (what a size+mtime cache key cannot see)."""
    assert len(old) == len(new)
    stat = path.stat()
    raw = path.read_bytes()
    at = raw.index(old, after)
    path.write_bytes(raw[:at] + new + raw[at + len(old):])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)


def interrupt_heuristic_agent_at(monkeypatch: pytest.MonkeyPatch, task_id: int) -> None:
    """The offline agent raises KeyboardInterrupt (a Ctrl-C) when it starts task `task_id`."""
    from PersonalWAB.agents.heuristic import HeuristicAgent

    solve = HeuristicAgent.solve

    def interrupted(self, env, index):
        if index == task_id:
            raise KeyboardInterrupt
        return solve(self, env, index)

    monkeypatch.setattr(HeuristicAgent, "solve", interrupted)


def llm_run(data_dir: Path, output: Path, api_base: str, *extra: str) -> list[str]:
    return ["--data_dir", str(data_dir), "--out", str(output), "--agent_strategy", "function_calling",
            "--model", "scripted", "--api_base", api_base, "--agent_memory", "none", *extra]


@pytest.fixture(scope="session")
def tiny_data(tiny_data_dir: Path):
    from PersonalWAB.data.loader import load_benchmark_data

    return load_benchmark_data(tiny_data_dir)


@pytest.fixture(scope="session")
def tiny_engines(tiny_data):
    """Engines over tiny data with both search indexes and a trained SASRec."""
    from PersonalWAB.build import build_artifacts
    from PersonalWAB.engines.shared import shared_engines

    build_artifacts(tiny_data, ("lucene", "bm25s"), recommender=True, log=lambda _: None)
    return shared_engines(tiny_data, "lucene")


@pytest.fixture(scope="session")
def result_file(tiny_data_dir: Path, tiny_engines, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of three tasks (the offline agent, no memory): a valid result file to read, never to change."""
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    out = tmp_path_factory.mktemp("results") / "result.json"
    config = RunConfig(data_dir=str(tiny_data_dir), out=str(out), agent_memory="none", search_backend="bm25s",
                       end_index=3)
    return run(config, log=lambda _: None)[1]


@pytest.fixture(scope="module")
def format_error_run(tiny_data_dir, tiny_engines, tmp_path_factory):
    """A run whose model always sends tool arguments that are not a JSON object (3 tasks)."""
    from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
    from PersonalWAB.runner.cli import main

    output = tmp_path_factory.mktemp("format") / "r.json"
    with ScriptedLLMServer([ScriptedReply(tool_calls=[("search_product_by_query", "[1, 2]")])]) as server:
        code = main(llm_run(tiny_data_dir, output, server.url, "--end_index", "3"))
    return code, output


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with a tokenizer trained on the tiny data (PUMA tests)."""
    from PUMA.tiny_model import make_tiny_model

    return make_tiny_model(tiny_data_dir, tmp_path_factory.mktemp("tiny_llama"))


class HashEncoder:
    """Deterministic unit vectors in place of MiniLM, for tests that need a relevance ranking
    to exist, not its quality (MiniLM on PUMA's long behaviour texts takes minutes on a CPU)."""

    def encode(self, texts: list[str]):
        import numpy as np

        rows = np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(384) for t in texts])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="session")
def tiny_puma_data(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny data in a copy whose relevance caches (PUMA's and the agents' behaviour
    texts) come from `HashEncoder`."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory.embeddings import BehaviourEmbeddings
    from PersonalWAB.protocol import load_protocol

    copy = shutil.copytree(tiny_data_dir, tmp_path_factory.mktemp("tiny_puma") / "data",
                           ignore=shutil.ignore_patterns("cache", "indexes", "recommender"))
    data = load_benchmark_data(copy)
    for template in ("puma.behaviour", "memory.behaviour"):
        BehaviourEmbeddings(data, load_protocol(), HashEncoder(), template=template).ensure(log=None)
    return data
