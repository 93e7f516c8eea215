"""Which past behaviours an agent may see for a task, and how they read in a prompt
(`--agent_memory`, `--memory_length`).

Only behaviours strictly before the task's timestamp are ever eligible, so no
target (or anything after it) can leak into the memory. Modes:

- `none`: nothing.
- `last`: the `length` most recent behaviours, most recent first.
- `random`: `length` behaviours drawn with a per-task seed.
- `relevant`: the `length` behaviours most similar to the instruction (MiniLM
  cosine over `behaviour_text`, from the on-disk cache), best first.
- `recmind`: RecMind's long memory: many compact review/rating lines (the paper
  uses 400), most recent first.
- `interecagent`: the `length` most recent behaviours plus the like / dislike /
  expect lists of an `InterecMemoryStore`.
- `taskspe`: PUMA's task-specific memory: the `relevant` top `length`, keeping only
  the fields the chosen function needs (`taskspe_entries`); recommendation memory is
  in time order, oldest first, as the recommender reads a sequence.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from PersonalWAB.data.instruction_files import read_instruction_outputs
from PersonalWAB.data.loader import BenchmarkData
from PersonalWAB.data.product_text import format_price
from PersonalWAB.interec_memory import InterecMemoryStore
from PersonalWAB.memory_embeddings import clip, shared_behaviour_embeddings

MEMORY_MODES = ("none", "last", "random", "relevant", "recmind", "interecagent", "taskspe")
SEARCH, RECOMMEND, REVIEW = "search_product_by_query", "get_recommendations_by_history", "add_product_review"
TASK_FUNCTIONS = (SEARCH, RECOMMEND, REVIEW)
REVIEW_CHARS = 300  # review text shown per behaviour line
SNIPPET_CHARS = 80  # review text per RecMind line: hundreds of lines must fit a prompt


def retrieve_memory(data: BenchmarkData, task: dict[str, Any], mode: str, length: int, seed: int = 0, *,
                    function_name: str | None = None,
                    interec_store: InterecMemoryStore | None = None) -> list[dict[str, Any]]:
    """Up to `length` of the user's behaviours before the task, in the mode's order
    (for `interecagent`, the history part; `interec_store` only matters to
    `format_memory`). `taskspe` without a function keeps the relevance order."""
    if mode not in MEMORY_MODES:
        raise ValueError(f"unknown memory {mode!r}; expected one of {MEMORY_MODES}")
    if mode == "none" or length <= 0:
        return []
    past = data.behaviours_before(task["user_id"], task["timestamp"])
    if mode in ("last", "recmind", "interecagent"):
        return past[::-1][:length]
    if mode == "random":
        rng = random.Random(f"{seed}:{task['user_id']}:{task['timestamp']}")
        return rng.sample(past, min(length, len(past)))
    chosen = most_relevant(data, task, past, length)
    if mode == "taskspe" and function_name == RECOMMEND:
        return sorted(chosen, key=lambda b: b["review"]["timestamp"])
    return chosen


def most_relevant(data: BenchmarkData, task: dict[str, Any], past: list[dict[str, Any]],
                  length: int) -> list[dict[str, Any]]:
    """The `length` behaviours of `past` (a prefix of the user's history) closest to
    the instruction, best first; ties keep the older behaviour first."""
    if not past:
        return []
    scores = shared_behaviour_embeddings(data).scores(task["user_id"], task["task"], len(past))
    order = np.argsort(-scores, kind="stable")[:length]
    return [past[i] for i in order]


def format_memory(data: BenchmarkData, task: dict[str, Any], mode: str, length: int, seed: int = 0, *,
                  function_name: str | None = None, interec_store: InterecMemoryStore | None = None) -> str:
    """The memory block of an agent's prompt: numbered lines, one per entry (empty
    for `none`). `taskspe` needs the function the entries are selected for."""
    if mode == "taskspe" and function_name is None:
        raise ValueError("taskspe memory needs function_name (the function PUMA's function file chose)")
    behaviours = retrieve_memory(data, task, mode, length, seed, function_name=function_name)
    if mode == "none":
        return ""
    if mode == "taskspe":
        return numbered(taskspe_entries(behaviours, function_name))
    if mode == "recmind":
        return numbered([recmind_line(b) for b in behaviours])
    history = numbered([behaviour_line(b) for b in behaviours])
    if mode != "interecagent":
        return history
    store = interec_store or InterecMemoryStore(None)
    return f"{store.format(task['user_id'])}\nHistory (most recent first):\n{history or '(none)'}"


def numbered(lines: list[str]) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, start=1))


def _date(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


def _price(product: dict[str, Any]) -> str:
    price = format_price(product.get("price"))
    return "price unknown" if price == "unknown" else f"${price}"


def behaviour_line(behaviour: dict[str, Any]) -> str:
    """One purchase and its review on one line: what a general-purpose agent needs
    (what, where, how much, when, how the user felt) without the full product text."""
    product, review = behaviour["product_info"], behaviour["review"]
    category = " > ".join((product.get("categories") or [product.get("main_category", "")])[-2:])
    return (f"[{_date(review['timestamp'])}] {clip(product.get('title', ''), 150)} "
            f"(ASIN {product.get('parent_asin', '')}; {product.get('store', '')}; {_price(product)}; {category}) "
            f"- rated {review['rating']:g}/5, \"{clip(review.get('title', ''), 80)}\": "
            f"{clip(review.get('text', ''), REVIEW_CHARS)}")


def recmind_line(behaviour: dict[str, Any]) -> str:
    """A compact RecMind entry: the agent can look details up by ASIN."""
    product, review = behaviour["product_info"], behaviour["review"]
    return (f"{clip(product.get('title', ''), 80)} (ASIN {product.get('parent_asin', '')}) "
            f"rated {review['rating']:g}/5: {clip(review.get('text', ''), SNIPPET_CHARS)}")


def taskspe_entries(behaviours: list[dict[str, Any]], function_name: str) -> list[str]:
    """PUMA's task-specific memory entries: only the fields `function_name` needs,
    joined by ` | ` (search: title, category, price, store; recommend: title,
    category, parent ASIN, oldest first; review: rating and review text)."""
    if function_name == SEARCH:
        return [" | ".join((clip(b["product_info"].get("title", ""), 200), b["product_info"].get("main_category", ""),
                            _price(b["product_info"]), b["product_info"].get("store", ""))) for b in behaviours]
    if function_name == RECOMMEND:
        in_time = sorted(behaviours, key=lambda b: b["review"]["timestamp"])
        return [" | ".join((clip(b["product_info"].get("title", ""), 200), b["product_info"].get("main_category", ""),
                            b["product_info"].get("parent_asin", ""))) for b in in_time]
    if function_name == REVIEW:
        return [f"{b['review']['rating']:g}/5 | {' '.join(b['review'].get('text', '').split())}" for b in behaviours]
    raise ValueError(f"unknown function {function_name!r}; expected one of {TASK_FUNCTIONS}")


def normalise_function_name(output: str) -> str | None:
    """The task function a model's output names (e.g. `search_product_by_query()`,
    ` Add_Product_Review`), or None when it names none or several."""
    text = output.strip().lower()
    named = [name for name in TASK_FUNCTIONS if name in text]
    return named[0] if len(named) == 1 else None


def load_function_file(path: Path | str) -> dict[str, str]:
    """PUMA's function choices: instruction text -> function name.

    The file maps each instruction to a generated output or a list of them (the first
    counts). Outputs that name no task function are left out, so callers fall back to
    their default for them as for instructions the file does not hold.
    """
    functions: dict[str, str] = {}
    for instruction, output in read_instruction_outputs(path, "function").items():
        name = normalise_function_name(output) if isinstance(output, str) else None
        if name is not None:
            functions[instruction] = name
    return functions


def task_function(functions: dict[str, str] | None, instruction: str, default: str) -> str:
    """The function PUMA's file chose for the instruction, else `default`."""
    return (functions or {}).get(instruction, default)
