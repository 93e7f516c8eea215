"""GRPO on the benchmark's reward: the reward is step 4's scoring with a cache, the settings are
checked up front, the decoding fields TRL leaves to the model are set, and a short run on the tiny
random Llama logs its mean reward every step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from PUMA.prompting import parameter_prompt
from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE
from PersonalWAB.protocol import project_protocol
from PUMA.grpo import GRPOStepConfig, ResultAccReward, build_grpo_trainer, check_config
from PUMA.modeling import write_json
from PUMA.candidate_scores import score_candidates


def pick_tasks(tasks: list[dict], per_type: int) -> list[dict]:
    picked: dict[str, list[dict]] = {}
    for task in tasks:
        if len(picked.setdefault(task["type"], [])) < per_type:
            picked[task["type"]].append(task)
    return [t for group in picked.values() for t in group]


def param_file(tasks: list[dict], path: Path) -> Path:
    """Step 1's parameter prompts for `tasks` (no memory: the test needs only their shape)."""
    protocol = project_protocol()
    examples = []
    for task in tasks:
        function = FUNCTION_FOR_TASK_TYPE[task["type"]]
        product = task["target"]["product_info"] if task["type"] == "review" else None
        examples.append({"instruction": task["task"], "type": task["type"], "split": "train", "function": function,
                         "prompt": parameter_prompt(protocol, task["task"], function, "", product), "label": ""})
    return write_json(path, examples)


def test_reward_is_step_4_scoring_batched_and_cached(tiny_data, tiny_engines, monkeypatch):
    import PUMA.candidate_scores

    tasks = tiny_data.split("train")
    chosen = pick_tasks(tasks, 2)
    functions = {t["task"]: FUNCTION_FOR_TASK_TYPE[t["type"]] for t in chosen}
    guesses = {"search": lambda t: t["target"]["product_info"]["title"],
               "recommend": lambda t: ", ".join(sorted(tiny_data.products)[:5]),
               "review": lambda t: t["target"]["review"]["text"]}
    instructions, completions = [], []
    for task in chosen:
        for text in (guesses[task["type"]](task), "stop", "zzz qqq"):
            instructions.append(task["task"])
            completions.append(text)
    grouped: dict[str, list[str]] = {}
    for instruction, completion in zip(instructions, completions):
        grouped.setdefault(instruction, []).append(completion)
    expected = score_candidates(tiny_engines, tasks, grouped, functions)
    calls = []
    real = PUMA.candidate_scores.score_candidates

    def counting(*args, **kwargs):
        calls.append(sum(len(v) for v in args[2].values()))
        return real(*args, **kwargs)

    monkeypatch.setattr(PUMA.candidate_scores, "score_candidates", counting)
    reward = ResultAccReward(tiny_engines, tasks, functions)
    metrics = {}
    rewards = reward(prompts=instructions, completions=completions, instruction=instructions,
                     log_metric=metrics.__setitem__)
    assert rewards == [expected[i][c] for i, c in zip(instructions, completions)]
    assert max(rewards) > 0.9 and all(0.0 <= r <= 1.0 for r in rewards)
    assert calls == [len(set(zip(instructions, completions)))]  # one batch for every new pair
    # the same parameters again (padded as generation leaves them): all from the cache, no scoring
    again = reward(prompts=instructions, completions=[f" {c}\n" for c in completions], instruction=instructions,
                   log_metric=metrics.__setitem__)
    assert again == rewards and len(calls) == 1 and metrics["result_acc/cache_hit_rate"] == pytest.approx(0.5)
    # conversational completions are read from their last message
    chat = [[{"role": "assistant", "content": c}] for c in completions[:3]]
    assert reward(prompts=instructions[:3], completions=chat, instruction=instructions[:3]) == rewards[:3]
    with pytest.raises(ValueError, match="not a task of the scoring split"):
        reward(prompts=["x"], completions=["y"], instruction=["an instruction nobody gave"])


def test_settings_are_checked_before_anything_loads(tiny_data, tiny_model_dir, tmp_path):
    data = param_file(pick_tasks(tiny_data.split("train"), 1), tmp_path / "param.json")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    base = {"model_path": str(tiny_model_dir), "data_file": str(data), "generation_backend": "hf"}
    assert check_config(GRPOStepConfig(**base)) == "hf"
    cases = [({"vllm_mode": "remote"}, "--vllm_mode must be one of colocate, server"),
             ({"task_types": "search,shopping"}, "--task_types: shopping not among"),
             ({"num_generations": 1}, "GRPO compares a group of at least 2"),
             ({"model_path": str(adapter)}, "is a LoRA adapter folder: merge it"),
             ({"data_file": str(tmp_path / "missing.json")}, "no such file"),
             ({"generation_backend": "fast"}, "fast")]
    for change, message in cases:
        with pytest.raises(ValueError, match=message):
            check_config(GRPOStepConfig(**{**base, **change}))


@pytest.mark.slow
def test_short_grpo_run_logs_the_mean_reward_each_step(tiny_data, tiny_engines, tiny_model_dir, tmp_path):
    from PUMA.lora import save_adapter

    tasks = pick_tasks(tiny_data.split("train"), 2)
    data = param_file(tasks, tmp_path / "param.json")
    reward = ResultAccReward(tiny_engines, tiny_data.split("train"),
                             {t["task"]: FUNCTION_FOR_TASK_TYPE[t["type"]] for t in tasks})
    config = GRPOStepConfig(model_path=str(tiny_model_dir), data_file=str(data), output_dir=str(tmp_path / "grpo"),
                            task_types="search,review", max_steps=2, per_device_train_batch_size=4,
                            gradient_accumulation_steps=1, num_generations=2, max_completion_length=6,
                            max_prompt_length=96, learning_rate=1e-3, save_strategy="no", generation_backend="hf")
    lines: list[str] = []
    trainer, tokenizer = build_grpo_trainer(config, reward=reward, log=lines.append)
    assert len(trainer.train_dataset) == 4  # the search and review prompts only
    trainer.train()
    out = save_adapter(trainer, tokenizer, config.output_dir)
    assert (out / "adapter_config.json").exists() and (out / "tokenizer_config.json").exists()
    logged = [json.loads(line) for line in (out / "grpo_log.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in logged] == [1, 2]
    assert all(0.0 <= entry["rewards/result_acc/mean"] <= 1.0 for entry in logged)
    assert [line.split(":")[0] for line in lines if line.startswith("GRPO step")] == ["GRPO step 1", "GRPO step 2"]
    loss_lines = [line for line in lines if line.startswith("grpo step")]  # PUMA.train_progress, not a log dict
    assert [line.split(" (")[0] for line in loss_lines] == ["grpo step 1/2", "grpo step 2/2"]
    assert all(re.search(r": loss -?\d+\.\d{4}, lr \d\.\d\de[-+]\d\d", line) for line in loss_lines)
    assert reward.requests == 2 * 4  # two steps of 4 completions (2 prompts x 2 samples), all scored by the reward


def test_grpo_sets_the_decoding_fields_trl_leaves_to_the_model():
    from PUMA.grpo import TRL_DECODING_FIELDS, decoding_left_to_the_model

    fields = decoding_left_to_the_model()
    assert not set(fields) & set(TRL_DECODING_FIELDS)
    assert (fields["typical_p"], fields["no_repeat_ngram_size"], fields["length_penalty"]) == (1.0, 0, 1.0)
    assert None not in fields.values()
