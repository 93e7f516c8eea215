"""Derived artefacts follow the content they were built from: the parsed-data cache, one
search index per product text and products, builds that never disturb a reader, Ctrl-C
during a Lucene build, and damaged cache files that are named and rebuilt."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import HANG_GUARD_S, REPO_ROOT, HashEncoder, as_background_job, wait_until
from PersonalWAB.build import build_artifacts
from PersonalWAB.data.loader import PARSED_CACHE, load_benchmark_data
from PersonalWAB.engines.search import BACKENDS, build_index, search_index_dir
from PersonalWAB.engines.search.common import index_record
from PersonalWAB.engines.shared import Engines
from PersonalWAB.errors import EngineError
from PersonalWAB.protocol import load_protocol
from PersonalWAB.scratch import SCRATCH_NAME, pid_alive

QUERIES = ["wireless headphones", "kitchen knife set", "running shoes for women", "camera"]


def _copy(source: Path, target: Path, artefacts: bool = False) -> Path:
    skipped = ("cache",) if artefacts else ("indexes", "recommender", "cache")
    return Path(shutil.copytree(source, target, ignore=shutil.ignore_patterns(*skipped)))


def _edit_in_place(path: Path, old: bytes, new: bytes, after: int = 0) -> None:
    """Replace the first `old` after byte `after` by `new` of the same length, keeping the
    file's size and modification time (what a size+mtime cache key cannot see)."""
    assert len(old) == len(new)
    stat = path.stat()
    raw = path.read_bytes()
    at = raw.index(old, after)
    path.write_bytes(raw[:at] + new + raw[at + len(old):])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)


def _edit_first_test_instruction(data_dir: Path) -> str:
    """Change one letter of the test split's first instruction in place; return the new text."""
    path = data_dir / "user_instructions.json"
    text = json.loads(path.read_text())["test"][0]["task"]
    at = next(i for i, c in enumerate(text) if c.isascii() and c.isalpha())
    edited = text[:at] + ("x" if text[at] != "x" else "y") + text[at + 1:]
    raw = path.read_bytes()
    _edit_in_place(path, json.dumps(text)[1:-1].encode(), json.dumps(edited)[1:-1].encode(),
                   after=raw.index(b'"test"'))
    return edited


def _edit_first_product_title(data_dir: Path) -> str:
    path = data_dir / "all_products_part_1.json"
    title = next(iter(json.loads(path.read_text()).values()))["title"]
    at = next(i for i, c in enumerate(title) if c.isascii() and c.isalpha())
    edited = title[:at] + ("q" if title[at] != "q" else "z") + title[at + 1:]
    _edit_in_place(path, json.dumps(title)[1:-1].encode(), json.dumps(edited)[1:-1].encode())
    return edited


# ----------------------------------------------------------------------------- parsed-data cache


def test_an_instruction_edited_with_the_same_size_and_mtime_is_seen_by_the_next_load(tiny_data_dir, tmp_path):
    data_dir = _copy(tiny_data_dir, tmp_path / "data")
    before = load_benchmark_data(data_dir, reload=True)
    assert (data_dir / "cache" / PARSED_CACHE).exists()
    edited = _edit_first_test_instruction(data_dir)
    after = load_benchmark_data(data_dir, reload=True)
    assert after.split("test")[0]["task"] == edited != before.split("test")[0]["task"]
    assert after.fingerprint != before.fingerprint
    assert after.products_fingerprint == before.products_fingerprint  # the products did not change


def test_validate_sees_an_instruction_edited_with_the_same_size_and_mtime(tiny_engines, tiny_data_dir, tmp_path):
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    data_dir = _copy(tiny_data_dir, tmp_path / "data", artefacts=True)
    config = RunConfig(data_dir=str(data_dir), out=str(tmp_path / "result.json"), end_index=2,
                       search_backend="bm25s")
    _, result, _ = run(config, log=lambda _: None)

    def validate() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "PersonalWAB.leaderboard", "validate", str(result),
                               "--data_dir", str(data_dir)], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=HANG_GUARD_S)

    assert validate().returncode == 0
    edited = _edit_first_test_instruction(data_dir)
    checked = validate()
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "does not match task 0 of the test split" in checked.stdout and repr(edited) in checked.stdout


def test_a_garbage_parsed_data_cache_is_named_and_rebuilt(tiny_data_dir, tmp_path, capsys):
    data_dir = _copy(tiny_data_dir, tmp_path / "data")
    expected = load_benchmark_data(data_dir, reload=True)
    cache = data_dir / "cache" / PARSED_CACHE
    for garbage in (b"\x00garbage", json.dumps({"key": 1}).encode(), b""):
        cache.write_bytes(garbage)
        assert load_benchmark_data(data_dir, reload=True).tasks == expected.tasks
        assert f"warning: {cache}:" in capsys.readouterr().err
    load_benchmark_data(data_dir, reload=True)
    assert "warning" not in capsys.readouterr().err  # rewritten whole


# ----------------------------------------------------------------------------- search indexes


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.slow
def test_a_reader_keeps_its_results_while_other_builds_happen(backend, tiny_engines, tiny_data_dir, tmp_path):
    data_dir = _copy(tiny_data_dir, tmp_path / "data", artefacts=True)  # the fixture's indexes come along
    protocol = load_protocol()
    data = load_benchmark_data(data_dir, reload=True)
    reader = Engines(data, backend, protocol).search
    results = reader.batch_search(QUERIES)
    contents = reader.contents([asin for hits in results for asin in hits])
    opened = reader.index_dir

    title = _edit_first_product_title(data_dir)  # new products: a new folder, the open one untouched
    edited = load_benchmark_data(data_dir, reload=True)
    assert build_artifacts(edited, (backend,), recommender=False, protocol=protocol, log=lambda _: None)
    rebuilt = search_index_dir(edited, backend, protocol)
    assert rebuilt != opened and opened.is_dir()
    asin = next(iter(json.loads((data_dir / "all_products_part_1.json").read_text())))
    assert title in Engines(edited, backend, protocol).search.contents([asin])[0]

    # the open folder itself rebuilt (--force): the reader still reads what it opened
    build_index(backend, data.products, opened, protocol.product_block, protocol.contents_fingerprint,
                products_fingerprint=data.products_fingerprint)
    assert reader.batch_search(QUERIES) == results
    assert reader.contents([asin for hits in results for asin in hits]) == contents
    assert not [p for p in opened.parent.iterdir() if SCRATCH_NAME.match(p.name)]


def test_an_index_of_other_products_is_refused_naming_the_build_command(tiny_data_dir, tmp_path):
    data_dir = _copy(tiny_data_dir, tmp_path / "data")
    protocol = load_protocol()
    data = load_benchmark_data(data_dir, reload=True)
    build_artifacts(data, ("bm25s",), recommender=False, protocol=protocol, log=lambda _: None)
    old_index = search_index_dir(data, "bm25s", protocol)
    _edit_first_product_title(data_dir)
    edited = load_benchmark_data(data_dir, reload=True)
    assert index_record(old_index)["products"] == data.products_fingerprint != edited.products_fingerprint
    with pytest.raises(EngineError, match="built from other products") as refused:
        Engines(edited, "bm25s", protocol, search_index=old_index).search
    assert str(old_index) in str(refused.value) and "python -m PersonalWAB.build" in str(refused.value)
    with pytest.raises(EngineError, match="no bm25s index here"):  # its own is not built yet
        Engines(edited, "bm25s", protocol).search


def test_runs_with_and_without_the_release_pack_keep_their_own_index(tiny_data_dir, tmp_path, fake_protocol):
    data = load_benchmark_data(_copy(tiny_data_dir, tmp_path / "data"), reload=True)
    project = load_protocol()
    for protocol in (project, fake_protocol):
        assert "bm25s_index" in build_artifacts(data, ("bm25s",), recommender=False, protocol=protocol,
                                                log=lambda _: None)
    for protocol in (project, fake_protocol):  # neither rebuilt the other's
        assert build_artifacts(data, ("bm25s",), recommender=False, protocol=protocol, log=lambda _: None) == {}
    folders = {search_index_dir(data, "bm25s", p) for p in (project, fake_protocol)}
    assert len(folders) == 2 and all(folder.is_dir() for folder in folders)
    asin = next(iter(data.products))
    for protocol in (project, fake_protocol):
        shown = Engines(data, "bm25s", protocol).search.contents([asin])[0]
        assert shown == protocol.product_block(data.products[asin])


# ----------------------------------------------------------------------------- Ctrl-C during a Lucene build

INTERRUPTED_BUILD = textwrap.dedent("""
    import sys
    from PersonalWAB.cli import run_command
    from PersonalWAB.engines.search import build, lucene

    pid_file = sys.argv[2]
    # an indexer that would run for ten minutes, writing its pid once started
    lucene._indexer_command = lambda collection, index, threads, counts: [
        sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)",
        pid_file]
    sys.exit(run_command(build.main, ["--data_dir", sys.argv[1], "--backend", "lucene"]))  # as `python -m` runs it
""")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_lucene_build_stops_it_and_leaves_nothing(tiny_data_dir, tmp_path, stop):
    """Started as a script's background job (SIGINT ignored, which Python would honour), the build
    still stops on Ctrl-C or SIGTERM, kills the indexer it started and leaves no scratch. The
    signal is sent once the indexer runs: the build installed its handler before starting it."""
    data_dir = _copy(tiny_data_dir, tmp_path / "data")
    pid_file = tmp_path / "indexer.pid"
    build = subprocess.Popen(as_background_job([sys.executable, "-c", INTERRUPTED_BUILD, str(data_dir), str(pid_file)]),
                             cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: pid_file.exists() and bool(pid_file.read_text()), build, "the indexer started")
        indexer = int(pid_file.read_text())
        build.send_signal(stop)
        out, err = build.communicate(timeout=HANG_GUARD_S)
    finally:
        build.kill()
    assert build.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not pid_alive(indexer), "the indexer was left running"
    assert not list((data_dir / "indexes" / "lucene").iterdir())  # no scratch, no half-built index


# ----------------------------------------------------------------------------- damaged caches


def test_garbage_behaviour_embedding_caches_are_named_and_rebuilt(tiny_data_dir, tmp_path, capsys):
    from PersonalWAB.memory.embeddings import BehaviourEmbeddings

    data = load_benchmark_data(_copy(tiny_data_dir, tmp_path / "data"), reload=True)
    protocol = load_protocol()
    BehaviourEmbeddings(data, protocol, HashEncoder()).ensure(log=None)
    cache_dir = data.artifacts.cache_dir
    matrix_file = next(cache_dir.glob("behaviour_embeddings_*.npy"))
    index_file = cache_dir / "instruction_embeddings.json"
    expected = np.load(matrix_file)
    matrix_file.write_bytes(matrix_file.read_bytes()[:1000])  # truncated
    index_file.write_text("{not json")
    capsys.readouterr()
    rebuilt = BehaviourEmbeddings(data, protocol, HashEncoder())
    rebuilt.ensure(log=None)
    err = capsys.readouterr().err
    assert f"warning: {matrix_file}:" in err and f"warning: {index_file}:" in err
    user = sorted(data.histories)[0]
    assert np.array_equal(rebuilt.behaviours(user), expected[:len(data.histories[user])])
    BehaviourEmbeddings(data, protocol, HashEncoder()).ensure(log=None)
    assert "warning" not in capsys.readouterr().err


def test_a_garbage_text_store_is_named_and_written_whole_again(tmp_path, capsys):
    from PersonalWAB.memory.embeddings import TextStore, text_digests

    store = TextStore(tmp_path, "model")
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"PK\x03\x04 not a zip")
    digests = text_digests(["one", "two"])
    found, _ = store.lookup(digests)
    assert not found.any() and f"warning: {store.path}:" in capsys.readouterr().err
    vectors = HashEncoder().encode(["one", "two"])
    store.add(digests, vectors)
    capsys.readouterr()
    found, stored = store.lookup(digests)
    assert found.all() and np.array_equal(stored, vectors)
    assert "warning" not in capsys.readouterr().err


def test_a_garbage_review_cache_is_named_and_rewritten(tmp_path, capsys):
    from PersonalWAB.engines.text_embedding import TextEmbedder

    cache_file = tmp_path / "review_targets.npz"
    cache_file.write_bytes(b"garbage")
    embedder = TextEmbedder()
    embedder.encode = lambda texts, progress=False: HashEncoder().encode(texts)  # no model needed
    assert embedder.remember(["a review", "another"], cache_file=cache_file) == 2
    assert f"warning: {cache_file}:" in capsys.readouterr().err
    again = TextEmbedder()
    again.encode = lambda texts, progress=False: np.zeros((0, 384), dtype=np.float32) if not texts else \
        pytest.fail("the rewritten cache should hold them")
    assert again.remember(["a review", "another"], cache_file=cache_file) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_truncated_onnx_export_is_removed_and_exported_again(tmp_path, monkeypatch, capsys):
    import onnx
    from onnx import TensorProto, helper

    from PersonalWAB.digests import record_digest
    from PersonalWAB.engines import text_embedding

    graph = tmp_path / "onnx" / "minilm.onnx"
    graph.parent.mkdir()
    graph.write_bytes(b"\x08\x07\x12\x0bpartial")  # the first bytes of a graph, cut off
    record_digest(graph)  # cut off as it was written: only loading it shows the damage
    exports = []

    def export(model_path: Path, target: Path) -> None:  # a stand-in graph: the real export takes ~15 s
        exports.append(target)
        value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
        model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [value],
                                                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]),
                                  opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, str(target))

    monkeypatch.setattr(text_embedding, "onnx_model_file", lambda model_path, model_id: graph)
    monkeypatch.setattr(text_embedding, "export_onnx", export)
    encoder = text_embedding.OnnxMiniLM(text_embedding.default_model_path(), "test", 1)
    assert exports == [graph] and encoder.session.get_inputs()[0].name == "x"
    err = capsys.readouterr().err
    assert f"warning: {graph}: not a usable ONNX graph" in err and "exporting it again" in err


def test_build_command_keeps_old_spellings_reads_config_files_and_records_its_settings(tiny_data_dir, tmp_path,
                                                                                         monkeypatch, capsys):
    import PersonalWAB.build as build_command
    from PersonalWAB.settings import parse

    data_dir = _copy(tiny_data_dir, tmp_path / "data", artefacts=True)
    asked = {}
    monkeypatch.setattr(build_command, "build_artifacts", lambda data, backends, **options: asked.update(
        backends=backends, **options) or {})
    assert build_command.main(["--data_dir", str(data_dir), "--no_recommender", "--no_memory_embeddings",
                               "--search_backend", "bm25s"]) == 0
    err = capsys.readouterr().err
    assert "--no_recommender is deprecated; use --recommender 0" in err
    assert "--no_memory_embeddings is deprecated; use --memory_embeddings 0" in err
    assert asked["backends"] == ("bm25s",) and asked["recommender"] is False and asked["memory_embeddings"] is False
    record = json.loads((load_benchmark_data(data_dir).artifacts.cache_dir / "build_command.json").read_text())
    assert record["settings"]["recommender"] is False and record["settings"]["search_backend"] == "bm25s"
    config = tmp_path / "build.yaml"
    config.write_text(f"data_dir: {data_dir}\nrecommender: 0\nmemory_embeddings: false\nsearch_backend: bm25s\n")
    flags = ["--data_dir", str(data_dir), "--recommender", "0", "--memory_embeddings", "0", "--search_backend", "bm25s"]
    assert parse(build_command.BuildSettings, ["--config", str(config)]) == parse(build_command.BuildSettings, flags)
