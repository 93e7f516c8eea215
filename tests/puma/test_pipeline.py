"""PUMA pipeline: SFT labels/loss, parameter parsing, the puma agent, and a
short SFT -> generation -> DPO pass on a tiny random Llama (CPU, no hub)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from PUMA.prompting import OutputRules, parse_asins, parse_parameters
from PersonalWAB.protocol import project_protocol
from PersonalWAB.data.schema import RECOMMEND, REVIEW, SEARCH
from PUMA.agent_settings import PumaAgentSettings
from PUMA.cli import recipe_config


def test_parameter_parsing_rules():
    assert parse_asins(" B1, B2 ,B1,, B3 ,B2") == ["B1", "B2", "B3"]
    action = parse_parameters(RECOMMEND, "B9, B2, B9, B1")
    assert action.name == RECOMMEND and action.arguments == {"product_sequence": ["B9", "B2", "B1"]}
    assert parse_parameters(SEARCH, "  red kettle  ").arguments == {"query": "red kettle"}
    assert parse_parameters(REVIEW, "Great mug.").arguments == {"review": "Great mug."}
    rules = OutputRules.of(project_protocol(), "lenient")
    say = parse_parameters(SEARCH, "Say: which colour do you want?", rules)
    assert say.name == "respond" and say.arguments == {"content": "which colour do you want?"}
    assert parse_parameters(REVIEW, " stop ", rules).name == "stop"
    assert parse_parameters(REVIEW, " stop ").name == REVIEW  # no rules: scored as the parameter it is


def test_collator_masks_prompt_and_padding_and_loss_covers_labels_only(tiny_model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM

    from PUMA.modeling import load_tokenizer
    from PUMA.sft import IGNORE_INDEX, PaddingCollator, encode_example

    tokenizer = load_tokenizer(tiny_model_dir)
    examples = [encode_example(tokenizer, "Instruction: find a kettle\nFunction: ", "search_product_by_query", 64),
                encode_example(tokenizer, "Instruction: review it please, the mug I bought\nParameter: ", "ok", 64)]
    for example, label in zip(examples, ["search_product_by_query", "ok"]):
        n_label = len(tokenizer(label, add_special_tokens=False)["input_ids"]) + 1
        assert example["labels"][:-n_label] == [IGNORE_INDEX] * (len(example["input_ids"]) - n_label)
        assert example["labels"][-n_label:] == example["input_ids"][-n_label:]
        assert example["input_ids"][-1] == tokenizer.eos_token_id
    batch = PaddingCollator(tokenizer.pad_token_id)(examples)
    longest = max(len(e["input_ids"]) for e in examples)
    assert batch["input_ids"].shape == (2, longest)
    short = min(range(2), key=lambda i: len(examples[i]["input_ids"]))
    pad = longest - len(examples[short]["input_ids"])
    assert pad > 0
    assert (batch["labels"][short, -pad:] == IGNORE_INDEX).all()
    assert (batch["attention_mask"][short, -pad:] == 0).all()

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        out = model(**batch)
    logits = out.logits[:, :-1]
    targets = batch["input_ids"][:, 1:]
    keep = batch["labels"][:, 1:] != IGNORE_INDEX
    manual = torch.nn.functional.cross_entropy(logits[keep], targets[keep])
    assert torch.isclose(out.loss, manual, atol=1e-5)


def test_gold_files_round_trip_through_the_puma_agent(tiny_data, tiny_engines, tmp_path: Path):
    from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    tasks = tiny_data.split("test")
    functions = {t["task"]: [FUNCTION_FOR_TASK_TYPE[t["type"]]] for t in tasks}
    params = {}
    for t in tasks:
        target = t["target"]
        params[t["task"]] = {"search": target["product_info"]["title"], "review": target["review"]["text"],
                             "recommend": target["product_info"]["parent_asin"]}[t["type"]]
    (tmp_path / "f.json").write_text(json.dumps(functions))
    (tmp_path / "p.json").write_text(json.dumps(params))
    config = RunConfig(agent_strategy="puma", data_dir=str(tiny_data.data_dir), task_split="test",
                       agent_options={"puma": PumaAgentSettings(puma_function_file=str(tmp_path / "f.json"),
                                                                puma_param_file=str(tmp_path / "p.json"))},
                       out=str(tmp_path / "result.json"), agent_memory="none")
    header, _, _ = run(config, log=lambda _: None)
    from PersonalWAB.results import load_result_file

    assert header["results"]["overall"]["avg_action_acc"] == 1.0
    _, records = load_result_file(tmp_path / "result.json")
    assert len(records) == len(tasks)
    assert all(r["action_acc"] == [1.0] for r in records)
    reviews = [r["res_acc"][0] for r in records if r["info"]["task"]["type"] == "review"]
    assert reviews and min(reviews) > 0.99
    searches = [r["res_acc"][0] for r in records if r["info"]["task"]["type"] == "search"]
    assert sum(searches) / len(searches) > 0.5


def test_missing_instruction_and_bad_function_output(tiny_data, tmp_path: Path):
    from PUMA.agent import PumaAgent

    task = tiny_data.split("test")[0]
    (tmp_path / "f.json").write_text(json.dumps({task["task"]: "I do not know"}))
    (tmp_path / "p.json").write_text(json.dumps({}))
    agent = PumaAgent(tiny_data, str(tmp_path / "f.json"), str(tmp_path / "p.json"))
    protocol = project_protocol()
    assert agent.decide(protocol, task).name == "respond"
    with pytest.raises(ValueError, match="function file has no entry"):
        agent.decide(protocol, tiny_data.split("test")[1])


@pytest.mark.slow
def test_short_sft_generate_dpo_pass(tiny_data, tiny_model_dir: Path, tmp_path: Path):
    from PUMA.data import function_examples
    from PUMA.dpo import DPOStepConfig, train_dpo
    from PUMA.generate import GenerateConfig, generate_file
    from PUMA.merging import MergeConfig, merge_adapter
    from PUMA.modeling import write_json
    from PUMA.sft import SFTConfig, train_sft

    tasks = tiny_data.split("train")[:6]
    examples = function_examples(project_protocol(), tasks, "train")
    write_json(tmp_path / "function_train.json", examples)
    sft = train_sft(SFTConfig(model_path=str(tiny_model_dir), train_on="function",
                              function_data=str(tmp_path / "function_train.json"), output_dir=str(tmp_path / "sft"),
                              num_train_epochs=1, per_device_train_batch_size=2, gradient_accumulation_steps=1,
                              max_length=128, save_strategy="no", logging_steps=1))
    assert (sft / "adapter_config.json").exists()
    merged = merge_adapter(MergeConfig(adapter_path=str(sft), output_dir=str(tmp_path / "merged")))
    write_json(tmp_path / "param_train.json", [dict(e, memory="") for e in examples])
    write_json(tmp_path / "functions.json", {e["instruction"]: [e["label"]] for e in examples})
    out = generate_file(GenerateConfig(model_path=str(merged), mode="param",
                                       data_file=str(tmp_path / "param_train.json"),
                                       function_file=str(tmp_path / "functions.json"),
                                       output_file=str(tmp_path / "cands.json"), max_new_tokens=6,
                                       num_return_sequences=3, num_beams=3, do_sample=True, batch_size=6),
                        log=lambda _: None)
    candidates = json.loads(out.read_text())
    assert set(candidates) == {t["task"] for t in tasks}
    assert all(1 <= len(v) <= 3 for v in candidates.values())
    pairs = [{"prompt": e["prompt"], "chosen": e["label"], "rejected": "add_product_review"} for e in examples]
    write_json(tmp_path / "dpo.json", pairs)
    dpo = train_dpo(DPOStepConfig(model_path=str(merged), data_file=str(tmp_path / "dpo.json"),
                                  output_dir=str(tmp_path / "dpo"), num_train_epochs=1,
                                  per_device_train_batch_size=2, gradient_accumulation_steps=1, max_length=128,
                                  max_prompt_length=96, save_strategy="no", logging_steps=1))
    assert (dpo / "adapter_config.json").exists()


def test_search_labels_written_by_an_llm(tiny_data):
    from PersonalWAB.agents.heuristic import search_query
    from PersonalWAB.llm import LLMClient
    from devtools.doubles.scripted_server import ScriptedLLMServer, ScriptedReply
    from PUMA.data import llm_query

    task = next(t for t in tiny_data.split("train") if t["type"] == "search")
    behaviours = tiny_data.behaviours_before(task["user_id"], task["timestamp"])
    replies = [ScriptedReply(content='"wireless earbuds  TROOIX"'), ScriptedReply(content="")]
    protocol = project_protocol()
    with ScriptedLLMServer(replies) as server:
        client = LLMClient("openai/query-writer", api_base=server.url, max_retries=0)
        memory = protocol.puma_memory(behaviours, "search")
        fallback = lambda: search_query(task["task"], behaviours)  # noqa: E731
        assert llm_query(protocol, client, task["task"], memory, fallback) == "wireless earbuds TROOIX"
        assert llm_query(protocol, client, task["task"], memory, fallback) == search_query(task["task"], behaviours)
        assert server.requests[0]["messages"] == [{"role": "system", "content": protocol.puma_search_label_prompt(
            task["task"], memory)}]
        assert server.requests[0]["temperature"] == 0.0


@pytest.mark.slow
def test_live_generation_with_the_puma_agent(tiny_data, tiny_engines, tiny_model_dir: Path, tmp_path: Path):
    from PersonalWAB.results import load_result_file
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    config = RunConfig(agent_strategy="puma", data_dir=str(tiny_data.data_dir), task_split="test",
                       agent_options={"puma": PumaAgentSettings(puma_generate=True,
                                                                puma_model_path=str(tiny_model_dir))}, end_index=3,
                       out=str(tmp_path / "live.json"))
    header, path, _ = run(config, log=lambda _: None)
    _, records = load_result_file(path)
    assert len(records) == 3 and not any("error" in r["info"] for r in records)
    assert all(len(r["info"]["usage"]["total_tokens"]) >= 1 for r in records)
    assert header["results"]["overall"]["total_count"] == 3


def test_review_candidates_are_scored_against_the_cached_real_review(tiny_data, tiny_engines):
    from PersonalWAB.build import review_cache_file
    from PUMA.candidate_scores import score_candidates

    task = next(t for t in tiny_data.tasks["train"] if t["type"] == "review")
    real = task["target"]["review"]["text"]
    candidates = {task["task"]: [real, "Say: hello", "Unrelated words about tax law."]}
    scores = score_candidates(tiny_engines, [task], candidates)
    assert scores[task["task"]][real] == pytest.approx(1.0, abs=1e-5)
    assert scores[task["task"]]["Say: hello"] == 0.0
    assert scores[task["task"]]["Unrelated words about tax law."] < 0.9
    assert review_cache_file(tiny_data).exists()  # the real review is kept for the next run


def _puma_files(tmp_path: Path, tasks, functions: dict[str, str], params: dict[str, str]) -> tuple[str, str]:
    """A function and a parameter file (lists of one output, as PUMA/generate.py writes)."""
    (tmp_path / "f.json").write_text(json.dumps({t["task"]: [functions[t["task"]]] for t in tasks}))
    (tmp_path / "p.json").write_text(json.dumps({t["task"]: [params[t["task"]]] for t in tasks}))
    return str(tmp_path / "f.json"), str(tmp_path / "p.json")


def _gold(tasks) -> tuple[dict[str, str], dict[str, str]]:
    from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE

    functions = {t["task"]: FUNCTION_FOR_TASK_TYPE[t["type"]] for t in tasks}
    params = {t["task"]: {"search": t["target"]["product_info"]["title"], "review": t["target"]["review"]["text"],
                          "recommend": t["target"]["product_info"]["parent_asin"]}[t["type"]] for t in tasks}
    return functions, params


def test_release_recipe_takes_only_the_exact_function_name(tiny_data, tmp_path: Path):
    from PUMA.agent import PumaAgent

    tasks = tiny_data.split("test")[:4]
    functions = {tasks[0]["task"]: SEARCH, tasks[1]["task"]: " Search_Product_By_Query()",
                 tasks[2]["task"]: "search_product_by_query\n", tasks[3]["task"]: "the weather"}
    params = {tasks[0]["task"]: "red kettle", tasks[1]["task"]: "red kettle", tasks[2]["task"]: "stop it",
              tasks[3]["task"]: "Say: which colour?"}
    files = _puma_files(tmp_path, tasks, functions, params)
    release, improved = (PumaAgent(tiny_data, *files, settings=recipe_config(PumaAgentSettings, "agent", recipe))
                         for recipe in ("release", "improved"))
    protocol = project_protocol()
    assert release.decide(protocol, tasks[0]) == improved.decide(protocol, tasks[0])
    assert release.decide(protocol, tasks[0]).arguments == {"query": "red kettle"}
    # the release compares the stored string: any other spelling names no function
    assert [release.choose_function(protocol, t)[0] for t in tasks] == [SEARCH, None, None, None]
    assert [improved.choose_function(protocol, t)[0] for t in tasks] == [SEARCH, SEARCH, SEARCH, None]
    action, failure = release.decision(protocol, tasks[1])
    assert action.name == "respond" and action.arguments == {"content": " Search_Product_By_Query()"} and failure
    assert improved.decide(protocol, tasks[1]).arguments == {"query": "red kettle"}
    # the release reads a `Say:` or stop parameter before it needs the function
    assert release.decision(protocol, tasks[2]) == (release.decide(protocol, tasks[2]), None)
    assert release.decide(protocol, tasks[2]).name == "stop"
    assert release.decide(protocol, tasks[3]).to_dict() == {"name": "respond",
                                                            "arguments": {"content": "which colour?"}}
    assert improved.decide(protocol, tasks[3]).arguments == {"content": "the weather"}


@pytest.mark.parametrize("recipe", ["release", "improved"])
def test_a_function_output_naming_no_tool_scores_zero_and_the_run_goes_on(tiny_data, tiny_engines, tmp_path: Path,
                                                                        recipe):
    from PersonalWAB.results import load_result_file
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    tasks = tiny_data.split("test")[:4]
    functions, params = _gold(tasks)
    functions[tasks[1]["task"]] = "Search_Product_By_Query" if recipe == "release" else "no idea"
    f, p = _puma_files(tmp_path, tasks, functions, params)
    config = RunConfig(agent_strategy="puma", data_dir=str(tiny_data.data_dir), task_split="test", end_index=4,
                       agent_options={"puma": recipe_config(PumaAgentSettings, "agent", recipe, puma_function_file=f,
                                                            puma_param_file=p)},
                       out=str(tmp_path / "r.json"), agent_memory="none")
    header, path, _ = run(config, log=lambda _: None)
    records = sorted(load_result_file(path)[1], key=lambda r: r["task_id"])
    assert len(records) == 4 and not any("error" in r["info"] for r in records)
    # the release's run dies on this task (its action is unset); scored as the failed task it is
    failed = records[1]
    assert failed["action_acc"] == [0.0] and failed["res_acc"] == [0.0]
    assert failed["info"]["puma_function"].startswith("the function output names no task function")
    assert [m["role"] for m in failed["traj"]] == ["system", "user", "assistant", "user"]
    assert all(r["action_acc"] == [1.0] for r in records if r is not failed)
    assert header["results"]["overall"]["avg_action_acc"] == pytest.approx(0.75)


def test_multi_turn_steps_release_repeats_its_action_improved_stops(tiny_data, tiny_engines, tmp_path: Path):
    from PersonalWAB.results import load_result_file
    from PersonalWAB.runner.config import RunConfig
    from PersonalWAB.runner.execute import run

    tasks = tiny_data.split("test")[:3]
    functions, params = _gold(tasks)
    params[tasks[2]["task"]] = "stop"
    files = _puma_files(tmp_path, tasks, functions, params)
    results = {}
    for recipe in ("release", "improved"):
        config = RunConfig(agent_strategy="puma", data_dir=str(tiny_data.data_dir), task_split="test", end_index=3,
                           agent_options={"puma": recipe_config(PumaAgentSettings, "agent", recipe,
                                                                puma_function_file=files[0], puma_param_file=files[1])},
                           max_steps=3, user_mode="offline", out=str(tmp_path / f"{recipe}.json"),
                           agent_memory="none")
        header, path, _ = run(config, log=lambda _: None)
        results[recipe] = header["results"], sorted(load_result_file(path)[1], key=lambda r: r["task_id"])
    (release_stats, release), (improved_stats, improved) = results["release"], results["improved"]
    for i in (0, 1):
        name = functions[tasks[i]["task"]]
        # the release: the same action each of the 3 steps, each an assistant call and its tool answer
        assert [a["name"] for a in release[i]["info"]["actions"]] == [name] * 3
        assert len(release[i]["info"]["usage"]["total_tokens"]) == 3
        assert len(release[i]["action_acc"]) == 3 and len(set(release[i]["res_acc"])) == 1
        assert [m["role"] for m in release[i]["traj"]] == ["system", "user"] + ["assistant", "tool"] * 3
        assert len({m["tool_calls"][0]["function"]["arguments"] for m in release[i]["traj"][2::2]}) == 1
        # improved: the action once, then stop
        assert [a["name"] for a in improved[i]["info"]["actions"]] == [name, "stop"]
        assert len(improved[i]["info"]["usage"]["total_tokens"]) == 2 and len(improved[i]["action_acc"]) == 1
        assert max(release[i]["res_acc"]) == improved[i]["res_acc"][0]
    for records in (release, improved):  # a stop parameter: one step under both
        assert [a["name"] for a in records[2]["info"]["actions"]] == ["stop"] and records[2]["action_acc"] == []
    for key in ("avg_action_acc", "avg_res_acc"):
        assert release_stats["overall"][key] == pytest.approx(improved_stats["overall"][key])
    assert release_stats["overall"]["avg_interaction_times"] == pytest.approx((3 + 3 + 1) / 3)
    assert improved_stats["overall"]["avg_interaction_times"] == pytest.approx((2 + 2 + 1) / 3)
