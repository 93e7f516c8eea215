"""Memory as the release builds it: no leakage past the task's timestamp, each mode's order and
text, the release's random draws, the on-disk embedding cache of the full behaviour texts (a damaged
one named and rebuilt), PUMA's function files, the InteRecAgent store and its initialisation
(offline and by a model), and the ablation's arms (another user's history, the oracle) cut to a
token budget."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from PersonalWAB.data.loader import load_benchmark_data
from PersonalWAB.errors import DataError
from PersonalWAB.memory.interec import InterecMemoryStore, initial_memory, parse_profile, write_memory_file
from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH
from PersonalWAB.memory import (MEMORY_MODES, ReleaseRandomMemory, load_function_file, memory_text, memory_tokens,
                                newest_first, retrieve_memory, task_function)
from PersonalWAB.memory.base import MemoryRequest
from PersonalWAB.memory.embeddings import BehaviourEmbeddings, behaviour_texts, shared_behaviour_embeddings
from PersonalWAB.memory.modes.oracle import target_vector
from PersonalWAB.protocol import load_protocol, project_protocol
from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
from tests.conftest import REPO_ROOT, HashEncoder, copy_data_dir

PROTOCOL = project_protocol()


class CountingEncoder:
    def __init__(self):
        from PersonalWAB.engines.text_embedding import shared_embedder

        self.inner = shared_embedder()
        self.texts = 0

    def encode(self, texts):
        self.texts += len(texts)
        return self.inner.encode(texts)


def _asin(behaviour):
    return behaviour["product_info"]["parent_asin"]


def _task_with_history(data, minimum=12):
    return next(t for t in data.tasks["test"] if len(data.behaviours_before(t["user_id"], t["timestamp"])) >= minimum)


@pytest.mark.slow
def test_no_mode_sees_the_target_or_later(tiny_puma_data):
    """Over every test task and mode (the relevance ranking from `HashEncoder`: which behaviours
    may be chosen does not depend on MiniLM)."""
    tiny_data = tiny_puma_data
    for task in tiny_data.tasks["test"]:
        history = tiny_data.histories[task["user_id"]]
        past_asins = {_asin(b) for b in history if b["review"]["timestamp"] < task["timestamp"]}
        later = {_asin(b) for b in history if b["review"]["timestamp"] >= task["timestamp"]} - past_asins
        for mode in MEMORY_MODES:
            chosen = retrieve_memory(tiny_data, task, mode, 50, protocol=PROTOCOL, task_type="recommend")
            assert all(b["review"]["timestamp"] < task["timestamp"] for b in chosen)
            if mode == "other_user":  # another user's history: never the target
                assert _asin(task["target"]) not in {_asin(b) for b in chosen}
                continue
            assert {_asin(b) for b in chosen} <= past_asins
            assert not ({_asin(b) for b in chosen} & later)


def test_last_recmind_interecagent_take_the_newest(tiny_data):
    task = _task_with_history(tiny_data)
    past = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    for mode in ("last", "recmind", "interecagent"):
        assert retrieve_memory(tiny_data, task, mode, 6) == newest_first(past)[:6]
    assert retrieve_memory(tiny_data, task, "last", 0) == [] and retrieve_memory(tiny_data, task, "none", 9) == []


def test_random_memory_replays_the_releases_one_generator(tiny_data):
    tasks = tiny_data.tasks["test"]
    order = [(trial, i) for trial in range(2) for i in range(len(tasks))]
    draws = ReleaseRandomMemory(tiny_data, tasks, order, 4, seed=2024)
    rng = random.Random(2024)
    for trial, i in order:
        past = newest_first(tiny_data.behaviours_before(tasks[i]["user_id"], tasks[i]["timestamp"]))
        assert draws.draw(trial, i) == rng.sample(past, min(4, len(past)))
    assert draws.draw(0, 0) != draws.draw(1, 0) or len(tiny_data.behaviours_before(
        tasks[0]["user_id"], tasks[0]["timestamp"])) <= 1


def test_memory_text_of_every_mode(tiny_data, fake_protocol):
    task = _task_with_history(tiny_data)
    past = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    newest = newest_first(past)[:5]
    blocks = [fake_protocol.behaviour_block(b, i) for i, b in enumerate(newest)]
    assert memory_text(fake_protocol, tiny_data, task, "last", 5) == "\nR:LAST:\n" + "\n".join(blocks)
    react = memory_text(fake_protocol, tiny_data, task, "last", 5, react=True)
    assert react == "\n\nR:REACT LAST:\n" + "\n".join(blocks)
    assert memory_text(fake_protocol, tiny_data, task, "recmind", 5) == "\nR:RECMIND:\n" + "\n".join(
        fake_protocol.recmind_block(b, i) for i, b in enumerate(newest))
    prefs = {"like": ["B1"], "dislike": ["B2"], "expect": []}
    assert memory_text(fake_protocol, tiny_data, task, "interecagent", 5, preferences=prefs) == \
        fake_protocol.interecagent_memory([fake_protocol.interecagent_block(b) for b in newest], prefs)
    assert memory_text(fake_protocol, tiny_data, task, "recmind", 5, react=True) == ""  # ReAct renders 3 modes
    assert memory_text(fake_protocol, tiny_data, task, "none", 5) is None
    drawn = newest[::-1]
    assert memory_text(fake_protocol, tiny_data, task, "random", 5, random_draw=drawn) == "\nR:RANDOM:\n" + "\n".join(
        fake_protocol.behaviour_block(b, i) for i, b in enumerate(drawn))


@pytest.mark.slow
def test_taskspe_memory_for_the_function_chosen(tiny_puma_data, fake_protocol):
    from conftest import HashEncoder

    tiny_data = tiny_puma_data  # its relevance ranking from `HashEncoder`: the test needs one, not MiniLM's
    BehaviourEmbeddings(tiny_data, fake_protocol, HashEncoder()).ensure(log=None)
    task = _task_with_history(tiny_data)
    relevant = retrieve_memory(tiny_data, task, "relevant", 8, protocol=fake_protocol)
    assert retrieve_memory(tiny_data, task, "taskspe", 8, protocol=fake_protocol, task_type="search") == relevant
    in_time = retrieve_memory(tiny_data, task, "taskspe", 8, protocol=fake_protocol, task_type="recommend")
    assert in_time == sorted(relevant, key=lambda b: b["review"]["timestamp"])
    text = memory_text(fake_protocol, tiny_data, task, "taskspe", 8, tool_name=RECOMMEND)
    assert text == ("R:type recommend; tool get_recommendations_by_history\nR:TASKSPE:\n"
                    + "|".join(fake_protocol.taskspe_entry(b, "recommend") for b in in_time))
    first = dict(task, timestamp=0)  # before any behaviour of the user
    assert memory_text(fake_protocol, tiny_data, first, "taskspe", 8, tool_name=SEARCH) is None  # no history
    with pytest.raises(ValueError, match="needs the chosen function"):
        memory_text(fake_protocol, tiny_data, task, "taskspe", 8)


@pytest.fixture(scope="module")
def two_users_data(tiny_data_dir, tmp_path_factory):
    """The tiny data's first two users: a real MiniLM cache of them takes an eighth of the whole's."""
    from PersonalWAB.data.loader import load_benchmark_data

    return load_benchmark_data(first_users_dir(tiny_data_dir, tmp_path_factory.mktemp("two_users") / "data", 2))


@pytest.mark.slow
def test_relevant_memory_ranks_the_full_behaviour_texts(two_users_data):
    from PersonalWAB.engines.text_embedding import shared_embedder

    tiny_data = two_users_data

    task = _task_with_history(tiny_data)
    past = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    texts = behaviour_texts(PROTOCOL, past)
    assert texts[3] == PROTOCOL.behaviour_block(past[3], 3)  # numbered by position, as the release ranks them
    wanted = past[len(past) // 2]
    echo = dict(task, task=PROTOCOL.behaviour_block(wanted, len(past) // 2))
    assert retrieve_memory(tiny_data, echo, "relevant", 3, protocol=PROTOCOL)[0] is wanted

    scores = shared_behaviour_embeddings(tiny_data, PROTOCOL).scores(task["user_id"], task["task"], len(past))
    vectors = shared_embedder().encode([task["task"]] + texts)
    direct = vectors[1:] @ vectors[0]
    np.testing.assert_allclose(scores, direct, atol=1e-4)
    ranked = retrieve_memory(tiny_data, task, "relevant", len(past), protocol=PROTOCOL)
    assert ranked[0] is past[int(np.argmax(direct))]
    assert sorted(map(id, ranked)) == sorted(map(id, past))


def first_users_dir(tiny_data_dir: Path, out: Path, count: int) -> Path:
    """Tiny data cut to its first `count` users, so building their cache stays cheap (without the
    synthetic manifest, whose counts describe the whole data)."""
    out.mkdir()
    histories = {}
    for part in sorted(tiny_data_dir.glob("user_history_part_*.json")):
        histories.update(json.loads(part.read_text()))
    users = sorted(histories)[:count]
    for path in tiny_data_dir.glob("*.json"):
        if not path.name.startswith("user_history_part_") and path.name != "synthetic_manifest.json":
            shutil.copy(path, out / path.name)
    (out / "user_history_part_1.json").write_text(json.dumps({u: histories[u] for u in users}))
    tasks = json.loads((tiny_data_dir / "user_instructions.json").read_text())
    (out / "user_instructions.json").write_text(json.dumps(
        {split: [t for t in items if t["user_id"] in users] for split, items in tasks.items()}))
    return out


@pytest.fixture()
def one_user_dir(tiny_data_dir, tmp_path):
    return first_users_dir(tiny_data_dir, tmp_path / "one_user", 1)


@pytest.mark.slow
def test_cache_is_reused_kept_per_protocol_and_invalidated(one_user_dir, tmp_path, fake_protocol):
    from PersonalWAB.data.loader import load_benchmark_data

    data = load_benchmark_data(one_user_dir)
    behaviours = sum(len(h) for h in data.histories.values())
    instructions = len({t["task"] for split in data.tasks.values() for t in split})
    encoder = CountingEncoder()
    embeddings = BehaviourEmbeddings(data, PROTOCOL, encoder)
    assert set(embeddings.ensure()) == {embeddings.name, "instruction_embeddings"}
    assert encoder.texts == behaviours + instructions
    assert {p.name for p in data.artifacts.cache_dir.iterdir()} >= {
        f"{embeddings.name}.npy", f"{embeddings.name}.json", "instruction_embeddings.npy",
        "instruction_embeddings.json"}

    reopened = BehaviourEmbeddings(data, PROTOCOL, encoder)
    assert reopened.ensure() == {}
    task = data.tasks["test"][0]
    reopened.scores(task["user_id"], task["task"], 3)
    assert encoder.texts == behaviours + instructions, "a matching cache must encode nothing"
    reopened.instruction("an instruction the data does not hold")
    reopened.instruction("an instruction the data does not hold")
    assert encoder.texts == behaviours + instructions + 1

    other = BehaviourEmbeddings(data, fake_protocol, encoder)  # other texts: a cache of their own
    assert set(other.ensure()) == {other.name} and other.name != embeddings.name
    assert BehaviourEmbeddings(data, PROTOCOL, encoder).ensure() == {}

    changed_dir = tmp_path / "changed"
    shutil.copytree(one_user_dir, changed_dir)
    history_file = changed_dir / "user_history_part_1.json"
    histories = json.loads(history_file.read_text())
    next(iter(histories.values()))[0]["review"]["text"] = "Nothing like the review this cache was built from."
    history_file.write_text(json.dumps(histories))
    changed = load_benchmark_data(changed_dir)
    before = encoder.texts
    rebuilt = BehaviourEmbeddings(changed, PROTOCOL, encoder)
    assert set(rebuilt.ensure()) == {rebuilt.name}
    assert encoder.texts - before == behaviours


def test_each_precision_keeps_caches_of_its_own_and_a_run_ranks_by_its_own(one_user_dir):
    """A bf16 build writes beside the fp32 caches, never over them, and the precision a run set
    (`ranking_precision`) is the one memory reads."""
    from conftest import HashEncoder
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory.embeddings import ranking_precision

    data = load_benchmark_data(one_user_dir)
    exact = BehaviourEmbeddings(data, PROTOCOL, HashEncoder())
    fast = BehaviourEmbeddings(data, PROTOCOL, HashEncoder(), precision="bf16")
    assert set(fast.ensure()) == {f"{exact.name}_bf16", "instruction_embeddings_bf16"}
    assert not (data.artifacts.cache_dir / f"{exact.name}.npy").exists()
    assert set(exact.ensure()) == {exact.name, "instruction_embeddings"}
    assert BehaviourEmbeddings(data, PROTOCOL, HashEncoder(), precision="bf16").ensure() == {}
    assert "--embedding_precision bf16" in fast.prebuild_command()
    with ranking_precision("bf16"):
        assert shared_behaviour_embeddings(data, PROTOCOL).precision == "bf16"
    assert shared_behaviour_embeddings(data, PROTOCOL).precision == "fp32"


def test_function_file(tmp_path):
    path = tmp_path / "functions.json"
    path.write_text(json.dumps({
        "find tea": "search_product_by_query",
        "what next": ["get_recommendations_by_history", "search_product_by_query"],
        "review my tea": " Add_Product_Review()\n",
        "dance": "tango",
        "empty": [],
    }))
    functions = load_function_file(path)
    assert functions == {"find tea": SEARCH, "what next": RECOMMEND, "review my tea": REVIEW}
    assert task_function(functions, "what next", SEARCH) == RECOMMEND
    assert task_function(functions, "dance", REVIEW) == REVIEW
    assert task_function(None, "find tea", RECOMMEND) == RECOMMEND
    path.write_text("{broken")
    with pytest.raises(DataError, match="functions.json"):
        load_function_file(path)


def test_interec_store_update_as_the_release(tmp_path):
    path = tmp_path / "memory.json"
    store = InterecMemoryStore(path)
    store.update("u1", like=["B1", "B2"], expect=["a kettle"])
    store.update("u1", like=["B3", "B1"], dislike=["B2"], expect=[f"e{i}" for i in range(40)])
    entry = store.get("u1")
    assert entry["like"] == ["B1", "B3"] and entry["dislike"] == ["B2"]  # disliked leaves the likes
    assert entry["expect"] == [f"e{i}" for i in range(10, 40)]  # the newest 30 expectations
    store.update("u1", like=["B2"])
    assert store.get("u1")["dislike"] == [] and store.get("u1")["like"] == ["B1", "B3", "B2"]
    assert json.loads(path.read_text())["u1"] == store.get("u1")
    assert InterecMemoryStore(path).get("u1") == store.get("u1")
    assert InterecMemoryStore(path).get("unknown") == {"like": [], "dislike": [], "expect": []}
    assert [p.name for p in tmp_path.iterdir()] == ["memory.json"], "no temp file is left behind"
    path.write_text(json.dumps({"u1": {"like": "Tea"}}))
    with pytest.raises(DataError, match="like"):
        InterecMemoryStore(path)


def test_parse_profile_reads_what_the_release_reads():
    assert parse_profile('```json\n{"like": ["B1", 2], "dislike": "B2"}\n```') == \
        {"like": ["B1", "2"], "dislike": [], "expect": []}
    assert parse_profile("Sure! {\"like\": []}") == {"like": [], "dislike": [], "expect": []}
    assert parse_profile("no json here") is None and parse_profile("[1, 2]") is None


def test_interec_store_concurrent_updates(tmp_path):
    path = tmp_path / "memory.json"
    store = InterecMemoryStore(path)
    stop = threading.Event()
    torn = []

    def read_while_writing():
        while not stop.is_set():
            if path.exists():
                try:
                    json.loads(path.read_text())
                except ValueError:
                    torn.append(True)

    def write(worker):
        for i in range(20):
            store.update(f"u{worker % 3}", like=[f"item {worker}-{i}"])

    reader = threading.Thread(target=read_while_writing)
    reader.start()
    writers = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    reader.join()
    assert not torn, "a reader saw a half-written file"
    reloaded = InterecMemoryStore(path)
    for user in range(3):
        likes = reloaded.get(f"u{user}")["like"]
        expected = {f"item {w}-{i}" for w in range(6) if w % 3 == user for i in range(20)}
        assert set(likes) == expected and len(likes) == len(expected)
        for worker in (user, user + 3):
            own = [item for item in likes if item.startswith(f"item {worker}-")]
            assert own == [f"item {worker}-{i}" for i in range(20)], "each writer's order is kept"


def test_offline_initial_memory_reads_the_history_split_only(tiny_data, tiny_data_dir, tmp_path):
    out = tmp_path / "interec.json"
    subprocess.run([sys.executable, "scripts/tools/init_interecagent_memory.py", "--data_dir", str(tiny_data_dir),
                    "--out", str(out), "--offline"], cwd=REPO_ROOT, check=True, capture_output=True)
    entries = json.loads(out.read_text())
    assert entries == initial_memory(tiny_data) and set(entries) == set(tiny_data.histories)
    assert any(e["like"] for e in entries.values()) and all(e["expect"] == [] for e in entries.values())
    for user_id, entry in entries.items():
        history = {_asin(b): b for b in tiny_data.histories[user_id] if b["split"] == "history"}
        assert all(history[a]["review"]["rating"] >= 4 for a in entry["like"])
        assert all(history[a]["review"]["rating"] <= 2 for a in entry["dislike"])


@pytest.mark.slow
def test_initial_memory_written_by_a_model_resumes(tiny_data, tiny_data_dir, tmp_path):
    users = sorted(tiny_data.histories)
    out = tmp_path / "interec.json"
    write_memory_file(out, {users[0]: {"like": ["KEPT"], "dislike": [], "expect": []}})

    def profile_writer(request):
        prompt = request["messages"][0]["content"]
        asins = [a for a in tiny_data.products if a in prompt]
        return ScriptedReply(content="```json\n" + json.dumps({"like": asins[:2], "dislike": asins[2:3]}) + "\n```"
                             if asins else "no idea")

    with ScriptedLLMServer(profile_writer) as server:
        subprocess.run([sys.executable, "scripts/tools/init_interecagent_memory.py", "--data_dir",
                        str(tiny_data_dir), "--out", str(out), "--model", "gpt-4o-mini", "--api_base", server.url],
                       cwd=REPO_ROOT, check=True, capture_output=True)
        requests = list(server.requests)
    assert len(requests) == len(users) - 1  # the user already in the file is kept
    first = requests[0]
    assert first["temperature"] == 0.0 and first["max_tokens"] == 5000 and len(first["messages"]) == 1
    entries = json.loads(out.read_text())
    assert entries[users[0]]["like"] == ["KEPT"] and set(entries) == set(users)
    history = [b for b in tiny_data.histories[users[1]] if b["split"] == "history"][-200:]
    assert any(r["messages"][0]["content"] == PROTOCOL.interecagent_init_prompt(history) for r in requests)


class StoredCountingEncoder(CountingEncoder):
    """The real MiniLM under its model id, so its vectors go to the shared text store."""
    @property
    def model_id(self):
        return self.inner.model_id


@pytest.mark.slow
def test_a_new_data_dir_reuses_the_stored_vectors_of_texts_it_shares(one_user_dir, tmp_path, monkeypatch):
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory.embeddings import STORE_ENV

    monkeypatch.setenv(STORE_ENV, str(tmp_path / "store"))
    encoder = StoredCountingEncoder()
    data = load_benchmark_data(one_user_dir)
    first = BehaviourEmbeddings(data, PROTOCOL, encoder)
    first.ensure(log=None)
    encoded = encoder.texts

    edited = tmp_path / "edited"
    shutil.copytree(one_user_dir, edited, ignore=shutil.ignore_patterns("cache"))
    history_file = edited / "user_history_part_1.json"
    histories = json.loads(history_file.read_text())
    user_id, behaviours = next(iter(histories.items()))
    behaviours[0]["review"]["text"] = "A review this data directory alone holds."
    history_file.write_text(json.dumps(histories))
    second = BehaviourEmbeddings(load_benchmark_data(edited), PROTOCOL, encoder)
    assert set(second.ensure(log=None)) == {second.name, "instruction_embeddings"}
    assert encoder.texts - encoded == 1, "only the edited behaviour's text is new"
    assert np.array_equal(second.behaviours(user_id)[1:], first.behaviours(user_id)[1:])
    assert not np.array_equal(second.behaviours(user_id)[0], first.behaviours(user_id)[0])


@pytest.mark.slow
def test_a_run_over_some_users_encodes_only_theirs_and_ranks_as_the_whole_cache(tiny_data_dir, tmp_path,
                                                                               monkeypatch):
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.memory.embeddings import STORE_ENV

    monkeypatch.setenv(STORE_ENV, str(tmp_path / "store"))
    data = load_benchmark_data(first_users_dir(tiny_data_dir, tmp_path / "two_users", 2))
    first_user, second_user = sorted(data.histories)
    tasks = [t for t in data.tasks["test"] if t["user_id"] == first_user]
    instructions = {t["task"] for t in tasks}
    encoder = StoredCountingEncoder()
    partial = BehaviourEmbeddings(data, PROTOCOL, encoder)
    encoded = partial.prepare_users({first_user}, [t["task"] for t in tasks], log=None)
    assert encoded == encoder.texts == len(data.histories[first_user]) + len(instructions)
    assert not list(data.artifacts.cache_dir.glob("behaviour_embeddings_*")), "nothing written to the data dir"

    whole = BehaviourEmbeddings(data, PROTOCOL, encoder)
    whole.ensure(log=None)
    every_instruction = {t["task"] for split in data.tasks.values() for t in split}
    assert encoder.texts - encoded == len(data.histories[second_user]) + len(every_instruction - instructions), \
        "the whole build encodes only what the partial one did not"
    for task in tasks:
        past = len(data.behaviours_before(first_user, task["timestamp"]))
        expected = whole.scores(first_user, task["task"], past)
        got = partial.scores(first_user, task["task"], past)
        assert np.abs(got - expected).max(initial=0.0) <= 1e-6
        assert np.array_equal(np.argsort(-got, kind="stable"), np.argsort(-expected, kind="stable"))
    assert np.abs(partial.behaviours(second_user) - whole.behaviours(second_user)).max() <= 1e-6  # asked late

    before = encoder.texts
    reopened = BehaviourEmbeddings(data, PROTOCOL, encoder)
    assert reopened.prepare_users({first_user}, [t["task"] for t in tasks], log=None) == 0
    assert encoder.texts == before and np.array_equal(reopened.behaviours(first_user), whole.behaviours(first_user))


@pytest.mark.slow
def test_cached_relevant_memory_equals_pytorch_encoding_each_text_alone(two_users_data):
    """The batched, length-sorted, stored path (ONNX Runtime on a CPU) ranks exactly as
    PyTorch encoding one text at a time."""
    from PersonalWAB.engines.text_embedding import TextEmbedder
    from PersonalWAB.memory.embeddings import reference_agreement

    tiny_data = two_users_data

    user_id = tiny_data.tasks["test"][0]["user_id"]
    tasks = [t for t in tiny_data.tasks["test"] if t["user_id"] == user_id][:3]
    report = reference_agreement(tiny_data, PROTOCOL, tasks, 10, TextEmbedder(backend="torch"))
    assert report["equal_top_lists"] == report["tasks"] == len(tasks)
    assert report["max_score_diff"] <= 1e-5


# ----------------------------------------------------------------------------- damaged caches


def test_garbage_behaviour_embedding_caches_are_named_and_rebuilt(tiny_data_dir, tmp_path, capsys):
    data = load_benchmark_data(copy_data_dir(tiny_data_dir, tmp_path / "data"), reload=True)
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


# ----------------------------------------------------------------------------- the ablation's arms and token budget

def test_other_user_holds_as_many_of_another_users_earlier_behaviours(tiny_data):
    protocol = load_protocol()
    for task in tiny_data.split("test"):
        own = retrieve_memory(tiny_data, task, "last", 5, protocol=protocol)
        other = retrieve_memory(tiny_data, task, "other_user", 5, protocol=protocol, seed=1)
        assert len(other) == len(own)
        assert all(b["review"]["timestamp"] < task["timestamp"] for b in other)
        mine = {id(b) for b in tiny_data.histories[task["user_id"]]}
        assert not any(id(b) in mine for b in other)
        assert other == retrieve_memory(tiny_data, task, "other_user", 5, protocol=protocol, seed=1)


def test_oracle_ranks_the_users_past_by_closeness_to_the_target(tiny_puma_data):
    protocol = load_protocol()
    embeddings = shared_behaviour_embeddings(tiny_puma_data, protocol)
    task = next(t for t in tiny_puma_data.split("test")
                if len(tiny_puma_data.behaviours_before(t["user_id"], t["timestamp"])) >= 3)
    past = tiny_puma_data.behaviours_before(task["user_id"], task["timestamp"])
    query = target_vector(MemoryRequest(tiny_puma_data, task, 3, protocol), embeddings)
    history = tiny_puma_data.histories[task["user_id"]]
    own = next(i for i, b in enumerate(history) if b["review"]["timestamp"] == task["timestamp"]
               and b["product_info"]["parent_asin"] == task["target"]["product_info"]["parent_asin"])
    assert np.array_equal(query, embeddings.behaviours(task["user_id"])[own])
    scores = embeddings.behaviours(task["user_id"], len(past)) @ query
    expected = [past[i] for i in np.argsort(-scores, kind="stable")[:3]]
    assert retrieve_memory(tiny_puma_data, task, "oracle", 3, protocol=protocol) == expected


def test_every_arm_is_cut_to_the_token_budget(tiny_data):
    protocol = load_protocol()
    task = max(tiny_data.split("test"),
               key=lambda t: len(tiny_data.behaviours_before(t["user_id"], t["timestamp"])))
    full = retrieve_memory(tiny_data, task, "last", 50, protocol=protocol)
    assert len(full) >= 2
    budget = memory_tokens(protocol, full[:2])
    for arm in ("last", "random", "other_user"):
        cut = retrieve_memory(tiny_data, task, arm, 50, protocol=protocol, tokens=budget)
        assert memory_tokens(protocol, cut) <= budget
        assert cut == retrieve_memory(tiny_data, task, arm, 50, protocol=protocol)[:len(cut)]
    assert retrieve_memory(tiny_data, task, "last", 50, protocol=protocol, tokens=budget) == full[:2]


def test_a_memory_matrix_rewritten_with_other_vectors_is_rebuilt(data_copy: Path, capsys) -> None:
    data = load_benchmark_data(data_copy)
    assert BehaviourEmbeddings(data, load_protocol(), HashEncoder()).ensure(log=None)
    matrix = next((data_copy / "cache").glob("behaviour_embeddings_*.npy"))
    np.save(matrix, np.random.default_rng(0).standard_normal(np.load(matrix).shape).astype(np.float32))
    rebuilt = BehaviourEmbeddings(data, load_protocol(), HashEncoder()).ensure(log=None)
    assert rebuilt and "differs from the digest recorded" in capsys.readouterr().err
    assert not BehaviourEmbeddings(data, load_protocol(), HashEncoder()).ensure(log=None)
