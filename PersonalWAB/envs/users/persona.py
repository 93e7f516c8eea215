"""A user's profile turned into a persona: who they are and how they behave while shopping."""

from __future__ import annotations

import re
from typing import Any

from PersonalWAB.data.product_text import price_value

PRICE_BEHAVIOUR = {
    "high": "You watch every dollar: you question anything that looks expensive and ask for cheaper options.",
    "medium": "You care about value for money but will pay a bit more for something clearly better.",
    "low": "Price hardly matters to you; quality and fit come first.",
}
DIVERSITY_BEHAVIOUR = {
    "high": "You like trying new brands and styles and are happy to see varied suggestions.",
    "medium": "You are open to some new options but lean towards what you already know.",
    "low": "You stick to familiar brands and kinds of products and dislike unfamiliar suggestions.",
}
COMPLEXITY_BEHAVIOUR = {
    "high": "You give detailed feedback and may raise several points in one message.",
    "medium": "You give short but specific feedback, one or two points at a time.",
    "low": "You keep things brief; your replies are a few words long and you rarely elaborate.",
}
_LEVEL = re.compile(r"\b(high|medium|low)\b", re.IGNORECASE)


def level(value: Any) -> str:
    match = _LEVEL.search(str(value or ""))
    return match.group(1).lower() if match else "medium"


def persona_text(profile: dict[str, str]) -> str:
    """Bullet lines describing the user, with the behavioural traits rewritten as behaviour."""
    lines = []
    for key in ("Gender", "Age", "Occupation"):
        if profile.get(key):
            lines.append(f"- {key}: {profile[key]}")
    for key, label in (("Shopping Interest", "Interests"), ("Brand Preference", "Brands you have bought"),
                       ("Focus Aspect", "What you pay attention to"), ("Tone and Style", "How you write"),
                       ("Item Reference", "How you refer to products")):
        if profile.get(key):
            lines.append(f"- {label}: {profile[key]}")
    lines.append(f"- {PRICE_BEHAVIOUR[level(profile.get('Price Sensitivity'))]}")
    lines.append(f"- {DIVERSITY_BEHAVIOUR[level(profile.get('Diversity Preference'))]}")
    lines.append(f"- {COMPLEXITY_BEHAVIOUR[level(profile.get('Interaction Complexity'))]}")
    return "\n".join(lines)


def price_band(price: Any) -> str | None:
    value = price_value(price)
    if value is None:
        return None
    for limit in (10, 25, 50, 100, 200):
        if value < limit:
            return f"under ${limit}"
    return "over $200"


def key_features(product: dict[str, Any], limit: int = 3) -> list[str]:
    """Short feature phrases: the lead-in of each feature line ("MEMORY RECALL — ..." -> "memory recall")."""
    phrases = []
    for feature in product.get("features") or []:
        head = re.split(r"\s*(?:[:\u2014\u2013]| - )\s*", str(feature), maxsplit=1)[0].strip()
        words = head.split()
        if 1 <= len(words) <= 4:
            phrases.append(head.lower())
        if len(phrases) >= limit:
            break
    return phrases


def product_kind(product: dict[str, Any]) -> str:
    categories = product.get("categories") or []
    return str(categories[-1] if categories else product.get("main_category") or "product")
