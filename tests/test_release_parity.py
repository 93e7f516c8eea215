"""The release parity harness without the release: its command line, its settings checks, the
mirror it builds (over a made-up release tree), and how it reads request logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.parity_compare import body_difference, first_difference, score_verdict
from devtools.parity_requests import ParityModel, by_task, compare_first_requests
from devtools.release_mirror import REQUIRED_FILES, ParityError, build_mirror

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "tools" / "release_parity.py"


def test_cli_help_names_the_checks() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for word in ("--release_dir", "--data_dir", "--limit", "observations", "first_request", "multiturn_user"):
        assert word in out.stdout


def test_cli_rejects_a_folder_that_is_not_the_release(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--release_dir", str(tmp_path), "--data_dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: --release_dir {tmp_path}: not a checkout of the release")


def fake_release(root: Path) -> Path:
    for name in REQUIRED_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# stand-in for {name}\n", encoding="utf-8")
    (root / "PersonalWAB" / "envs" / "pwab" / "data" / "user_profiles.json").write_text("{}", encoding="utf-8")
    return root


def fake_data(root: Path, artefacts: bool = True) -> Path:
    """A data directory with every file the mirror links (contents do not matter to it)."""
    names = ["all_products_part_1.json", "all_products_part_2.json", "user_history_part_1.json",
             "user_instructions.json", "user_profiles.json"]
    if artefacts:
        names += ["recommender/pwab.pth", "recommender/1000_ids.json", "indexes/lucene/segments_1"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}", encoding="utf-8")
    return root


def test_mirror_copies_python_files_and_links_data(tmp_path: Path) -> None:
    release = fake_release(tmp_path / "release")
    data = fake_data(tmp_path / "data")
    mirror = build_mirror(release, data, parent=tmp_path, index_dir=data / "indexes" / "lucene")
    try:
        for name in REQUIRED_FILES:
            copy = mirror.root / name
            assert not copy.is_symlink() and copy.read_bytes() == (release / name).read_bytes()
        linked = mirror.root / "PersonalWAB" / "envs" / "pwab" / "data"
        assert (linked / "user_profiles.json").resolve() == (data / "user_profiles.json").resolve()
        assert sorted(p.name for p in linked.glob("all_products_part_*.json")) == [
            "all_products_part_1.json", "all_products_part_2.json"]
        functions = mirror.root / "PersonalWAB" / "envs" / "pwab" / "functions"
        assert (functions / "search" / "indexes").resolve() == (data / "indexes" / "lucene").resolve()
        assert (functions / "recommender" / "checkpoint" / "pwab.pth").resolve() == (
            data / "recommender" / "pwab.pth").resolve()
        assert (functions / "recommender" / "data" / "1000_ids.json").resolve() == (
            data / "recommender" / "1000_ids.json").resolve()
        assert mirror.commit is None and len(mirror.fingerprint) == 64
    finally:
        mirror.remove()
    assert not mirror.root.exists()
    assert (release / "PersonalWAB" / "envs" / "pwab" / "data" / "user_profiles.json").read_text() == "{}"


def test_mirror_names_the_missing_artefact(tmp_path: Path) -> None:
    release = fake_release(tmp_path / "release")
    data = fake_data(tmp_path / "data", artefacts=False)
    with pytest.raises(ParityError, match=r"missing .*indexes/lucene; build the artefacts"):
        build_mirror(release, data, parent=tmp_path, index_dir=data / "indexes" / "lucene")


def test_diffs_and_score_verdicts() -> None:
    assert first_difference("same", "same") is None
    assert "at char 2" in first_difference("abXd", "abYd")
    assert score_verdict([1, 0.5], [1, 0.5 + 1e-8], review_cosine=True) == "identical"
    assert score_verdict([1, -0.1], [1, 0.0], review_cosine=True) == "floored"
    assert score_verdict([1, 0.9], [1, 0.8], review_cosine=False) == "differs"
    body = {"messages": [{"role": "system", "content": "A"}], "tools": [{"function": {"name": "f"}}]}
    assert body_difference(body, json.loads(json.dumps(body))) == {}
    assert set(body_difference(body, {**body, "messages": [{"role": "system", "content": "B"}]})) == {"messages"}
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]}
    with_null = {"messages": [{**call, "content": None}]}
    assert body_difference(with_null, {"messages": [call]}) == {}  # litellm does not send null fields
    assert set(body_difference({"messages": [{**call, "content": "text"}]}, {"messages": [call]})) == {"messages"}


def test_requests_are_tied_to_tasks_in_order() -> None:
    tasks = [{"user_id": "U1", "task": "Find a kettle.", "type": "search"},
             {"user_id": "U2", "task": "Recommend me something.", "type": "recommend"}]
    model = ParityModel("agent", "user", multiturn=False)

    def first(task: dict, system: str) -> dict:
        return {"model": "agent", "tools": [{"function": {"name": "x"}}],
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": f"USER {task['user_id']}: {task['task']}"}]}

    log = [first(tasks[0], "S"), first(tasks[0], "S"), first(tasks[1], "S")]  # the repeat is a retry
    assert model(log[0]).tool_calls[0][0] == "search_product_by_query"
    assert model(log[2]).tool_calls[0][0] == "get_recommendations_by_history"
    grouped = by_task(log, tasks, "agent", "user")
    assert [len(grouped[i]["agent"]) for i in (0, 1)] == [1, 1]
    other = by_task([first(tasks[0], "S"), first(tasks[1], "T")], tasks, "agent", "user")
    result = compare_first_requests(tasks, grouped, other)
    assert (result["requests"].compared, result["requests"].identical) == (2, 1)
    assert result["requests"].first_difference["task"] == 1


# --- the `puma` check --------------------------------------------------------------------------------------------
FAKE_TEST_LLAMA = '''
import json, sys
import wandb  # the release's PUMA scripts import it; the worker stubs it when it is not installed
from transformers import AutoTokenizer, GenerationConfig, LlamaForCausalLM, LlamaTokenizer
slow = LlamaTokenizer.from_pretrained("meta-llama/Llama-2-7b-chat-hf")
auto = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-chat-hf")
model = LlamaForCausalLM.from_pretrained("meta-llama/Llama-2-7b-chat-hf")
ids = slow("find a red kettle", return_tensors="pt").input_ids
model.generate(ids, generation_config=GenerationConfig(max_new_tokens=3, num_beams=1, do_sample=False))
json.dump({"same_ids": slow("find a red kettle")["input_ids"] == auto("find a red kettle")["input_ids"],
           "argv": sys.argv[1:]}, open("out.json", "w"))
'''


def test_puma_worker_loads_the_stand_in_for_the_hub_name_and_records_generate(tmp_path: Path,
                                                                             tiny_model_dir: Path) -> None:
    from devtools.release_mirror import WORKER

    release = fake_release(tmp_path / "release")
    (release / "PersonalWAB" / "__init__.py").write_text("", encoding="utf-8")
    (release / "PUMA").mkdir()
    (release / "PUMA" / "test_llama.py").write_text(FAKE_TEST_LLAMA, encoding="utf-8")
    data = fake_data(tmp_path / "data")
    mirror = build_mirror(release, data, parent=tmp_path, index_dir=data / "indexes" / "lucene")
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run([sys.executable, str(WORKER), "script", "--mirror", str(mirror.root), "--cwd", str(work),
                          "--script", "PUMA/test_llama.py", "--hub", f"meta-llama/Llama-2-7b-chat-hf={tiny_model_dir}",
                          "--record", str(work / "calls.json"), "--", "--test_on", "param"],
                         capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                           "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads((work / "out.json").read_text())
    assert seen == {"same_ids": True, "argv": ["--test_on", "param"]}  # LlamaTokenizer reads the stand-in's own
    (call,) = json.loads((work / "calls.json").read_text())["generate"]
    assert call["settings"]["max_new_tokens"] == 3 and len(call["output_ids"][0]) == len(call["input_ids"][0]) + 3


def test_puma_check_compares_every_field_and_request() -> None:
    from devtools.parity_puma import compare_examples, compare_requests, label_reply

    release = [{"instruction": "a", "prompt": "P", "target": "x", "mem": "m"},
               {"instruction": "b", "prompt": "Q", "target": "y", "mem": "n"}]
    project = [{"instruction": "a", "prompt": "P", "label": "x", "memory": "m"},
               {"instruction": "b", "prompt": "Q", "label": "y ", "memory": "n"}]
    tally = compare_examples(release, project, ["search", "review"],
                             {"instruction": "instruction", "prompt": "prompt", "target": "label", "mem": "memory"})
    assert (tally.compared, tally.identical) == (2, 1) and tally.first_difference["field"] == "label"
    assert compare_examples(release[:1], project, ["search"], {"prompt": "prompt"}).first_difference == {
        "release": 1, "project": 2}
    body = {"messages": [{"role": "system", "content": "...\nInstruction: Find me a red kettle please\n..."}],
            "model": "gpt-4o-mini", "temperature": 0}
    assert compare_requests([body], [dict(body, model="openai/gpt-4o-mini")]).all_identical
    assert not compare_requests([body], [dict(body, temperature=0.7)]).all_identical
    # the scripted labels come in the shapes that tell a raw reply from a cleaned one
    shapes = {label_reply({"messages": [{"content": f"Instruction: {text}"}]}).content
              for text in ("find a kettle", "find a kettles", "find a kettlesx")}
    assert any(s.startswith('"') for s in shapes) and any(s.startswith("  ") for s in shapes)


def test_puma_check_candidates_scores_and_settings(tmp_path: Path) -> None:
    from devtools.parity_puma import GenerateRecorder, candidates_file, result_scores, settings_of

    (tmp_path / "param_train.json").write_text(json.dumps([
        {"instruction": "rec", "type": "recommend", "label": "B1, B2, B3"},
        {"instruction": "rev", "type": "review", "label": "Lovely mug."}]))
    candidates = json.loads(candidates_file(tmp_path, tmp_path / "c.json").read_text())
    assert "B1, B1, B2, B3" in candidates["rec"] and "B3,B2,B1" in candidates["rec"]
    assert "" in candidates["rev"] and "stop" in candidates["rev"]
    (tmp_path / "r.json").write_text(json.dumps([{"run_args": {}}, {"task_id": 3, "action_acc": [1.0],
                                                                     "res_acc": [0.25]}]))
    assert result_scores(tmp_path / "r.json") == {3: [1.0, 0.25]}
    assert settings_of({"max_new_tokens": 8})["max_new_tokens"] == 8
    # the release sampled with its transformers' default top-k; greedy decoding has no sampling settings
    assert settings_of({"do_sample": True}, release_era=True)["top_k"] == 50
    assert settings_of({"do_sample": False, "top_k": 50})["top_k"] is None
    recorder = GenerateRecorder()
    recorder.calls.append({"settings": {}, "input_ids": [[0, 0, 5, 6], [7, 8, 9, 1]],
                           "attention_mask": [[0, 0, 1, 1], [1, 1, 1, 1]]})
    assert recorder.prompts() == [[5, 6], [7, 8, 9, 1]]  # left padding dropped


def test_puma_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    from devtools.parity_session import ParityConfig

    config = ParityConfig(release_dir=tmp_path, data_dir=tmp_path, checks=("puma",), puma_steps=("1", "7"))
    with pytest.raises(ParityError, match="--puma_steps: unknown '7'"):
        config.validate()
    config = ParityConfig(release_dir=tmp_path, data_dir=tmp_path, checks=("puma",), puma_trl_path=str(tmp_path))
    with pytest.raises(ParityError, match="--puma_trl_path .*no trl package"):
        config.validate()
