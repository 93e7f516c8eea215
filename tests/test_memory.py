"""Memory modes: no leakage past the task's timestamp, ordering and length rules,
the on-disk embedding cache, PUMA's task-specific memory and function files, and
the InteRecAgent store and its offline initialisation."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from PersonalWAB.errors import DataError
from PersonalWAB.interec_memory import (InterecMemoryStore, expect_phrase, initial_memory, product_summary,
                                        write_memory_file)
from PersonalWAB.memory import (MEMORY_MODES, RECOMMEND, REVIEW, SEARCH, TASK_FUNCTIONS, format_memory,
                                load_function_file, retrieve_memory, task_function, taskspe_entries)
from PersonalWAB.memory_embeddings import BehaviourEmbeddings, behaviour_text, shared_behaviour_embeddings

REPO_ROOT = Path(__file__).resolve().parent.parent


class CountingEncoder:
    def __init__(self):
        from PersonalWAB.envs.pwab.text_embedding import shared_embedder

        self.inner = shared_embedder()
        self.texts = 0

    def encode(self, texts):
        self.texts += len(texts)
        return self.inner.encode(texts)


def _asin(behaviour):
    return behaviour["product_info"]["parent_asin"]


def _task_with_history(data, minimum=12):
    return next(t for t in data.tasks["test"] if len(data.behaviours_before(t["user_id"], t["timestamp"])) >= minimum)


@pytest.fixture(scope="module")
def interec_store(tiny_data, tmp_path_factory):
    path = tmp_path_factory.mktemp("interec") / "memory.json"
    write_memory_file(path, initial_memory(tiny_data))
    return InterecMemoryStore(path)


def test_no_mode_sees_the_target_or_later(tiny_data, interec_store):
    for task in tiny_data.tasks["test"]:
        history = tiny_data.histories[task["user_id"]]
        past = [b for b in history if b["review"]["timestamp"] < task["timestamp"]]
        past_asins = {_asin(b) for b in past}
        later_asins = {_asin(b) for b in history if b["review"]["timestamp"] >= task["timestamp"]} - past_asins
        target_text = task["target"]["review"]["text"]
        assert later_asins or target_text, "the check needs something that must not leak"
        for mode in MEMORY_MODES:
            for function in TASK_FUNCTIONS if mode == "taskspe" else (None,):
                for length in (5, 1000):
                    chosen = retrieve_memory(tiny_data, task, mode, length, function_name=function)
                    assert all(b["review"]["timestamp"] < task["timestamp"] for b in chosen)
                    assert all(b is not h for b in chosen for h in history[len(past):])
                    text = format_memory(tiny_data, task, mode, length, function_name=function,
                                         interec_store=interec_store)
                    assert not any(asin in text for asin in later_asins), (mode, function)
                    if all(b["review"]["text"] != target_text for b in past):
                        assert target_text not in text, (mode, function)


def test_length_is_honoured(tiny_data, interec_store):
    task = _task_with_history(tiny_data)
    for mode in MEMORY_MODES[1:]:
        assert retrieve_memory(tiny_data, task, mode, 0) == []
        assert len(retrieve_memory(tiny_data, task, mode, 4, function_name=SEARCH)) == 4
        text = format_memory(tiny_data, task, mode, 4, function_name=SEARCH, interec_store=interec_store)
        assert [line.split(".")[0] for line in text.splitlines() if line[:1].isdigit()] == ["1", "2", "3", "4"]
    assert format_memory(tiny_data, task, "none", 4) == ""


def test_last_is_most_recent_first(tiny_data):
    task = _task_with_history(tiny_data)
    past = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    for mode in ("last", "recmind", "interecagent"):
        assert retrieve_memory(tiny_data, task, mode, 6) == past[::-1][:6]


def test_random_is_seeded(tiny_data):
    task = _task_with_history(tiny_data)
    first = retrieve_memory(tiny_data, task, "random", 6, seed=1)
    assert first == retrieve_memory(tiny_data, task, "random", 6, seed=1)
    assert first != retrieve_memory(tiny_data, task, "random", 6, seed=2)


def test_relevant_ranks_by_minilm_cosine(tiny_data):
    from PersonalWAB.envs.pwab.text_embedding import shared_embedder

    task = _task_with_history(tiny_data)
    past = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    # An (ad-hoc) instruction that is one behaviour's own text must rank it first.
    wanted = past[len(past) // 2]
    echo = dict(task, task=behaviour_text(wanted))
    assert retrieve_memory(tiny_data, echo, "relevant", 3)[0] is wanted

    scores = shared_behaviour_embeddings(tiny_data).scores(task["user_id"], task["task"], len(past))
    vectors = shared_embedder().encode([task["task"]] + [behaviour_text(b) for b in past])
    direct = vectors[1:] @ vectors[0]
    np.testing.assert_allclose(scores, direct, atol=1e-4)
    ranked = retrieve_memory(tiny_data, task, "relevant", len(past))
    assert ranked[0] is past[int(np.argmax(direct))]
    assert sorted(map(id, ranked)) == sorted(map(id, past))


@pytest.fixture()
def one_user_dir(tiny_data_dir, tmp_path):
    """Tiny data cut to one user, so building its cache twice stays cheap."""
    out = tmp_path / "one_user"
    out.mkdir()
    histories = {}
    for part in sorted(tiny_data_dir.glob("user_history_part_*.json")):
        histories.update(json.loads(part.read_text()))
    user_id = sorted(histories)[0]
    for path in tiny_data_dir.glob("*.json"):
        if not path.name.startswith("user_history_part_"):
            shutil.copy(path, out / path.name)
    (out / "user_history_part_1.json").write_text(json.dumps({user_id: histories[user_id]}))
    tasks = json.loads((tiny_data_dir / "user_instructions.json").read_text())
    (out / "user_instructions.json").write_text(json.dumps(
        {split: [t for t in items if t["user_id"] == user_id] for split, items in tasks.items()}))
    return out


def test_cache_is_reused_and_invalidated(one_user_dir, tmp_path):
    from PersonalWAB.data.loader import load_benchmark_data

    data = load_benchmark_data(one_user_dir)
    behaviours = sum(len(h) for h in data.histories.values())
    instructions = len({t["task"] for split in data.tasks.values() for t in split})
    encoder = CountingEncoder()
    assert set(BehaviourEmbeddings(data, encoder).ensure()) == {"behaviour_embeddings", "instruction_embeddings"}
    assert encoder.texts == behaviours + instructions
    cache = data.artifacts.cache_dir
    assert {p.name for p in cache.iterdir()} >= {"behaviour_embeddings.npy", "behaviour_embeddings.json",
                                                "instruction_embeddings.npy", "instruction_embeddings.json"}

    reopened = BehaviourEmbeddings(data, encoder)
    assert reopened.ensure() == {}
    task = data.tasks["test"][0]
    past = data.behaviours_before(task["user_id"], task["timestamp"])
    reopened.scores(task["user_id"], task["task"], len(past))
    assert encoder.texts == behaviours + instructions, "a matching cache must encode nothing"
    reopened.instruction("an instruction the data does not hold")
    reopened.instruction("an instruction the data does not hold")
    assert encoder.texts == behaviours + instructions + 1

    changed_dir = tmp_path / "changed"
    shutil.copytree(one_user_dir, changed_dir)
    history_file = changed_dir / "user_history_part_1.json"
    histories = json.loads(history_file.read_text())
    next(iter(histories.values()))[0]["review"]["text"] = "Nothing like the review this cache was built from."
    history_file.write_text(json.dumps(histories))
    changed = load_benchmark_data(changed_dir)
    before = encoder.texts
    assert set(BehaviourEmbeddings(changed, encoder).ensure()) == {"behaviour_embeddings"}
    assert encoder.texts - before == behaviours


def _behaviour(title, asin, timestamp, price, rating, text):
    return {"product_info": {"title": title, "main_category": "Grocery", "price": price, "store": f"{title} Co",
                             "categories": ["Grocery", "Tea"], "parent_asin": asin},
            "review": {"rating": rating, "title": "t", "text": text, "parent_asin": asin, "timestamp": timestamp},
            "split": "history"}


def test_taskspe_keeps_only_the_fields_the_function_needs():
    newer = _behaviour("Green Tea", "B0000000NEW", 2000, 12.5, 4.0, "Lovely  tea,\nfresh.")
    older = _behaviour("Black Tea", "B0000000OLD", 1000, "None", 2.0, "Too bitter.")
    assert taskspe_entries([newer, older], SEARCH) == ["Green Tea | Grocery | $12.50 | Green Tea Co",
                                                       "Black Tea | Grocery | price unknown | Black Tea Co"]
    assert taskspe_entries([newer, older], RECOMMEND) == ["Black Tea | Grocery | B0000000OLD",
                                                          "Green Tea | Grocery | B0000000NEW"]
    assert taskspe_entries([newer, older], REVIEW) == ["4/5 | Lovely tea, fresh.", "2/5 | Too bitter."]
    with pytest.raises(ValueError):
        taskspe_entries([newer], "stop")


def test_taskspe_retrieval_order(tiny_data):
    task = _task_with_history(tiny_data)
    relevant = retrieve_memory(tiny_data, task, "relevant", 8)
    assert retrieve_memory(tiny_data, task, "taskspe", 8, function_name=SEARCH) == relevant
    in_time = retrieve_memory(tiny_data, task, "taskspe", 8, function_name=RECOMMEND)
    assert in_time == sorted(relevant, key=lambda b: b["review"]["timestamp"])
    text = format_memory(tiny_data, task, "taskspe", 8, function_name=RECOMMEND)
    assert text.splitlines()[0] == f"1. {taskspe_entries(in_time, RECOMMEND)[0]}"
    with pytest.raises(ValueError):
        format_memory(tiny_data, task, "taskspe", 8)


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


def test_interec_store_update_and_reload(tmp_path):
    path = tmp_path / "memory.json"
    store = InterecMemoryStore(path, max_items=3)
    store.update("u1", like=["Tea", "Coffee"], expect=["a kettle"])
    store.update("u1", like=["tea ", "Cocoa", "Juice"], dislike=["Coffee"])
    entry = store.get("u1")
    assert entry == {"like": ["Tea", "Cocoa", "Juice"], "dislike": ["Coffee"], "expect": ["a kettle"]}
    assert json.loads(path.read_text())["u1"] == entry
    assert InterecMemoryStore(path, max_items=3).get("u1") == entry
    assert InterecMemoryStore(path).get("unknown") == {"like": [], "dislike": [], "expect": []}
    assert [p.name for p in tmp_path.iterdir()] == ["memory.json"], "no temp file is left behind"
    assert store.format("u1").splitlines() == ["Likes: Tea; Cocoa; Juice", "Dislikes: Coffee", "Expects: a kettle"]
    path.write_text(json.dumps({"u1": {"like": "Tea"}}))
    with pytest.raises(DataError, match="like"):
        InterecMemoryStore(path)


def test_interec_store_concurrent_updates(tmp_path):
    path = tmp_path / "memory.json"
    store = InterecMemoryStore(path, max_items=1000)
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
            store.update(f"u{worker % 3}", like=[f"item {worker}-{i}"], expect=[f"wish {worker}-{i}"])

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
    reloaded = InterecMemoryStore(path, max_items=1000)
    for user in range(3):
        likes = reloaded.get(f"u{user}")["like"]
        expected = {f"item {w}-{i}" for w in range(6) if w % 3 == user for i in range(20)}
        assert set(likes) == expected and len(likes) == len(expected)
        for worker in (user, user + 3):
            own = [item for item in likes if item.startswith(f"item {worker}-")]
            assert own == [f"item {worker}-{i}" for i in range(20)], "each writer's order is kept"


def test_init_script_reads_training_data_only(tiny_data, tiny_data_dir, tmp_path):
    out = tmp_path / "interec.json"
    subprocess.run([sys.executable, "scripts/tools/init_interecagent_memory.py", "--data_dir", str(tiny_data_dir),
                    "--out", str(out)], cwd=REPO_ROOT, check=True, capture_output=True)
    entries = json.loads(out.read_text())
    assert set(entries) == set(tiny_data.histories)
    assert any(e["like"] for e in entries.values()) and any(e["dislike"] for e in entries.values())
    assert any(e["expect"] for e in entries.values())
    for user_id, entry in entries.items():
        known = [b for b in tiny_data.histories[user_id] if b["split"] in ("history", "train")]
        assert set(entry["like"]) <= {product_summary(b["product_info"]) for b in known if b["review"]["rating"] >= 4}
        assert set(entry["dislike"]) <= {product_summary(b["product_info"]) for b in known
                                         if b["review"]["rating"] <= 2}
        train_phrases = {expect_phrase(t["task"]) for t in tiny_data.tasks["train"]
                         if t["user_id"] == user_id and t["type"] != "review"}
        assert set(entry["expect"]) <= train_phrases
        test_only = {_asin(b) for b in tiny_data.histories[user_id] if b["split"] == "test"} - {
            _asin(b) for b in known}
        assert not any(asin in item for asin in test_only for item in entry["like"] + entry["dislike"])
