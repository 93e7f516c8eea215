"""When a text names a product, and when two instructions are near duplicates: the audit's two rules
of text.

A text names a product when it holds its parent ASIN (any case) or its title: the whole title, or
`TITLE_SPAN` consecutive words of it (words compared lower-cased without punctuation, the leak
guard's way). Two instructions are near duplicates when the Jaccard similarity of their sets of
word `SHINGLE`-grams is at least `NEAR_DUPLICATE`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from PersonalWAB.envs.users.leak_guard import copied_spans

TITLE_SPAN = 6  # consecutive title words that name the product (a shorter title must appear whole)
SHINGLE = 3  # words per shingle of the near-duplicate rule
NEAR_DUPLICATE = 0.8  # Jaccard similarity of shingle sets from which two instructions are near duplicates
_WORD = re.compile(r"[a-z0-9]+")


def names_asin(text: str, asin: str) -> bool:
    """Whether the text holds the ASIN, in any case."""
    return bool(asin) and asin.lower() in text.lower()


def names_title(text: str, title: str) -> bool:
    """Whether the text holds the title whole, or `TITLE_SPAN` consecutive words of it."""
    words = _WORD.findall(title.lower())
    if not words:
        return False
    return bool(copied_spans(text, title, min(TITLE_SPAN, len(words))))


def names_product(text: str, asin: str, title: str) -> bool:
    """Whether the text names the product (its ASIN or its title)."""
    return names_asin(text, asin) or names_title(text, title)


def shingles(text: str) -> frozenset[tuple[str, ...]]:
    """The word `SHINGLE`-grams of a text (the whole text as one gram when it is shorter)."""
    words = _WORD.findall(text.lower())
    if len(words) < SHINGLE:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1))


def near_duplicates(queries: list[str], pool: list[str],
                    threshold: float = NEAR_DUPLICATE) -> Iterable[tuple[int, int, float]]:
    """(query index, pool index, similarity) of the most similar pool text of each query whose
    shingle Jaccard similarity reaches `threshold`: candidates are found through an index of shingles,
    so only texts that share one are compared."""
    pool_sets = [shingles(text) for text in pool]
    index: dict[tuple[str, ...], list[int]] = {}
    for j, grams in enumerate(pool_sets):
        for gram in grams:
            index.setdefault(gram, []).append(j)
    for i, text in enumerate(queries):
        grams = shingles(text)
        shared: dict[int, int] = {}
        for gram in grams:
            for j in index.get(gram, ()):
                shared[j] = shared.get(j, 0) + 1
        best = max(((count / (len(grams) + len(pool_sets[j]) - count), j) for j, count in shared.items()),
                   default=None)
        if best is not None and best[0] >= threshold:
            yield i, best[1], best[0]
