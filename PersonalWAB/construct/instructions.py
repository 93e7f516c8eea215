"""Step `instructions`: one LLM-written instruction per planned task.

Each request shows the task type's rules, the user's profile, the target product (and
for a recommendation the purchases just before it, for a review the rating given).
Unusable answers are sent back with the problem named; an instruction that repeats an
earlier one of the same split (instruction texts key PUMA's files) is sent back asking
for a different wording. Both get `REPAIRS` more tries; tasks still without a usable
instruction are dropped, repeats that remain are kept and counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PersonalWAB.construct import prompts
from PersonalWAB.construct.config import BuildConfig
from PersonalWAB.construct.llm_cache import CachedLLM, Request, ask_with_repairs, request

Log = Callable[[str], None]
REPAIRS = 3
EXPECTED_COMPLETION_TOKENS = 45  # one to three sentences, for the dry run's estimate


def task_record(user_id: str, task_type: str, text: str, behaviour: dict[str, Any]) -> dict[str, Any]:
    """A task in the official shape; its timestamp is the target behaviour's."""
    return {"user_id": user_id, "task": text, "type": task_type, "timestamp": behaviour["review"]["timestamp"],
            "target": {"product_info": behaviour["product_info"], "review": behaviour["review"]}}


def instruction_requests(config: BuildConfig, histories: dict[str, list[dict[str, Any]]],
                         profiles: dict[str, dict[str, str]], plan: list[dict[str, Any]]) -> list[Request]:
    """The first request of every planned task whose user has a profile (plan order)."""
    out = []
    for entry in plan:
        if entry["user_id"] not in profiles:
            continue
        behaviours = histories[entry["user_id"]]
        i = entry["index"]
        recent = behaviours[max(0, i - config.recent_behaviours) : i] if config.recent_behaviours else []
        text = prompts.instruction_prompt(entry["type"], profiles[entry["user_id"]], behaviours[i], recent)
        out.append(request(prompts.INSTRUCTION_SYSTEM, text, config.instruction_max_tokens))
    return out


def write_instructions(config: BuildConfig, llm: CachedLLM, histories: dict[str, list[dict[str, Any]]],
                       profiles: dict[str, dict[str, str]], plan: list[dict[str, Any]], log: Log) -> dict[str, Any]:
    """The `instructions` step's output: the train and test task lists and what was lost."""
    entries = [e for e in plan if e["user_id"] in profiles]
    asked = ask_with_repairs(llm, instruction_requests(config, histories, profiles, plan), prompts.parse_instruction,
                             prompts.INSTRUCTION_RETRY, "instruction", REPAIRS,
                             recheck=lambda texts: _repeats(entries, texts),
                             recheck_message=prompts.INSTRUCTION_DUPLICATE)
    texts = asked.values
    tasks: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for entry, text in zip(entries, texts):
        if text is not None:
            behaviour = histories[entry["user_id"]][entry["index"]]
            tasks[entry["split"]].append(task_record(entry["user_id"], entry["type"], text, behaviour))
    lost = sum(text is None for text in texts)
    repeats = len(_repeats(entries, texts))
    if lost or repeats:
        log(f"instructions: {lost} task(s) dropped without a usable instruction, {repeats} repeated text(s) kept")
    return {"tasks": tasks, "dropped": lost, "repeated": repeats, "repair_requests": asked.repair_requests,
            "skipped_without_profile": len(plan) - len(entries)}


def _repeats(entries: list[dict[str, Any]], texts: list[str | None]) -> list[int]:
    """Positions whose text an earlier task of the same split already has."""
    seen: set[tuple[str, str]] = set()
    out = []
    for i, (entry, text) in enumerate(zip(entries, texts)):
        if text is None:
            continue
        key = (entry["split"], text)
        if key in seen:
            out.append(i)
        seen.add(key)
    return out
