"""`--user_mode offline`: a rule-based user with no model, deterministic given a seed.

It knows the target product (and for review tasks the real review) and reacts
the way a patient shopper would:
- results shown (search / recommend): the target's rank decides. Ranks 1-3 satisfy
  the user (STOP). Lower down, the user names an attribute the top results lack
  (brand/store, price band, a key feature, the kind of product). Absent, the user
  reveals one more attribute. Never the ASIN or the title verbatim.
- a review posted: compared with the real review by word overlap (a lexical proxy
  of the benchmark's embedding score); close enough satisfies the user, otherwise
  the user names a few aspects (single words) the real review covers and the rating.
- a question: answered from the profile and the target's attributes.
After `patience` unsatisfying attempts, or too many turns, the user gives up (STOP).

Numbers obtained with it are not comparable to those with the LLM user simulator.
"""

from __future__ import annotations

import random
import re
from typing import Any

from PersonalWAB.envs.user import STOP_TOKEN, UserSimulator
from PersonalWAB.envs.users.persona import key_features, level, price_band, product_kind

NOTE = ("offline rule-based user simulator (no model): results are not comparable to runs with the "
        "LLM user simulator (--user_mode naive)")
_ASIN_LINE = re.compile(r"Parent Asin: (\S+)")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be but by for from has have i i'm im in is it its me my of on or so that the this to was "
    "were will with you your can could would should it's just also really very what which how when there their "
    "them they we our us do does did not no yes than then too one out up all about into after over been had if "
    "more most much only own same some such other any each few both these those get got".split()
)
SATISFIED_REVIEW_OVERLAP = 0.6


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2]


class OfflineUser(UserSimulator):
    def __init__(self, seed: int = 0, patience: int = 3, max_turns: int = 12):
        self.seed = seed
        self.patience = patience
        self.max_turns = max_turns
        self.cost = 0.0

    # -- episode -------------------------------------------------------------------------------
    def reset(self, task: dict[str, Any], profile: dict[str, str]) -> str:
        self.task = task
        self.profile = profile
        self.product = task["target"]["product_info"]
        self.review = task["target"].get("review") or {}
        self.rng = random.Random(f"{self.seed}|{task['user_id']}|{task['timestamp']}|{task['type']}")
        self.failures = 0
        self.turns = 0
        self.revealed: list[tuple[str, str]] = []
        self.hints = self._hint_order()
        self.review_words = self._review_aspects()
        self.told_words: list[str] = []
        return task["task"]

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
        self.turns += 1
        if self.turns > self.max_turns:
            return f"I think we are going round in circles; I'll stop here. {STOP_TOKEN}"
        text = agent_message.strip()
        if text.startswith("Error:") or text.startswith("Unknown action"):
            return self._unsatisfied("That did not work at all. " + self._next_hint_sentence())
        ranked = _ASIN_LINE.findall(text)
        if ranked or self._looks_like_empty_results(text):
            return self._react_to_results(ranked, text)
        if text.startswith('{"review"'):
            return self._react_to_review(text)
        return self._answer(text)

    # -- reactions -----------------------------------------------------------------------------
    def _unsatisfied(self, message: str) -> str:
        self.failures += 1
        if self.failures >= self.patience:
            return f"Never mind, I'll look elsewhere. {STOP_TOKEN}"
        return message

    @staticmethod
    def _looks_like_empty_results(text: str) -> bool:
        return text in ("", "[]") or text.lower().startswith("no product")

    def _react_to_results(self, ranked: list[str], text: str) -> str:
        target = self.product["parent_asin"]
        rank = ranked.index(target) if target in ranked else None
        if rank is not None and rank < 3:
            return self.rng.choice(["That's the one, thanks!", "Great, that's what I wanted.",
                                    "Perfect, I'll take that."]) + f" {STOP_TOKEN}"
        if rank is not None:
            missing = self._missing_from_top(text)
            if missing is not None:
                self._reveal(missing)
                return self._unsatisfied(f"Closer, but the top ones are not it. {self._phrase(missing)}")
            return self._unsatisfied("Something further down looks closer than the top ones. "
                                     + self._next_hint_sentence())
        return self._unsatisfied("None of these is what I'm after. " + self._next_hint_sentence())

    def _missing_from_top(self, text: str) -> tuple[str, str] | None:
        blocks = re.split(r"(?m)^Product \d+:\n", text)[1:4]
        top = " ".join(blocks).lower()
        for kind, value in self.hints:
            if kind == "price":
                continue
            if value.lower() not in top:
                return kind, value
        band = next((h for h in self.hints if h[0] == "price"), None)
        return band

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
            return self.rng.choice(["That sounds like me, post it.", "Good, that's what I'd say."]) + f" {STOP_TOKEN}"
        return self._unsatisfied("Not quite how I'd put it. " + self._review_hint(written))

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
