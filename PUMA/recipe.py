"""PUMA's two training recipes and the record each step leaves next to its output.

`release` does every step as the release's code does (DESIGN §10), quirks included, so a
researcher gets the release's model; `improved` keeps everything else and changes only
the choices listed in `IMPROVED_DEPARTURES`, each with its reason. Every step takes
`--recipe` (default `release`), refuses inputs another recipe made, and writes a record
(`puma_run.json` inside an output folder, `<name>.puma_run.json` beside an output file)
naming the recipe, its departures from the release, the step's settings and its inputs.

Nothing here loads torch: the runner imports it to label its result files.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RECIPES = ("release", "improved")
RECORD_NAME = "puma_run.json"
RECORD_SUFFIX = ".puma_run.json"


@dataclass(frozen=True)
class Departure:
    """One way the improved recipe differs from the release, at one step, and why."""

    step: str  # data | sft | score | dpo_data | dpo | agent
    what: str
    why: str

    def line(self) -> str:
        return f"{self.step}: {self.what} ({self.why})"


IMPROVED_DEPARTURES = (
    Departure("data", "recommend labels keep each ASIN once (the latest 30 distinct)",
              "the agent de-duplicates the ASINs it sends, so repeats only lengthen the label"),
    Departure("sft", "loss on the label tokens only (prompt and padding masked)",
              "the release also trains on every EOS pad up to max_length, which outweighs the label"),
    Departure("sft", "no padding: each micro-batch is packed into one row with restarting positions",
              "the same per-example loss as padding (exact with a block-diagonal mask) without pad compute"),
    Departure("sft", "bf16 mixed precision on a GPU (the release: fp16)",
              "no loss scaling or fp16 overflow; same speed on Ampere and newer GPUs"),
    Departure("score", "a candidate the agent would read as a message (`Say:`) or a stop scores 0",
              "the release scores it as a search query or review, which the agent would never send"),
    Departure("score", "a review candidate is scored as the environment scores a posted review: the cosine "
                       "clipped to [0, 1], an empty one as the protocol's placeholder text",
              "pairs then follow the benchmark's own Result Acc (the release keeps negative cosines and scores "
              "an empty review as \"\")"),
    Departure("data", "LLM search labels have their whitespace collapsed and surrounding quotes stripped; an empty "
                      "reply takes the offline fallback query",
              "a quoted, multi-line or empty query is not a parameter the agent should learn to send"),
    Departure("generate_param", "parameters are generated from the example's training prompt (product block, "
                                "gold function, the step-1 cut), new tokens decoded and stripped, repeats dropped",
              "the release rebuilds the prompt without the product and with the predicted function, so the model "
              "generates from a prompt it was never trained on"),
    Departure("dpo_data", "instructions whose candidates all score the same (or that have one) give no pair",
              "chosen and rejected would carry no preference"),
    Departure("dpo", "an over-long prompt loses the end of its memory, never its header or instruction",
              "the release cuts the prompt's start, dropping the instruction from most long prompts"),
    Departure("agent", "live generation reads the training prompt: its template, product text and relevance "
                       "text, and an empty memory for a user without earlier purchases",
              "the release trains with one prompt and evaluates with another (and writes `none` for no memory)"),
    Departure("agent", "the memory is formatted for the predicted function",
              "the release formats it for the true task type, a label the agent should not see (a wrong "
              "function scores 0 either way, so the scores do not move)"),
    Departure("agent", "`Say:` is recognised in any case and only an exact `stop` stops",
              "the release stops on any output starting with stop (e.g. a query `stop watch`)"),
    Departure("agent", "bf16 live generation on a GPU that supports it (the release: fp16)", "no fp16 overflow"),
    Departure("agent", "a function output counts when it names exactly one task function anywhere, in any case "
                       "(e.g. ` Search_Product_By_Query()`)",
              "the release takes only the exact name; a choice a reader can recognise should not fail the task"),
    Departure("agent", "in multi-turn (--max_steps N) the agent stops after its one action",
              "the release decides again every step, the same action until N: the same scores at N times the steps"),
)

# Where the release's own code is a bug, `--recipe release` keeps the fix and records it here (and in
# every step's record), so a reader of `puma_run.json` sees each place it differs from the release.
_ORDERED_ASINS = ("recommend candidates are read as their ASINs, each once, in first-occurrence order",
                  "the release's list(set(...)) orders them by string hash, which Python randomises per process "
                  "(PYTHONHASHSEED): the recommender's input, and so the same candidate's score, changes run to run")
RELEASE_BUG_FIXES: tuple[Departure, ...] = (
    Departure("score", *_ORDERED_ASINS),
    Departure("fast_test", *_ORDERED_ASINS),
    Departure("data", 'under the release recipe a search label the LLM returned without content (None) is stored '
                      'as the string "None"',
              "the release's file keeps null, which its SFT formats into the text it trains on, \"None\"; "
              "examples here need a string label, and this one trains the same tokens"),
    Departure("agent", "a function output that is not exactly a task function's name (and whose parameter is no "
                       "`Say:` message or stop) is sent as a message, scored (0, 0), and the task stops",
              "the release leaves its action unset, so env.step raises UnboundLocalError, which its "
              "ThreadPoolExecutor.map re-raises in the main loop: the run dies before its scores, and again on resume"),
    Departure("agent", "--puma_generate puts an adapter (unmerged, as the release) on the base its "
                       "adapter_config.json names",
              "the release puts it on a hard-coded meta-llama/Llama-2-7b-chat-hf, the wrong model for an adapter "
              "trained on another base"),
    Departure("agent", "--puma_generate reads the model folder's own tokenizer (AutoTokenizer)",
              "the release's LlamaTokenizer, in transformers 5 a class that rebuilds Llama's SentencePiece-style "
              "pipeline over the folder's vocabulary, mis-tokenizes a tokenizer of another kind (same ids on a "
              "Llama tokenizer)"),
)


@dataclass(frozen=True)
class Recipe:
    """What differs between the two recipes, step by step (everything else is shared)."""

    name: str
    distinct_recommend_label: bool  # step 1
    label_only_loss: bool  # step 2: False = the release's loss over max-length EOS padding
    packed_batches: bool  # step 2
    gpu_train_dtype: str  # step 2 / 6 on a GPU: "float16" | "bfloat16"
    skip_uninformative_pairs: bool  # step 5
    keep_prompt_whole: bool  # steps 5-6: cut the memory instead of the prompt's start
    training_prompt_at_eval: bool  # step 7
    predicted_type_memory: bool  # step 7
    strict_release_parsing: bool  # step 7
    gpu_eval_dtype: str  # step 7 on a GPU
    repeat_action: bool = False  # step 7 multi-turn: the decided action every step (the release's agent)

    def departures(self, step: str | None = None) -> list[str]:
        """This recipe's departures from the release (one step's, or all), as lines."""
        chosen = RELEASE_BUG_FIXES if self.name == "release" else RELEASE_BUG_FIXES + IMPROVED_DEPARTURES
        return [d.line() for d in chosen if step is None or d.step == step]


SHARED = "memory k = 100 relevant behaviours, recommend memory newest first, the BOS-inclusive 768-token cut, " \
         "LoRA with modules_to_save, warmup ratio 0.1, 32-token functions, beam search with early stopping"

_RECIPES = {
    "release": Recipe("release", distinct_recommend_label=False, label_only_loss=False, packed_batches=False,
                      gpu_train_dtype="float16", skip_uninformative_pairs=False, keep_prompt_whole=False,
                      training_prompt_at_eval=False, predicted_type_memory=False, strict_release_parsing=True,
                      gpu_eval_dtype="float16", repeat_action=True),
    "improved": Recipe("improved", distinct_recommend_label=True, label_only_loss=True, packed_batches=True,
                       gpu_train_dtype="bfloat16", skip_uninformative_pairs=True, keep_prompt_whole=True,
                       training_prompt_at_eval=True, predicted_type_memory=True, strict_release_parsing=False,
                       gpu_eval_dtype="bfloat16"),
}


def get_recipe(name: str) -> Recipe:
    if name not in _RECIPES:
        raise ValueError(f"--recipe {name!r}: expected one of {', '.join(RECIPES)}")
    return _RECIPES[name]


def record_path(output: str | Path) -> Path:
    """Where a step's record goes: inside an output folder, or beside an output file."""
    output = Path(output)
    if output.is_dir() or not output.suffix:
        return output / RECORD_NAME
    return output.with_name(output.name.removesuffix(".json") + RECORD_SUFFIX)


def read_record(output: str | Path) -> dict[str, Any] | None:
    path = record_path(output)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_inputs(recipe: Recipe, inputs: dict[str, str | None]) -> None:
    """Refuse an input that a step of the other recipe wrote (inputs without a record, e.g.
    files made by hand or by the release's scripts, are taken as they are)."""
    for flag, path in inputs.items():
        if not path:
            continue
        record = read_record(path)
        if record is not None and record.get("recipe") != recipe.name:
            raise ValueError(f"{flag} {path}: made with --recipe {record.get('recipe')} (see "
                             f"{record_path(path)}), this step runs --recipe {recipe.name}; rerun that step "
                             f"with --recipe {recipe.name} or run this one with --recipe {record.get('recipe')}")


def _plain(settings: Any) -> dict[str, Any]:
    return asdict(settings) if is_dataclass(settings) else dict(settings)


def write_record(output: str | Path, step: str, recipe: Recipe, settings: Any,
                 inputs: dict[str, str | None] | None = None, **facts: Any) -> Path:
    """Write the step's record next to `output` (on the main process only under accelerate)."""
    if int(os.environ.get("RANK", "0")) != 0:
        return record_path(output)
    path = record_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"step": step, "recipe": recipe.name, "departures_from_release": recipe.departures(step),
              "all_departures_of_recipe": recipe.departures(), "shared_with_release": SHARED,
              "settings": _plain(settings), "inputs": {k: v for k, v in (inputs or {}).items() if v},
              "written": datetime.now(timezone.utc).isoformat(timespec="seconds"), **facts}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, path)
    return path
