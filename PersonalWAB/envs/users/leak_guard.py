"""Leak guard: a simulated user must not hand the agent the answer.

Before the agent sees a user message, the target's parent ASIN (any case) and any
span of `MIN_SPAN` or more consecutive words copied from the real review (compared
after lower-casing and dropping punctuation) are replaced by `MASK`, and the
message is flagged so the trajectory records what was masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from PersonalWAB.schema_types import Task

MASK = "[masked]"
MIN_SPAN = 8
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z0-9]+)?")


def _norm(word: str) -> str:
    return word.lower().replace("'", "")


@dataclass
class GuardResult:
    text: str
    masked: list[str] = field(default_factory=list)  # kinds masked: "target_asin", "review_span"

    @property
    def flagged(self) -> bool:
        return bool(self.masked)


def copied_spans(message: str, review: str, min_span: int = MIN_SPAN) -> list[tuple[int, int]]:
    """Character spans of `message` that repeat >= `min_span` consecutive review words."""
    review_words = [_norm(w) for w in _WORD.findall(review)]
    if len(review_words) < min_span:
        return []
    grams = {tuple(review_words[i:i + min_span]) for i in range(len(review_words) - min_span + 1)}
    tokens = list(_WORD.finditer(message))
    words = [_norm(t.group(0)) for t in tokens]
    covered = [False] * len(tokens)
    for i in range(len(tokens) - min_span + 1):
        if tuple(words[i:i + min_span]) in grams:
            for j in range(i, i + min_span):
                covered[j] = True
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens):
        if not covered[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(tokens) and covered[j + 1]:
            j += 1
        spans.append((tokens[i].start(), tokens[j].end()))
        i = j + 1
    return spans


def guard_message(message: str, task: Task) -> GuardResult:
    """Mask the target ASIN and copied review spans in a user message."""
    target = task.get("target") or {}
    asin = str((target.get("product_info") or {}).get("parent_asin") or "")
    review = str((target.get("review") or {}).get("text") or "")
    result = GuardResult(message)
    spans = copied_spans(message, review)
    if spans:
        pieces, last = [], 0
        for start, end in spans:
            pieces.extend([message[last:start], MASK])
            last = end
        pieces.append(message[last:])
        result.text = "".join(pieces)
        result.masked.append("review_span")
    if asin:
        masked, count = re.subn(re.escape(asin), MASK, result.text, flags=re.IGNORECASE)
        if count:
            result.text = masked
            result.masked.insert(0, "target_asin")
    return result
