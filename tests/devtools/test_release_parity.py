"""The release parity harness without the release: its command line, its settings checks, the
mirror it builds (over a made-up release tree), and how it reads request logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from devtools.parity.compare import body_difference, first_difference, score_verdict
from devtools.parity.requests import ParityModel, by_task, compare_first_requests
from devtools.parity.mirror import REQUIRED_FILES, ParityError, build_mirror
from tests.conftest import HANG_GUARD_S, REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "tools" / "release_parity.py"


def release_parity_script() -> ModuleType:
    """scripts/tools/release_parity.py as a module (its settings dataclass looks its module up)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("release_parity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_cli_help_names_the_checks() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    for word in ("--release_dir", "--data_dir", "--limit", "observations", "first_request", "multiturn_user"):
        assert word in out.stdout


def test_cli_rejects_a_folder_that_is_not_the_release(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--release_dir", str(tmp_path), "--data_dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=HANG_GUARD_S)
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


@pytest.fixture(scope="session")
def sentencepiece_model_dir(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama with the SentencePiece tokenizer trained with Llama's settings (the puma check's stand-in)."""
    from PUMA.tiny_model import TinyModelConfig, make_tiny_model

    return make_tiny_model(tiny_data_dir, tmp_path_factory.mktemp("tiny_llama_sp"),
                           TinyModelConfig(vocab_size=400, tokenizer="sentencepiece"))


@pytest.mark.slow
def test_puma_worker_loads_the_stand_in_for_the_hub_name_and_records_generate(tmp_path: Path,
                                                                             sentencepiece_model_dir: Path) -> None:
    from devtools.parity.mirror import WORKER

    release = fake_release(tmp_path / "release")
    (release / "PersonalWAB" / "__init__.py").write_text("", encoding="utf-8")
    (release / "PUMA").mkdir()
    (release / "PUMA" / "test_llama.py").write_text(FAKE_TEST_LLAMA, encoding="utf-8")
    data = fake_data(tmp_path / "data")
    mirror = build_mirror(release, data, parent=tmp_path, index_dir=data / "indexes" / "lucene")
    work = tmp_path / "work"
    work.mkdir()
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"command": "script", "mirror": str(mirror.root), "cwd": str(work),
                                   "script": "PUMA/test_llama.py",
                                   "hub": {"meta-llama/Llama-2-7b-chat-hf": str(sentencepiece_model_dir)},
                                   "record": str(work / "calls.json"), "release_argv": ["--test_on", "param"]}))
    out = subprocess.run([sys.executable, str(WORKER), str(request)],
                         capture_output=True, text=True, timeout=HANG_GUARD_S, env={**__import__("os").environ,
                                                                           "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads((work / "out.json").read_text())
    assert seen == {"same_ids": True, "argv": ["--test_on", "param"]}  # LlamaTokenizer reads tokenizer.model
    (call,) = json.loads((work / "calls.json").read_text())["generate"]
    assert call["settings"]["max_new_tokens"] == 3 and len(call["output_ids"][0]) == len(call["input_ids"][0]) + 3


def test_puma_check_compares_every_field_and_request() -> None:
    from devtools.parity.puma import compare_examples, compare_requests, label_reply

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


def test_puma_check_result_scores_and_settings(tmp_path: Path) -> None:
    from devtools.parity.puma import GenerateRecorder, result_scores, settings_of

    (tmp_path / "r.json").write_text(json.dumps([{"run_args": {}}, {"task_id": 3, "action_acc": [1.0],
                                                                     "res_acc": [0.25]}]))
    assert result_scores(tmp_path / "r.json") == {3: [1.0, 0.25]}
    assert settings_of({"effective": {"max_new_tokens": 8}})["max_new_tokens"] == 8
    # greedy decoding reads no sampling settings
    assert settings_of({"effective": {"do_sample": False, "top_k": 50}})["top_k"] is None
    recorder = GenerateRecorder()
    recorder.calls.append({"settings": {}, "input_ids": [[0, 0, 5, 6], [7, 8, 9, 1]],
                           "attention_mask": [[0, 0, 1, 1], [1, 1, 1, 1]]})
    assert recorder.prompts() == [[5, 6], [7, 8, 9, 1]]  # left padding dropped


def test_puma_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    from devtools.parity.settings import ParitySettings

    def settings(**values: object) -> ParitySettings:
        return ParitySettings(release_dir=str(tmp_path), data_dir=str(tmp_path), checks=["puma"], **values)

    with pytest.raises(ParityError, match="--puma_steps: unknown '7'"):
        settings(puma_steps="1,7").validate()
    with pytest.raises(ParityError, match=r"install them once with `bash scripts/tools/install_release_libs.sh DIR`"):
        settings().validate()
    with pytest.raises(ParityError, match="--release_libs .*missing: not a directory"):
        settings(release_libs=str(tmp_path / "missing")).validate()
    (tmp_path / "libs" / "transformers").mkdir(parents=True)
    with pytest.raises(ParityError, match="--release_libs .*libs: no tokenizers, trl, peft, .* package in it"):
        settings(release_libs=str(tmp_path / "libs")).validate()


def test_the_harness_hands_the_worker_one_json_request(tmp_path: Path) -> None:
    """The worker parses no command line (nothing of this project loads before the release's
    package): the harness writes its request beside the log, and a field the worker does not
    know stops it, named."""
    from types import SimpleNamespace

    from devtools.parity.mirror import WORKER, ReleaseRunner

    (tmp_path / "texts.json").write_text(json.dumps(["B2,B1"]))
    runner = ReleaseRunner(SimpleNamespace(root=tmp_path), [str(tmp_path / "extra")], sys.executable, 120)
    log_path = tmp_path / "orders.log"
    runner.finish(runner.start("set_orders", log_path, texts=tmp_path / "texts.json", out=tmp_path / "orders.json"),
                  "set_orders", log_path)
    assert sorted(json.loads((tmp_path / "orders.json").read_text())["B2,B1"]) == ["B1", "B2"]
    request = json.loads((tmp_path / "orders.request.json").read_text())
    assert (request["command"], request["mirror"], request["texts"]) == ("set_orders", str(tmp_path),
                                                                         str(tmp_path / "texts.json"))
    assert request["extra_paths"] == [str(tmp_path / "extra")] and request["libs_out"].endswith("orders.libs.json")
    (tmp_path / "bad.json").write_text(json.dumps({**request, "mirrors": "x"}))
    out = subprocess.run([sys.executable, str(WORKER), str(tmp_path / "bad.json")], capture_output=True, text=True,
                         timeout=HANG_GUARD_S)
    assert out.returncode != 0 and "unknown request field(s) mirrors" in out.stderr


def test_a_check_named_after_extra_path_is_explained(tmp_path: Path) -> None:
    """`--extra_path DIR puma` reads `puma` as a second folder: the error says to name the checks first."""
    from PersonalWAB.settings import parse
    from devtools.parity.settings import ParitySettings

    argv = ["--release_dir", str(tmp_path), "--data_dir", str(tmp_path), "--extra_path", str(tmp_path), "puma"]
    settings = parse(ParitySettings, argv)
    assert settings.extra_path == [str(tmp_path), "puma"] and settings.checks == []
    with pytest.raises(ParityError, match="puma is a check; --extra_path takes the folders up to the next flag"):
        settings.validate()


def test_the_worker_refuses_release_libs_it_would_not_import(tmp_path: Path) -> None:
    """A library missing from the folder would silently come from this project's: the worker stops."""
    from devtools.parity.mirror import WORKER

    (tmp_path / "transformers").mkdir()
    (tmp_path / "transformers" / "__init__.py").write_text("", encoding="utf-8")
    code = (f"import sys; sys.path.insert(0, {str(WORKER.parent)!r}); from pathlib import Path; "
            f"from worker import use_release_libs; use_release_libs(Path({str(tmp_path)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode != 0 and f"tokenizers is not in --release_libs {tmp_path}" in out.stderr


@pytest.mark.slow
def test_library_versions_of_both_sides_are_reported(tmp_path: Path) -> None:
    from devtools.parity.libraries import release_versions, summary_line
    from devtools.parity.release.worker import LIBRARIES, library_versions

    import torch

    here = library_versions(load=True)
    assert set(here) == set(LIBRARIES) and here["torch"]["version"] == torch.__version__
    assert Path(here["transformers"]["path"]).name == "transformers"
    torch_found = {"version": "2.13.0", "path": "/t"}
    commands = {"release_step1": {"torch": torch_found,
                                  "transformers": {"version": "4.45.2", "path": "/l/transformers"}, "trl": None},
                "release_step6": {"torch": torch_found, "trl": {"version": "0.11.4", "path": "/l/trl"}}}
    merged = release_versions(commands)
    assert merged == {"torch": ["2.13.0"], "transformers": ["4.45.2"], "trl": ["0.11.4"]}
    line = summary_line({"release": merged, "release_libs": "/libs", "project": {"transformers": "5.0"}})
    assert "release torch 2.13.0, transformers 4.45.2, trl 0.11.4 (from /libs); project transformers 5.0" in line


def test_the_sentencepiece_stand_in_has_llamas_settings(tmp_path: Path) -> None:
    from sentencepiece import SentencePieceProcessor, sentencepiece_model_pb2

    from PUMA.modeling import load_tokenizer
    from PUMA.tiny_model import train_sentencepiece

    words = ["kettle", "mug", "red", "blue", "steel", "glass", "lamp", "chair", "table", "desk"]
    texts = [f"Find a {a} {b} for 12 dollars." for a in words for b in words]
    folder = train_sentencepiece(iter(texts), tmp_path / "sp", vocab_size=300)
    proto = sentencepiece_model_pb2.ModelProto.FromString((folder / "tokenizer.model").read_bytes())
    spec, normalizer = proto.trainer_spec, proto.normalizer_spec
    assert (spec.model_type, spec.byte_fallback, spec.split_digits) == (spec.BPE, True, True)
    assert (normalizer.name, normalizer.add_dummy_prefix, normalizer.remove_extra_whitespaces) == ("identity", True,
                                                                                                   False)
    pieces = SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    assert [pieces.id_to_piece(i) for i in range(3)] == ["<unk>", "<s>", "</s>"] and pieces.pad_id() == -1
    tokenizer = load_tokenizer(folder)
    ids = tokenizer("a ☃ kettle")["input_ids"]
    assert ids[0] == 1 and 0 not in ids  # BOS first; the unseen character falls back to bytes, not <unk>
    assert "<0xE2>" in tokenizer.convert_ids_to_tokens(ids)
    assert tokenizer.decode(ids, skip_special_tokens=True) == "a ☃ kettle"
    assert tokenizer("Find 12")["input_ids"][-2:] == [pieces.piece_to_id("1"), pieces.piece_to_id("2")]
    assert (tokenizer.pad_token, tokenizer.eos_token_id) == ("</s>", 2)  # no pad: EOS, as the release set it


def test_tokenizer_comparison_names_the_text_that_differs(tmp_path: Path) -> None:
    from devtools.parity.tokenizer import LEADING_SPACE, compare, step1_texts

    for name, kind in (("function_data.json", "function"), ("param_data.json", "param")):
        example = {"instruction": "i", "prompt": f"{kind} P", "target": "T",
                   **({"mem": "M"} if kind == "param" else {})}
        (tmp_path / name).write_text(json.dumps({"train": [example], "test": []}), encoding="utf-8")
    texts, kinds = step1_texts(tmp_path)
    assert texts[:3] == ["function P", "T", "function PT</s>"] and kinds[-1] == "memory" and len(texts) == 7
    ids = [[1, 5 + i] for i in range(len(texts))]
    release = {"LlamaTokenizer": {"ids": ids}, "AutoTokenizer": {"ids": ids},
               "LlamaTokenizer legacy": {"ids": ids[:-1] + [[1, 9]]}}
    assert compare(release, {"ids": ids}, texts, kinds).all_identical
    differs = compare(release, {"ids": ids[:4] + [[1, 922, 9]] + ids[5:]}, texts, kinds)
    assert (differs.compared, differs.identical) == (7, 6)
    assert differs.first_difference["kind"] == "label" and differs.first_difference["at"] == 1
    assert differs.noted == {"texts the legacy mode would cut otherwise": 1}
    # a label led by whitespace loses SentencePiece's dummy "▁" in transformers 5: noted, as no side
    # tokenizes a label alone; the same on a prompt counts
    spaced = ["  T" if kind == "label" else text for text, kind in zip(texts, kinds)]
    release["LlamaTokenizer"] = {"space_id": 922, "ids": [[1, 922, 922, 7] if kind == "label" else row
                                                          for row, kind in zip(ids, kinds)]}
    project = {"ids": [[1, 922, 7] if kind == "label" else row for row, kind in zip(ids, kinds)]}
    noted = compare(release, project, spaced, kinds)
    assert noted.all_identical and noted.noted[LEADING_SPACE] == 2
    release["LlamaTokenizer"]["ids"][0] = [1, 922, 922, 7]
    prompt_led = compare(release, {"ids": [[1, 922, 7]] + project["ids"][1:]}, [" P"] + spaced[1:], kinds)
    assert (prompt_led.compared, prompt_led.identical) == (7, 6)
    assert prompt_led.first_difference["kind"] == "function prompt"


def test_generation_settings_are_compared_as_the_library_ran_them(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The recorder sees the settings after the library's own merging of defaults, so a
    model folder's sampling defaults (Llama-2-chat's top-p 0.9) show up as a difference."""
    import shutil

    import torch
    from transformers import GenerationConfig

    from devtools.parity.puma import GenerateRecorder, compare_settings, with_chat_generation_defaults
    from PUMA.modeling import decoding_config, load_causal_lm, model_defaults_ignored

    folder = with_chat_generation_defaults(Path(shutil.copytree(tiny_model_dir, tmp_path / "chat")))
    model, tokenizer = load_causal_lm(folder, for_generation=True, dtype=torch.float32)
    ids = tokenizer(["a red kettle"], return_tensors="pt")
    pinned = decoding_config(tokenizer, max_new_tokens=3, num_beams=2, do_sample=True, temperature=1.5,
                             decoding="release")
    with GenerateRecorder() as pinned_calls, model_defaults_ignored(model):
        model.generate(**ids, generation_config=pinned)
    partial = GenerationConfig(max_new_tokens=3, num_beams=2, num_return_sequences=2, do_sample=True, temperature=1.5)
    with GenerateRecorder() as partial_calls:
        model.generate(**ids, generation_config=partial)
    assert pinned_calls.calls[0]["effective"]["top_p"] == 1.0
    assert partial_calls.calls[0]["effective"]["top_p"] == 0.9  # taken from the folder
    tally = compare_settings(pinned_calls.calls, partial_calls.calls)
    assert not tally.all_identical and "top_p" in json.dumps(tally.to_dict())
    assert compare_settings(pinned_calls.calls, pinned_calls.calls).all_identical


def test_the_puma_check_runs_every_step_by_default() -> None:
    from devtools.parity.puma_context import STEPS

    from devtools.parity.settings import ParitySettings

    assert set(ParitySettings(release_dir="r", data_dir="d").step_names) == set(STEPS)


def test_every_check_is_one_row_of_the_table_and_loads_as_a_check() -> None:
    from devtools.parity.check import Check
    from devtools.parity.checks import CHECKS, DEFAULT_CHECKS

    assert [entry.name for entry in CHECKS] == ["observations", "first_request", "multiturn_user", "puma"]
    assert DEFAULT_CHECKS == ("observations", "first_request", "multiturn_user")
    for entry in CHECKS:
        check: Check = entry.load()
        assert all(callable(getattr(check, step)) for step in ("prepare", "run", "compare"))
