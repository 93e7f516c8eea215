"""Search engines: both backends built for real over a small catalogue this module writes; and the
tiny data's indexes, each kept to the products and texts it was built from, never disturbing a
reader while others are built, and stopped cleanly by Ctrl-C or SIGTERM during a Lucene build."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from PersonalWAB.build import build_artifacts
from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.engines.search import BACKENDS, SearchEngine, build, build_index, open_search_engine, search_index_dir
from PersonalWAB.engines.search.analyzer import analyze, lucene_stored_length
from PersonalWAB.engines.search.bm25s import BM25sSearchEngine
from PersonalWAB.engines.search.common import MAX_QUERY_TERMS, index_record
from PersonalWAB.engines.search.jvm import on_jvm
from PersonalWAB.engines.shared import Engines
from PersonalWAB.errors import DataError, EngineError, ToolArgumentError
from PersonalWAB.paths import ArtifactPaths
from PersonalWAB.protocol import load_protocol, project_protocol
from PersonalWAB.scratch import SCRATCH_NAME, pid_alive
from tests.conftest import HANG_GUARD_S, REPO_ROOT, as_background_job, copy_data_dir, edit_in_place, wait_until

PROTOCOL = project_protocol()

N_PRODUCTS = 50
# One made-up word per product, in its title only, so a query for it has one right answer.
UNIQUE_WORDS = [
    first + second + "ex"
    for first in ("zor", "vul", "qui", "bax", "nep")
    for second in ("tam", "rik", "sol", "dun", "fap", "gow", "hel", "jiv", "kon", "lum")
]
NOUNS = ["kettle", "backpack", "headphones", "lamp", "blender", "sneakers", "tent", "mug", "charger", "jacket"]
STORES = ["Acme", "Northwind", "Globex", "Initech", "Umbrella"]


def _product(i: int) -> dict:
    asin = f"B0TEST{i:04d}"
    noun = NOUNS[i % len(NOUNS)]
    return {
        "main_category": "Home & Kitchen",
        "title": f"{STORES[i % 5]} {noun.title()} {UNIQUE_WORDS[i].title()} Edition",
        "average_rating": 3.5 + (i % 3) / 2,
        "rating_number": 10 * i,
        "features": [f"Durable {noun} built for everyday use", "Lightweight design"] + ["Extra padding"] * (i % 4),
        "description": [f"A {noun} that the whole family will enjoy." + " Easy to clean." * (i % 7)],
        "price": None if i % 10 == 0 else ("None" if i % 10 == 1 else 9.99 + i),
        "store": STORES[i % 5],
        "categories": ["Home & Kitchen", noun.title()],
        "details": {"Brand": STORES[i % 5], "Color": ["Red", "Blue", "Black"][i % 3]},
        "parent_asin": asin,
    }


PRODUCTS = {product["parent_asin"]: product for product in map(_product, range(N_PRODUCTS))}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with the products and empty users, indexed by the build CLI."""
    directory = tmp_path_factory.mktemp("search_data")
    (directory / "all_products_part_1.json").write_text(json.dumps(PRODUCTS))
    (directory / "user_history_part_1.json").write_text("{}")
    (directory / "user_instructions.json").write_text(json.dumps({"train": [], "test": []}))
    (directory / "user_profiles.json").write_text("{}")
    assert build.main(["--data_dir", str(directory)]) == 0
    return directory


@pytest.fixture(scope="module")
def engines(data_dir: Path) -> dict[str, SearchEngine]:
    data = load_benchmark_data(data_dir)
    def contents_of(asin: str) -> str:
        return PROTOCOL.product_block(PRODUCTS[asin])

    return {backend: open_search_engine(backend, search_index_dir(data, backend, PROTOCOL), contents_of)
            for backend in BACKENDS}


@pytest.fixture(params=BACKENDS)
def search_engine(request: pytest.FixtureRequest, engines: dict) -> SearchEngine:
    return engines[request.param]


def test_cli_writes_indexes_where_engines_look_and_reports(data_dir: Path, tmp_path: Path, capsys) -> None:
    data = load_benchmark_data(data_dir)
    assert any(search_index_dir(data, "lucene", PROTOCOL).glob("segments_*"))
    assert (search_index_dir(data, "bm25s", PROTOCOL) / "params.index.json").is_file()
    out = tmp_path / "elsewhere"
    assert build.main(["--data_dir", str(data_dir), "--backend", "bm25s", "--out", str(out)]) == 0
    assert f"bm25s: {N_PRODUCTS} documents indexed into {out}" in capsys.readouterr().out
    assert BM25sSearchEngine(out, str).name == "bm25s"


def test_distinctive_word_finds_its_product_first(search_engine) -> None:
    for i in (0, 17, 49):
        assert search_engine.search(f"{UNIQUE_WORDS[i]} please", k=10)[0] == f"B0TEST{i:04d}"


def test_k_limits_the_results(search_engine) -> None:
    assert len(search_engine.search("durable lightweight", k=3)) == 3
    assert len(search_engine.search("durable lightweight")) == 10
    assert len(search_engine.search("durable lightweight", k=500)) == N_PRODUCTS
    with pytest.raises(ToolArgumentError):
        search_engine.search("lamp", k=0)


def test_backends_rank_identically(engines: dict) -> None:
    """bm25s scores with Lucene's stored document lengths and ASIN tie-breaks, so lists match."""
    queries = ["kettle easy to clean", "Acme red lamp with extra padding", "family jacket", "Blue 19.99",
               "price details"]
    assert engines["lucene"].batch_search(queries) == engines["bm25s"].batch_search(queries)


def test_only_stop_words_or_nothing_finds_nothing(search_engine) -> None:
    for query in ("the and of", "?!", "", "   \n\t"):
        assert search_engine.search(query) == []


def test_both_backends_show_the_contents_the_index_holds(engines: dict, data_dir: Path) -> None:
    hits = engines["lucene"].search("kettle easy to clean")
    assert engines["lucene"].contents(hits) == engines["bm25s"].contents(hits) == \
        [PROTOCOL.product_block(PRODUCTS[asin]) for asin in hits]
    data = load_benchmark_data(data_dir)
    for backend in BACKENDS:
        assert index_record(search_index_dir(data, backend, PROTOCOL))["contents"] == PROTOCOL.contents_fingerprint


@pytest.mark.parametrize("query", [
    '"unbalanced quote kettle', "title: (red OR blue", "AND", "NOT lamp -mug +tent && ||",
    "what? *wild* [bracket", "a:b) ] } { ~ ^2 \\ / kettle~0.8", "mug^3 field:value",
    "U.S.A. user's don't 1,000", "café ☕ 日本 ™",
])
def test_query_syntax_characters_are_plain_text(search_engine, query: str) -> None:
    assert isinstance(search_engine.search(query), list)


@pytest.mark.parametrize("query", [None, 42, ["lamp"]])
def test_queries_that_are_not_text_are_argument_errors(search_engine, query) -> None:
    with pytest.raises(ToolArgumentError, match="query must be a string"):
        search_engine.search(query)


def test_queries_longer_than_lucene_allows_fail_alike(search_engine) -> None:
    query = " ".join(f"word{i}" for i in range(MAX_QUERY_TERMS + 5))
    with pytest.raises(ToolArgumentError, match="distinct terms"):
        search_engine.search(query)


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_index_names_directory_and_build_command(tmp_path: Path, backend: str) -> None:
    index_dir = ArtifactPaths.for_data_dir(tmp_path).lucene_indexes / "texts-products" if backend == "lucene" \
        else tmp_path / "nowhere"
    with pytest.raises(DataError) as error:
        open_search_engine(backend, index_dir, str)
    message = str(error.value)
    assert str(index_dir) in message and "build_search_index.sh" in message and f"--backend {backend}" in message


def test_unknown_backend_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown search backend"):
        open_search_engine("elastic", tmp_path, str)


def test_concurrent_searches_match_sequential_ones(search_engine) -> None:
    queries = [f"{UNIQUE_WORDS[i]} {NOUNS[i % 10]} durable" for i in range(N_PRODUCTS)] * 4
    expected = [search_engine.search(query) for query in queries]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(search_engine.search, queries)) == expected
    assert search_engine.batch_search(queries) == expected


def test_analyzer_tokenises_like_lucene() -> None:
    """The bm25s analyzer against Anserini's DefaultEnglishAnalyzer on tricky text."""
    texts = [PROTOCOL.product_block(product) for product in list(PRODUCTS.values())[:5]] + [
        "The U.S.A. user's don't 1,000 3.5oz wi-fi e.g. running shoes' a:b café 10:30",
        "Nike™ Air® ½ ①② 日本語のテキスト 😀smile",
        "Technology technologies incredibly possibly assembly ecology I/O co-op x_y 12\"x8\" $19.99 50% AT&T",
    ]

    def lucene_terms(texts: list[str]) -> list[list[str]]:
        from pyserini.pyclass import autoclass

        analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
        utils = autoclass("io.anserini.analysis.AnalyzerUtils")
        return [list(utils.analyze(analyzer, text).toArray()) for text in texts]

    assert [analyze(text) for text in texts] == on_jvm(lucene_terms, texts)


def test_stored_lengths_follow_lucene_smallfloat() -> None:
    # Values read from org.apache.lucene.util.SmallFloat.byte4ToInt(intToByte4(n)).
    known = {0: 0, 23: 23, 39: 39, 40: 40, 41: 40, 59: 56, 100: 96, 665: 664, 1000: 984, 100000: 98328}
    assert {n: lucene_stored_length(n) for n in known} == known


def test_importing_the_engine_starts_no_jvm() -> None:
    code = (
        "import sys, PersonalWAB.engines.search.build, PersonalWAB.engines.search.lucene, "
        "PersonalWAB.engines.search.bm25s\n"
        "print(sorted(m for m in ('jnius', 'pyserini', 'bm25s') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_index_and_recommender_commands_keep_old_spellings_and_read_config_files(tmp_path: Path, capsys) -> None:
    from PersonalWAB.engines.recommender.train import SASRecTrainConfig, TrainPaths
    from PersonalWAB.settings import parse, parse_many

    index = parse(build.IndexSettings, ["--backend", "bm25s", "--index_dir", str(tmp_path / "ix")])
    train_paths, train = parse_many([TrainPaths, SASRecTrainConfig],
                                    ["--data_dir", "d", "--checkpoint", "m.pth", "--epochs", "3", "--num_threads", "1"])
    err = capsys.readouterr().err
    assert index.out == tmp_path / "ix" and "--index_dir is deprecated; use --out" in err
    assert train_paths.out == "m.pth" and train == SASRecTrainConfig(epochs=3, num_threads=1)
    assert "--checkpoint is deprecated; use --out" in err
    config = tmp_path / "index.yaml"
    config.write_text(f"backend: bm25s\nout: {tmp_path / 'ix'}\nthreads: 3\n")
    assert parse(build.IndexSettings, ["--config", str(config)]) == parse(
        build.IndexSettings, ["--backend", "bm25s", "--out", str(tmp_path / "ix"), "--threads", "3"])
    assert build.main(["--backend", "all", "--out", str(tmp_path / "ix")]) == 2
    assert "--out needs --backend lucene or --backend bm25s" in capsys.readouterr().err


QUERIES = ["wireless headphones", "kitchen knife set", "running shoes for women", "camera"]


def _edit_first_product_title(data_dir: Path) -> str:
    path = data_dir / "all_products_part_1.json"
    title = next(iter(json.loads(path.read_text()).values()))["title"]
    at = next(i for i, c in enumerate(title) if c.isascii() and c.isalpha())
    edited = title[:at] + ("q" if title[at] != "q" else "z") + title[at + 1:]
    edit_in_place(path, json.dumps(title)[1:-1].encode(), json.dumps(edited)[1:-1].encode())
    return edited


# ----------------------------------------------------------------------------- search indexes


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.slow
def test_a_reader_keeps_its_results_while_other_builds_happen(backend, tiny_engines, tiny_data_dir, tmp_path):
    data_dir = copy_data_dir(tiny_data_dir, tmp_path / "data", artefacts=True)  # the fixture's indexes come along
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
    data_dir = copy_data_dir(tiny_data_dir, tmp_path / "data")
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
    data = load_benchmark_data(copy_data_dir(tiny_data_dir, tmp_path / "data"), reload=True)
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
    data_dir = copy_data_dir(tiny_data_dir, tmp_path / "data")
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
