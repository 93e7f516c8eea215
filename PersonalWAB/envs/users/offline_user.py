"""`--user_mode offline`: a rule-based user with no model, deterministic given a seed.

It follows the release's multi-turn protocol: it answers only messages the agent sends
it (`respond`), never sees tool results, and cannot end the episode. It knows the
target product (and for review tasks the real review) and judges what the agent tells
it, as a patient shopper would:
- products named by ASIN in the message (the agent reporting results): the target
  among the first three named satisfies the user; lower down or absent, the user
  names an attribute of what it wants (brand/store, a key feature, the kind of
  product, a price band), one more each time. Never the ASIN or the title verbatim.
- a review presented in the message: compared with the real review by word overlap (a
  lexical proxy of the benchmark's embedding score); close enough satisfies the user,
  otherwise it names a few aspects (single words) the real review covers and the rating.
- anything else (a question): answered from the profile and the target's attributes.
A satisfied reply starts with one of `SATISFIED_OPENINGS`, so an agent can tell.

Numbers obtained with it are not comparable to those with the LLM user simulator.
"""

from __future__ import annotations

import random
import re
from typing import Any

from PersonalWAB.data.product_text import price_value
from PersonalWAB.envs.users.base import UserSimulator
from PersonalWAB.protocol import Protocol
from PersonalWAB.schema_types import Product, Task, UserProfile

NOTE = ("offline rule-based user simulator (no model): results are not comparable to runs with the "
        "LLM user simulator (--user_mode naive)")
SATISFIED_OPENINGS = ("Perfect, that's the one", "Perfect, that sounds like me")
_ASIN = re.compile(r"\b[A-Z0-9]{10}\b")
_WORD = re.compile(r"[a-z0-9]+")
_LEVEL = re.compile(r"\b(high|medium|low)\b", re.IGNORECASE)
_STOP = frozenset(
    "a an and are as at be but by for from has have i i'm im in is it its me my of on or so that the this to was "
    "were will with you your can could would should it's just also really very what which how when there their "
    "them they we our us do does did not no yes than then too one out up all about into after over been had if "
    "more most much only own same some such other any each few both these those get got".split()
)
SATISFIED_REVIEW_OVERLAP = 0.6
REVIEW_MARKERS = ("review", "wrote", "posted")


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2]


def level(value: Any) -> str:
    match = _LEVEL.search(str(value or ""))
    return match.group(1).lower() if match else "medium"


def price_band(price: Any) -> str | None:
    value = price_value(price)
    if value is None:
        return None
    for limit in (10, 25, 50, 100, 200):
        if value < limit:
            return f"under ${limit}"
    return "over $200"


def key_features(product: Product, limit: int = 3) -> list[str]:
    """Short feature phrases: the lead-in of each feature line ("MEMORY RECALL — ..." -> "memory recall")."""
    phrases = []
    for feature in product.get("features") or []:
        head = re.split(r"\s*(?:[:\u2014\u2013]| - )\s*", str(feature), maxsplit=1)[0].strip()
        if 1 <= len(head.split()) <= 4:
            phrases.append(head.lower())
        if len(phrases) >= limit:
            break
    return phrases


def product_kind(product: Product) -> str:
    categories = product.get("categories") or []
    return str(categories[-1] if categories else product.get("main_category") or "product")


class OfflineUser(UserSimulator):
    def __init__(self, seed: int = 0):
        self.seed = seed
        self.cost = 0.0

    def reset(self, task: Task, profile: UserProfile, protocol: Protocol) -> None:
        self.task = task
        self.profile = profile
        self.product = task["target"]["product_info"]
        self.review = task["target"].get("review") or {}
        self.rng = random.Random(f"{self.seed}|{task['user_id']}|{task['timestamp']}|{task['type']}")
        self.revealed: list[tuple[str, str]] = []
        self.hints = self._hint_order()
        self.review_words = self._review_aspects()
        self.told_words: list[str] = []
        return None

    def _hint_order(self) -> list[tuple[str, str]]:
        product = self.product
        features = key_features(product, limit=5)
        self.rng.shuffle(features)
        hints = []
        if product.get("store"):
            hints.append(("store", str(product["store"])))
        if features:
            hints.append(("feature", features[0]))
        hints.append(("kind", product_kind(product)))
        band = price_band(product.get("price"))
        if band:
            hints.append(("price", band))
        hints.extend(("feature", f) for f in features[1:])
        head, tail = hints[:2], hints[2:]
        self.rng.shuffle(head)
        return head + tail

    def _review_aspects(self) -> list[str]:
        seen = set(words(f"{self.product.get('title', '')} {self.task['task']}"))
        aspects = list(dict.fromkeys(w for w in words(self.review.get("text", "")) if w not in seen))
        self.rng.shuffle(aspects)
        return aspects

    def reply(self, agent_message: str) -> str:
        text = agent_message.strip()
        named = _ASIN.findall(text)
        if self.task["type"] != "review" and named:
            return self._react_to_products(named)
        if self.task["type"] == "review" and any(marker in text.lower() for marker in REVIEW_MARKERS):
            return self._react_to_review(text)
        return self._answer(text)

    # -- reactions -----------------------------------------------------------------------------
    def _react_to_products(self, named: list[str]) -> str:
        target = self.product["parent_asin"]
        rank = named.index(target) if target in named else None
        if rank is not None and rank < 3:
            return f"{SATISFIED_OPENINGS[0]}, thanks!"
        if rank is not None:
            return f"Closer: it is in there, but not near the top. {self._next_hint_sentence()}"
        return f"None of these is what I'm after. {self._next_hint_sentence()}"

    def _reveal(self, hint: tuple[str, str]) -> None:
        if hint not in self.revealed:
            self.revealed.append(hint)

    def _next_hint_sentence(self) -> str:
        fresh = next((h for h in self.hints if h not in self.revealed), None)
        if fresh is not None:
            self._reveal(fresh)
        return " ".join(self._phrase(h) for h in self.revealed) or "It's hard to describe."

    def _phrase(self, hint: tuple[str, str]) -> str:
        kind, value = hint
        if kind == "store":
            return f"I'd like it from {value}."
        if kind == "feature":
            return f"It should have {value}."
        if kind == "kind":
            return f"I'm after {value.lower()}."
        if kind == "price":
            sensitive = level(self.profile.get("Price Sensitivity")) == "high"
            return f"My budget is {value}{', and that is firm' if sensitive else ''}."
        return value

    def _react_to_review(self, text: str) -> str:
        real = set(words(self.review.get("text", "")))
        written = set(words(text))
        overlap = len(real & written) / len(real) if real else 1.0
        if overlap >= SATISFIED_REVIEW_OVERLAP:
            return f"{SATISFIED_OPENINGS[1]}, post it."
        return "Not quite how I'd put it. " + self._review_hint(written)

    def _review_hint(self, written: set[str]) -> str:
        missing = [w for w in self.review_words if w not in written and w not in self.told_words][:3]
        self.told_words.extend(missing)
        parts = []
        if missing:
            parts.append(f"Mention {', '.join(missing)}.")
        rating = self.review.get("rating")
        if rating not in (None, ""):
            parts.append(f"I'd give it {float(rating):g} stars.")
        tone = self.profile.get("Tone and Style")
        if tone:
            parts.append(f"Keep it {tone.split(',')[0].strip().lower()}.")
        return " ".join(parts) or "Make it sound more like me."

    def _answer(self, question: str) -> str:
        q = question.lower()
        if self.task["type"] == "review":
            return self._review_hint(set())
        for cue, kind in (("brand", "store"), ("store", "store"), ("price", "price"), ("budget", "price"),
                          ("spend", "price"), ("cost", "price"), ("feature", "feature"), ("type", "kind"),
                          ("kind", "kind"), ("category", "kind")):
            if cue in q:
                hint = next((h for h in self.hints if h[0] == kind), None)
                if hint is not None:
                    self._reveal(hint)
                    return self._phrase(hint)
        return self._next_hint_sentence()
