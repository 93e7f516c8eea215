"""The prompts of the construction pipeline and of the profile-consistency judge, and
the parsers of their answers.

The paper describes what the prompts ask for (profiles with eleven fields inferred from
a user's behaviours; per task type, instructions written in the user's voice: search
requests that leave the user's preferences implicit, vague history-based recommendation
requests, requests to review a bought product); the wording here is the project's own.
Behaviours and products are shown as compact one-line or few-line summaries, so a user
with a long history still fits a small context window.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any

from PersonalWAB.data.product_text import format_price
from PersonalWAB.data.schema import PROFILE_FIELDS
from PersonalWAB.schema_types import Behaviour, Product, UserProfile

LEVEL_FIELDS = ("Price Sensitivity", "Diversity Preference", "Interaction Complexity")
LEVELS = ("Low", "Medium", "High")
AGE_BUCKETS = ("18-24", "25-34", "35-44", "45-54", "55-64", "65+")
REVIEW_WORDS = 60  # review text shown per behaviour
FEATURES_SHOWN = 3

PROFILE_SYSTEM = (
    "You build shopper profiles for a benchmark of personalized shopping assistants. From one person's "
    "purchase and review history, infer who they probably are and how they shop, and fill in exactly these "
    "eleven fields:\n"
    "- Gender: Male or Female, your best guess.\n"
    f"- Age: one of {', '.join(AGE_BUCKETS)}.\n"
    "- Occupation: a plausible occupation in a few words.\n"
    "- Price Sensitivity: Low, Medium or High (how closely they watch prices).\n"
    "- Shopping Interest: the product areas they buy in, comma-separated, most important first.\n"
    "- Brand Preference: the brands or stores they return to, comma-separated, most frequent first.\n"
    "- Diversity Preference: Low, Medium or High (how much they vary categories and brands).\n"
    "- Interaction Complexity: Low, Medium or High (how detailed and demanding their requests and reviews are).\n"
    "- Tone and Style: how they write, in a few words.\n"
    "- Item Reference: how they refer to products (by brand, by type, by feature, ...).\n"
    "- Focus Aspect: the product qualities they care about most, comma-separated.\n"
    "Reply with a single JSON object whose keys are exactly these field names and whose values are strings, "
    "and nothing else."
)
INSTRUCTION_SYSTEM = (
    "You write what a shopper types to a personal shopping assistant on a web store. Write in the first "
    "person, in the shopper's own voice as their profile describes it (tone, level of detail, how they refer "
    "to products). Reply with the request alone: one to three sentences, no quotation marks, no preamble."
)
SEARCH_TASK = (
    "Task type: search. Write the request this shopper makes to find the target product. Say what they need "
    "and the attributes that matter to them, so a search can find it, but leave their personal preferences "
    "implicit where their purchase history would reveal them: do not name a brand or store they usually buy "
    "from, and do not copy the product title."
)
RECOMMEND_TASK = (
    "Task type: recommend. Write a vague request for a recommendation based on what this shopper has bought "
    "before. Mention at most the broad area the target product belongs to; never name the product, its brand "
    "or its specific features."
)
REVIEW_TASK = (
    "Task type: review. Write the request this shopper makes to have the assistant write and post a review "
    "of the target product, which they bought. Refer to the product the way this shopper would; you may hint "
    "at how they felt about it, but do not write the review itself."
)
TASK_TEXT = {"search": SEARCH_TASK, "recommend": RECOMMEND_TASK, "review": REVIEW_TASK}
PROFILE_RETRY = ("That reply could not be used ({problem}). Reply again with only the JSON object holding the "
                 "eleven fields.")
INSTRUCTION_RETRY = "That reply could not be used ({problem}). Reply again with the request alone."
INSTRUCTION_DUPLICATE = ("Another task already uses exactly this request. Write a different request for the same "
                         "task, following the same rules.")

MATCH_SYSTEM = (
    "You judge whether a shopper profile fits a purchase history. You are shown one profile and several "
    "purchase histories, exactly one of which belongs to the person the profile describes. Reply with the "
    "letter of that history only."
)
RANK_SYSTEM = (
    "You judge which products suit a shopper profile. You are shown one profile and a numbered list of "
    "products. Rank all of them from the most to the least likely to be bought by the person the profile "
    "describes. Reply with the product numbers only, best first, separated by commas."
)


# ---------------------------------------------------------------- rendering


def _date(timestamp_ms: int) -> str:
    return dt.datetime.fromtimestamp(timestamp_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d")


def _words(text: str, limit: int) -> str:
    words = " ".join(text.split()).split(" ")
    return " ".join(words[:limit]) + (" ..." if len(words) > limit else "")


def category_path(product: Mapping[str, Any]) -> str:
    """Main category, then the category path ("All Electronics / Electronics > Headphones")."""
    path = " > ".join(product.get("categories") or [])
    return f"{product.get('main_category', '')} / {path}" if path else str(product.get("main_category", ""))


def behaviour_line(behaviour: Mapping[str, Any]) -> str:
    """One purchase with its review, on one line."""
    product, review = behaviour["product_info"], behaviour["review"]
    text = _words(f"{review['title']}. {review['text']}".strip(" ."), REVIEW_WORDS)
    return (f"- {_date(review['timestamp'])} | {product['title']} | category: {category_path(product)} | "
            f"store: {product['store']} | price: {format_price(product['price'])} | "
            f"rated {review['rating']:g}/5 | review: {text}")


def product_block(product: dict[str, Any]) -> str:
    """A product in a few lines: what a shopper would know about it."""
    features = "; ".join(_words(f, 25) for f in (product.get("features") or [])[:FEATURES_SHOWN])
    lines = [f"Title: {product['title']}", f"Category: {category_path(product)}", f"Store: {product['store']}",
             f"Price: {format_price(product['price'])}"]
    if features:
        lines.append(f"Key features: {features}")
    return "\n".join(lines)


def product_line(number: int, product: Mapping[str, Any]) -> str:
    """A product on one numbered line (the ranking judge's list)."""
    return (f"[{number}] {product['title']} | category: {category_path(product)} | store: {product['store']} | "
            f"price: {format_price(product['price'])}")


def profile_block(profile: Mapping[str, object]) -> str:
    return "\n".join(f"{name}: {profile.get(name, '')}" for name in PROFILE_FIELDS)


# ---------------------------------------------------------------- pipeline prompts


def profile_prompt(behaviours: list[dict[str, Any]]) -> str:
    """The user message asking for a profile, behaviours oldest first."""
    lines = "\n".join(behaviour_line(b) for b in behaviours)
    return f"Purchase and review history ({len(behaviours)} purchases, oldest first):\n{lines}"


def instruction_prompt(task_type: str, profile: Mapping[str, object], target: dict[str, Any],
                       recent: list[dict[str, Any]]) -> str:
    """The user message asking for one instruction: the task, the profile, the target and
    (for recommendations) the purchases just before it."""
    parts = [TASK_TEXT[task_type], f"Shopper profile:\n{profile_block(profile)}",
             f"Target product:\n{product_block(target['product_info'])}"]
    if task_type == "recommend" and recent:
        parts.append("Their most recent purchases before it:\n" + "\n".join(behaviour_line(b) for b in recent))
    if task_type == "review":
        parts.append(f"They rated it {target['review']['rating']:g} out of 5.")
    return "\n\n".join(parts)


# ---------------------------------------------------------------- judge prompts


def option_letter(index: int) -> str:
    return chr(ord("A") + index)


def match_prompt(profile: UserProfile, options: list[list[Behaviour]]) -> str:
    """Profile plus K lettered purchase histories."""
    parts = [f"Profile:\n{profile_block(profile)}"]
    for i, behaviours in enumerate(options):
        parts.append(f"History {option_letter(i)}:\n" + "\n".join(behaviour_line(b) for b in behaviours))
    parts.append(f"Which history (A-{option_letter(len(options) - 1)}) belongs to this shopper?")
    return "\n\n".join(parts)


def rank_prompt(profile: UserProfile, products: list[Product]) -> str:
    """Profile plus N numbered products."""
    lines = "\n".join(product_line(i, p) for i, p in enumerate(products, start=1))
    return (f"Profile:\n{profile_block(profile)}\n\nProducts:\n{lines}\n\n"
            f"Rank all {len(products)} products, best first.")


# ---------------------------------------------------------------- answer parsing


class AnswerError(ValueError):
    """A model answer that cannot be used; the message says why (it is sent back to the model)."""


def _json_object(text: str) -> dict[str, Any]:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise AnswerError("no JSON object found")
    try:
        value = json.loads(text[start : end + 1])
    except ValueError as exc:
        raise AnswerError(f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise AnswerError("the JSON is not an object")
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_as_text(v) for v in value)
    return "" if value is None else " ".join(str(value).split())


def parse_profile(text: str) -> dict[str, str]:
    """The eleven fields, as strings; Low/Medium/High fields normalised. Raises AnswerError."""
    found = {key.strip().lower(): value for key, value in _json_object(text).items()}
    profile: dict[str, str] = {}
    missing = [name for name in PROFILE_FIELDS if name.lower() not in found]
    if missing:
        raise AnswerError(f"missing field(s): {', '.join(missing)}")
    for name in PROFILE_FIELDS:
        value = _as_text(found[name.lower()])
        if name in LEVEL_FIELDS:
            level = next((lv for lv in LEVELS if lv.lower() == value.lower()), None)
            if level is None:
                raise AnswerError(f"{name} must be Low, Medium or High, got {value!r}")
            value = level
        elif not value:
            raise AnswerError(f"{name} is empty")
        profile[name] = value
    return profile


_LABEL = re.compile(r"^(request|instruction|user|shopper)\s*:\s*", re.IGNORECASE)


def parse_instruction(text: str) -> str:
    """The request on one line, without wrapping quotes or a leading label. Raises AnswerError."""
    cleaned = " ".join(text.split())
    cleaned = _LABEL.sub("", cleaned).strip()
    if len(cleaned) >= 2 and cleaned[0] == cleaned[-1] and cleaned[0] in "\"'“”":
        cleaned = cleaned[1:-1].strip()
    cleaned = cleaned.strip("“”\"").strip()
    if len(cleaned.split()) < 3:
        raise AnswerError("the request is empty or shorter than three words")
    return cleaned


def parse_choice(text: str, options: int) -> int | None:
    """The chosen option's index (A = 0), or None when the answer names none."""
    letters = "".join(option_letter(i) for i in range(options))
    match = re.search(rf"\b([{letters}])\b", text.upper())
    return None if match is None else letters.index(match.group(1))


def parse_ranking(text: str, count: int) -> tuple[list[int], bool]:
    """Indices (0-based) best first, and whether the answer ranked every item; items it
    left out follow in the order they were shown."""
    seen: list[int] = []
    for token in re.findall(r"\d+", text):
        index = int(token) - 1
        if 0 <= index < count and index not in seen:
            seen.append(index)
    complete = len(seen) == count
    return seen + [i for i in range(count) if i not in seen], complete
