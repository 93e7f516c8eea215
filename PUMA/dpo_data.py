"""Step 5: DPO pairs from scored parameter candidates.

One pair per parameter example (one per train task) whose instruction was scored: chosen
= the first best-scoring candidate, rejected = the *last* worst-scoring one (the
release's `get_chosen_reject`). `--pairs all` (the release's) keeps every such pair, ties and
single candidates included (chosen and rejected are then equal-scoring or the same text);
`--pairs informative` (improved) drops those, as they carry no preference. The prompt is the
example's parameter prompt from the SFT parameter data.

`--prompt_cut memory` (improved) keeps every prompt whole: when prompt + the longer response
(+ EOS) would exceed `--max_length` tokens of `--model_path`'s tokenizer, the prompt is
rendered again with the end of its memory cut off (never its header, instruction or
tool), where the release's trainer cuts the prompt's start instead (`PUMA/dpo.py`).

Output: JSON list of {prompt, chosen, rejected, instruction, chosen_score, rejected_score},
and its record (`*.puma_run.json`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any, Literal

from PersonalWAB.settings import setting
from PUMA.prompting import PromptCut
from PUMA.recipe import RECIPE_HELP

Pairs = Literal["all", "informative"]


@dataclass
class DPODataConfig:
    """Step 5's settings."""

    scores_file: str = setting("PUMA/output/param_candidates_train_scores.json", "step 4's scores "
                               "(instruction -> {candidate: score})")
    param_data: str = setting("PUMA/data/param_train.json", "step 1's parameter examples, whose prompts the pairs "
                              "take")
    output_file: str = setting("PUMA/data/dpo_train.json", "JSON list of preference pairs (its record beside it)",
                               flag="out", aliases=("output_file",), metavar="FILE")
    recipe: str = setting("release", RECIPE_HELP, metavar="NAME|FILE")
    pairs: Pairs = setting("all", "all: a pair for every scored instruction, ties and single candidates included "
                           "(the release's); informative: only pairs whose chosen scores above the rejected")
    prompt_cut: PromptCut = setting("start", "start: prompts as they are (the DPO step cuts an over-long one's start, "
                                    "as the release); memory: an over-long prompt is rendered again with the end of "
                                    "its memory cut off to fit --max_length (the DPO step must then cut by memory too)")
    model_path: str = setting("PUMA/output/sft_merged", "--prompt_cut memory: the model whose tokenizer measures the "
                              "prompts (the model DPO trains)")
    max_length: int = setting(1024, "--prompt_cut memory: the DPO step's --max_length the prompts are fitted to")
    protocol_file: str | None = setting(None, "--prompt_cut memory: the protocol pack that renders the shortened "
                                        "prompts", default_text="the release pack when placed, else the project's")


def chosen_and_rejected(scored: dict[str, float]) -> tuple[str, str]:
    """The first candidate with the best score and the last with the worst."""
    best, worst = max(scored.values()), min(scored.values())
    chosen = next(c for c, s in scored.items() if s == best)
    rejected = [c for c, s in scored.items() if s == worst][-1]
    return chosen, rejected


def make_pairs(scores: dict[str, dict[str, float]], examples: list[dict[str, Any]],
               skip_uninformative: bool) -> list[dict[str, Any]]:
    """A pair for each example whose instruction has scored candidates (in example order)."""
    pairs = []
    for example in examples:
        scored = scores.get(example["instruction"])
        if not scored:
            continue
        chosen, rejected = chosen_and_rejected(scored)
        if skip_uninformative and scored[chosen] == scored[rejected]:
            continue
        pairs.append({"prompt": example["prompt"], "chosen": chosen, "rejected": rejected,
                      "instruction": example["instruction"], "chosen_score": scored[chosen],
                      "rejected_score": scored[rejected]})
    return pairs


def fitted_prompt(protocol: Any, tokenizer: Any, example: dict[str, Any], pair: dict[str, Any],
                  max_length: int) -> str:
    """The example's prompt with as much of its memory as lets prompt + the longer response
    + EOS fit in `max_length` tokens (the prompt as it is when it fits; no memory at all
    when even that is too long: the trainer then shortens the responses)."""
    from PUMA.prompting import cut_to_tokens, parameter_prompt

    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=True)["input_ids"])

    response = max(length(pair["chosen"]), length(pair["rejected"])) + 1 - tokenizer.num_special_tokens_to_add()
    prompt, memory = pair["prompt"], example["memory"]  # the memory before the step-1 token cut
    bare = length(parameter_prompt(protocol, example["instruction"], example["function"], "", example["product"]))
    while length(prompt) + response > max_length and memory:
        overflow = length(prompt) + response - max_length
        shown = min(len(tokenizer(memory, add_special_tokens=False)["input_ids"]), length(prompt) - bare)
        kept = shown - overflow
        memory = cut_to_tokens(memory, tokenizer, kept + tokenizer.num_special_tokens_to_add()) if kept > 0 else ""
        prompt = parameter_prompt(protocol, example["instruction"], example["function"], memory, example["product"])
    return prompt


def fit_prompts(pairs: list[dict[str, Any]], examples: list[dict[str, Any]], config: DPODataConfig) -> int:
    """Shorten the memory of the pairs' prompts that do not fit (in place); how many changed."""
    from PersonalWAB.protocol import load_protocol
    from PUMA.modeling import load_tokenizer

    protocol, tokenizer = load_protocol(config.protocol_file), load_tokenizer(config.model_path)
    by_instruction = {e["instruction"]: e for e in examples}
    changed = 0
    for pair in pairs:
        example = by_instruction[pair["instruction"]]
        if "memory" not in example:
            raise ValueError(f"{config.param_data}: examples lack the `memory` field that --prompt_cut memory needs to "
                             "shorten a prompt; make the parameter data again with PUMA.data")
        prompt = fitted_prompt(protocol, tokenizer, example, pair, config.max_length)
        changed += prompt != pair["prompt"]
        pair["prompt"] = prompt
    return changed


def build_dpo_data(config: DPODataConfig, log: Callable[[str], None] = print) -> Path:
    from PUMA.modeling import read_json, write_json
    from PUMA.recipe import check_inputs, get_recipe, write_record
    from PUMA.step_inputs import check_scores_and_examples, refuse_part

    recipe = get_recipe(config.recipe)
    inputs = {"--scores_file": config.scores_file, "--param_data": config.param_data}
    check_inputs(recipe, inputs)
    refuse_part("--scores_file", config.scores_file)
    scores = read_json(config.scores_file)
    examples = read_json(config.param_data)
    check_scores_and_examples(config.scores_file, scores, config.param_data, examples)
    pairs = make_pairs(scores, examples, config.pairs == "informative")
    shortened = fit_prompts(pairs, examples, config) if config.prompt_cut == "memory" else 0
    path = write_json(config.output_file, pairs)
    scored = sum(1 for e in examples if scores.get(e["instruction"]))
    write_record(path, "dpo_data", recipe, config, inputs, pairs=len(pairs), scored_examples=scored,
                 prompts_with_shortened_memory=shortened)
    log(f"{path}: {len(pairs)} preference pairs from {scored} scored examples"
        + (f" ({shortened} prompts with a shortened memory)" if shortened else ""))
    return path


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    build_dpo_data(parse_step(DPODataConfig, argv, "python -m PUMA.dpo_data", __doc__, "dpo_data"))
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
