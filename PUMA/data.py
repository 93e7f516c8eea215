"""Step 1: SFT data for PUMA's function and parameter generation.

Function data: prompt = the function prompt with the instruction, label = the gold
function name. Parameter data: prompt = PUMA's parameter prompt with the instruction
(+ the product under review), the task-specific memory for the gold function and the
function name. The memory, as the release's PUMA builds it: the `--memory_length` (100)
past behaviours whose full text (the `puma.behaviour` block) is most similar to the
instruction, best first, recommendations newest first, each reduced to the fields the
function needs, joined by `|`, then cut to `--mem_token_length` tokens of the base model's
tokenizer counting its BOS. Label =
- search: on the train split a query written by an LLM (through `LLMClient`,
  `--query_model`) from the instruction and the uncut memory, with the protocol's label
  prompt; without a query model the offline fallback: the instruction plus the store the
  user usually buys in that product line (`PersonalWAB.agents.heuristic.search_query`);
  on the test split the target's title, as the release (test labels train nothing);
- recommend: the ASINs of the user's earlier purchases in the target's main category,
  oldest first, the last 30, ", "-joined (`--recommend_labels distinct`: each ASIN once); the
  target ASIN if none;
- review: the real review text.

Files (JSON lists of {instruction, type, split, function, prompt, label}; parameter examples
also hold `memory`, the memory before the token cut (the release's `mem` field, which its
step 3 cuts again for the generation prompt), and `product`, the product under review, so
step 5 can render a prompt with less memory): `function_{train,test}.json`,
`param_{train,test}.json` in `--out`, each with its record (`*.puma_run.json`).
Every prompt text comes from the protocol (`--protocol_file`; default: the release pack
when placed).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any, Literal

from PersonalWAB.agents.heuristic import search_query
from PUMA.prompting import cut_to_tokens, parameter_prompt, puma_behaviours
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.schema import FUNCTION_FOR_TASK_TYPE, RECOMMEND, REVIEW, SEARCH, TASK_TYPE_OF_FUNCTION
from PersonalWAB.protocol import Protocol, load_protocol
from PersonalWAB.settings import setting
from PUMA.cli import nonempty_split, parse_step
from PUMA.modeling import write_json
from PUMA.recipe import RECIPE_HELP, get_recipe, write_record
from PersonalWAB.schema_types import Behaviour, Task

RECOMMEND_LIMIT = 30
RecommendLabels = Literal["repeated", "distinct"]
SearchLabels = Literal["raw", "cleaned"]


@dataclass
class DataConfig:
    """Step 1's settings."""

    kind: str = setting("all", "which SFT data to write: function (instruction -> function name), param "
                        "(parameter prompts with memory and labels) or all", positional=True,
                        choices=("function", "param", "all"))
    data_dir: str | None = setting(None, "the benchmark data folder whose tasks and histories the examples come "
                                   "from", default_text="the official data when placed, else the bundled "
                                   "synthetic data")
    out_dir: str = setting("PUMA/data", "folder for function_{train,test}.json and param_{train,test}.json "
                           "(each with its *.puma_run.json record)", flag="out", aliases=("out_dir",), metavar="DIR")
    recipe: str = setting("release", RECIPE_HELP, metavar="NAME|FILE")
    recommend_labels: RecommendLabels = setting("repeated", "a recommend label's ASINs: repeated = the last 30 "
                                                "earlier purchases, repeats kept (the release's); distinct = the "
                                                "last 30 distinct ASINs")
    search_labels: SearchLabels = setting("raw", "an LLM's search label (--query_model): raw = its reply exactly as "
                                          "returned (the release's); cleaned = whitespace collapsed, quotes "
                                          "stripped, an empty reply replaced by the offline fallback query")
    model_path: str = setting("meta-llama/Llama-2-7b-chat-hf", "model folder or hub name whose tokenizer measures "
                              "the memory cut (only the tokenizer is loaded); use the base model you will train")
    mem_token_length: int = setting(768, "tokens (BOS included) the parameter prompt's memory is cut to; the "
                                    "paper reports 256, 512 and 768, and generation must use the same value")
    memory_length: int = setting(100, "k: the past behaviours most relevant to the instruction that make up the "
                                 "memory (the release's --mem_length)")
    splits: str = setting("train,test", "comma-separated task splits to write examples for")
    train_tasks: int = setting(-1, "the train split's examples for a sample of this many of its tasks (drawn with "
                               "seed 0, kept in split order; a run sized to a CPU); -1: every task")
    query_model: str | None = setting(None, "litellm model string that writes the train search labels (the "
                                      "release: gpt-4o-mini); without it an offline fallback query is used and "
                                      "recorded as a departure")
    api_base: str | None = setting(None, "base URL of an OpenAI-compatible endpoint for --query_model")
    max_retries: int = setting(5, "retries of a failed --query_model request before the step stops")
    protocol_file: str | None = setting(None, "protocol pack whose texts make the prompts and labels",
                                        default_text="the release pack when placed, else the project's")


def gold_function(task: Task) -> str:
    return FUNCTION_FOR_TASK_TYPE[task["type"]]


def function_examples(protocol: Protocol, tasks: list[Task], split: str) -> list[dict[str, Any]]:
    return [{"instruction": t["task"], "type": t["type"], "split": split, "function": gold_function(t),
             "prompt": protocol.puma_function_prompt(t["task"]), "label": gold_function(t)} for t in tasks]


def recommend_label(data: BenchmarkData, task: Task, distinct: bool = False,
                    limit: int = RECOMMEND_LIMIT) -> str:
    """The user's earlier purchases in the target's main category, oldest first, the last
    `limit` (with `distinct`, the last `limit` distinct ASINs); the target ASIN if none."""
    target = task["target"]["product_info"]
    earlier = data.behaviours_before(task["user_id"], task["timestamp"])
    same = [b["product_info"]["parent_asin"] for b in earlier
            if b["product_info"].get("main_category") == target.get("main_category")]
    if distinct:
        same = list(dict.fromkeys(reversed(same)))[::-1]  # each ASIN at its latest position
    asins = same[-limit:]
    return ", ".join(asins) if asins else target["parent_asin"]


def llm_query(protocol: Protocol, client: Any, instruction: str, memory: str,
              fallback: Callable[[], str], raw: bool = False) -> str:
    """The release's search label: one call with the label prompt as the system message.
    `raw` (`--search_labels raw`): the reply's content exactly as returned, "" included; no
    content (None, which the release's file stores as null and its SFT trains as the text
    "None") gives "None". Otherwise (`cleaned`) whitespace is collapsed, surrounding quotes
    are stripped and an empty reply takes `fallback`."""
    prompt = protocol.puma_search_label_prompt(instruction, memory)
    reply = client.complete([{"role": "system", "content": prompt}])
    content = reply.message.get("content")
    if raw:
        return "None" if content is None else content
    text = " ".join((content or "").split()).strip().strip('"')
    return text or fallback()


def param_label(protocol: Protocol, data: BenchmarkData, task: Task, behaviours: list[Behaviour],
                memory: str, split: str, client: Any = None, recommend_labels: RecommendLabels = "repeated",
                search_labels: SearchLabels = "raw") -> str:
    function = gold_function(task)
    if function == SEARCH:
        if split != "train":
            return task["target"]["product_info"]["title"]
        if client:
            return llm_query(protocol, client, task["task"], memory, lambda: search_query(task["task"], behaviours),
                             raw=search_labels == "raw")
        return search_query(task["task"], behaviours)  # not the release's: recorded by prepare_param_data
    if function == RECOMMEND:
        return recommend_label(data, task, recommend_labels == "distinct")
    return task["target"]["review"]["text"]


def param_examples(protocol: Protocol, data: BenchmarkData, tasks: list[Task], split: str,
                   tokenizer: Any, mem_token_length: int, memory_length: int, client: Any = None,
                   recommend_labels: RecommendLabels = "repeated", search_labels: SearchLabels = "raw"
                   ) -> list[dict[str, Any]]:
    examples = []
    for task in tasks:
        function = gold_function(task)
        behaviours = puma_behaviours(protocol, data, task, TASK_TYPE_OF_FUNCTION[function], memory_length)
        full_memory = protocol.puma_memory(behaviours, TASK_TYPE_OF_FUNCTION[function])
        memory = cut_to_tokens(full_memory, tokenizer, mem_token_length)
        product = task["target"]["product_info"] if function == REVIEW else None
        examples.append({"instruction": task["task"], "type": task["type"], "split": split, "function": function,
                         "prompt": parameter_prompt(protocol, task["task"], function, memory, product),
                         "label": param_label(protocol, data, task, behaviours, full_memory, split, client,
                                              recommend_labels, search_labels),
                         "memory": full_memory, "product": product})
    return examples


def latest_purchase_kept(data: BenchmarkData, tasks: list[Task],
                         examples: list[dict[str, Any]]) -> tuple[int, int]:
    """(kept, of): of the recommend examples whose user bought something before the task,
    how many still show that user's most recent earlier purchase (its ASIN) in the prompt's
    cut memory. The release's newest-first order keeps it in nearly all; oldest first loses it."""
    kept = total = 0
    for task, example in zip(tasks, examples):
        past = data.behaviours_before(task["user_id"], task["timestamp"])
        if example["function"] != RECOMMEND or not past:
            continue
        total += 1
        kept += past[-1]["product_info"]["parent_asin"] in example["prompt"]
    return kept, total


def _load(config: DataConfig) -> BenchmarkData:
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.paths import default_data_dir

    return load_benchmark_data(config.data_dir or default_data_dir())


def split_tasks(config: DataConfig, data: BenchmarkData, split: str) -> list[Task]:
    """The tasks of `split` whose examples are written (`--train_tasks`: a seeded sample of the train split)."""
    import random

    tasks = data.split(split)
    if split != "train" or config.train_tasks < 0 or config.train_tasks >= len(tasks):
        return tasks
    return [tasks[i] for i in sorted(random.Random(0).sample(range(len(tasks)), config.train_tasks))]


def _splits(config: DataConfig, data: BenchmarkData) -> list[str]:
    """The `--splits` to write, each checked to exist and hold tasks."""
    if config.train_tasks == 0 or config.train_tasks < -1:
        raise ValueError(f"--train_tasks {config.train_tasks}: expected a number of tasks, or -1 for every task")
    names = [name.strip() for name in config.splits.split(",")]
    for name in names:
        nonempty_split(data, name, "--splits")
    return names


def prepare_function_data(config: DataConfig, log: Callable[[str], None] = print) -> list[Path]:
    recipe = get_recipe(config.recipe)
    data = _load(config)
    splits = _splits(config, data)
    protocol = load_protocol(config.protocol_file)
    written = []
    for split in splits:
        tasks = split_tasks(config, data, split)
        path = write_json(Path(config.out_dir) / f"function_{split}.json", function_examples(protocol, tasks, split))
        write_record(path, "data", recipe, config, {"--data_dir": str(data.data_dir)}, data="function",
                     protocol=protocol.name)
        log(f"{path}: {len(tasks)} function examples")
        written.append(path)
    return written


def label_requests(config: DataConfig, client: Any, tasks: list[Task],
                   log: Callable[[str], None]) -> Any:
    """The split's search-label requests through `client` (one per search task), said before they start."""
    from PUMA.labels import LabelRequests

    total = sum(gold_function(task) == SEARCH for task in tasks)
    log(f"{total} search labels from {config.query_model} at {client.endpoint}, one request each")
    return LabelRequests(client, total)


def prepare_param_data(config: DataConfig, log: Callable[[str], None] = print) -> list[Path]:
    from PUMA.prompting import PUMA_TEMPLATE
    from PersonalWAB.memory.embeddings import build_behaviour_embeddings
    from PUMA.modeling import checked_tokenizer, model_family_of

    recipe = get_recipe(config.recipe)
    tokenizer = checked_tokenizer(config.model_path)  # before the data and the embedding: a wrong path ends at once
    data = _load(config)
    splits = _splits(config, data)
    protocol = load_protocol(config.protocol_file)
    build_behaviour_embeddings(data, protocol, log=log, template=PUMA_TEMPLATE)
    client = None
    if config.query_model:
        from PersonalWAB.llm import LLMClient

        client = LLMClient(config.query_model, api_base=config.api_base, max_retries=config.max_retries)
    written = []
    for split in splits:
        tasks = split_tasks(config, data, split)
        labels = label_requests(config, client, tasks, log) if client and split == "train" else None
        examples = param_examples(protocol, data, tasks, split, tokenizer, config.mem_token_length,
                                  config.memory_length, labels, config.recommend_labels, config.search_labels)
        if labels:
            labels.close()
        path = write_json(Path(config.out_dir) / f"param_{split}.json", examples)
        kept, of = latest_purchase_kept(data, tasks, examples)
        departures = []
        fallback = split == "train" and not config.query_model and any(e["function"] == SEARCH for e in examples)
        if fallback:
            departures.append("data: train search labels are the offline fallback query (instruction + the user's "
                              "usual store), not an LLM's (the release asks gpt-4o-mini; pass --query_model)")
            log(f"warning: {path}: no --query_model, so the train search labels are the offline fallback query, "
                f"not the release's LLM-written ones (recorded in its departures)")
        write_record(path, "data", recipe, config, {"--data_dir": str(data.data_dir)}, data="param",
                     protocol=protocol.name,
                     search_labels=("LLM " + config.query_model + (", reply kept as returned" if
                                    config.search_labels == "raw" else ", reply cleaned"))
                     if config.query_model and split == "train"
                     else "offline fallback" if split == "train" else "target title (test)",
                     extra_departures=departures,
                     latest_purchase_in_recommend_memory={"kept": kept, "of": of},
                     base_model=model_family_of(config.model_path, tokenizer),
                     label_requests=labels.summary() if labels else None)
        log(f"{path}: {len(examples)} parameter examples; the latest earlier purchase is in the cut memory of "
            f"{kept} of {of} recommend prompts")
        if labels:
            log(labels.summary_line())
        written.append(path)
    return written


def prepare_data(config: DataConfig) -> list[Path]:
    """Step 1 as `config.kind` asks: the function data, the parameter data, or both."""
    if config.kind in ("param", "all"):
        from PUMA.modeling import local_files_only

        local_files_only(config.model_path, "--model_path")  # a tokenizer it cannot load ends here, before any work
    written = prepare_function_data(config) if config.kind in ("function", "all") else []
    return written + (prepare_param_data(config) if config.kind in ("param", "all") else [])


def main(argv: list[str] | None = None) -> int:
    prepare_data(parse_step(DataConfig, argv, "python -m PUMA.data", __doc__, "data"))
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
