"""Lucene's English analysis emulated in Python, so the bm25s backend indexes and queries the
terms Anserini's DefaultEnglishAnalyzer makes, and weighs documents by the lengths Lucene stores."""

from __future__ import annotations

import re
import threading
from typing import Any

# Lucene's English stop set, which Anserini's DefaultEnglishAnalyzer removes.
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
# Words as Lucene's StandardTokenizer (Unicode word boundaries) cuts them: letters joined
# by . ' ’ or :, digits joined by . ' ’ , or ; ("u.s.a", "don't", "1,000", "3.5oz"); each
# Han ideograph, Hiragana character, emoji and ™ ® © a word of its own; and no word made
# of fractions, superscripts or circled numbers, which Python counts as word characters.
_ONE_CHAR_WORDS = (
    "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Hiragana, Han
    "\u00a9\u00ae\u2122\u2600-\u27bf\U0001f000-\U0001faff"  # © ® ™, symbols, emoji
)
_NOT_WORD_CHARS = "\u00b2\u00b3\u00b9\u00bc-\u00be\u2150-\u218f\u2460-\u24ff"
_RUN = rf"[^\W{_ONE_CHAR_WORDS}{_NOT_WORD_CHARS}]+"
_JOINER = r"(?:(?<=[^\W\d_])[.'’:](?=[^\W\d_])|(?<=\d)[.'’,;](?=\d))"
_WORD = re.compile(rf"[{_ONE_CHAR_WORDS}]|{_RUN}(?:{_JOINER}{_RUN})*")
# A cheap first cut into runs that never straddle two of the words above.
_CANDIDATE = re.compile(rf"[{_ONE_CHAR_WORDS}]|\w+(?:[.'’:,;]\w+)*")
_POSSESSIVE = re.compile(r"['’]s$")
ANALYZER_ID = "lucene-english-porter/1"
_local = threading.local()


def _stemmer() -> Any:
    """PyStemmer objects are not thread-safe, so each thread gets its own."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer("porter")
    return stemmer


def _porter_measure(stem: str) -> int:
    """Porter's m: how many vowel-then-consonant runs `stem` has ("y" after a consonant is a vowel)."""
    pattern: list[str] = []
    for i, char in enumerate(stem):
        vowel = char in "aeiou" or (char == "y" and i > 0 and pattern[-1] == "c")
        pattern.append("v" if vowel else "c")
    return len(re.findall("v+c+", "".join(pattern)))


def _as_lucene_porter_input(word: str) -> str:
    """Lucene's Porter stemmer follows Porter's later revision in step 2 ("bli" -> "ble",
    "logi" -> "log"), which the Snowball "porter" algorithm does not; rewriting the word so
    the original algorithm meets the same intermediate form yields Lucene's stem."""
    if word.endswith("bly") and _porter_measure(word[:-3]) > 0:
        return word[:-1] + "e"
    for ending in ("logy", "logies"):
        if word.endswith(ending) and _porter_measure(word[: -len(ending)]) > 0:
            return word[: -len(ending)] + "log"
    return word


def _terms_of_candidate(candidate: str) -> tuple[str, ...]:
    """The terms of one run of word characters and joiners (usually a single word)."""
    stemmer = _stemmer()
    terms = []
    for word in _WORD.findall(candidate):
        word = _POSSESSIVE.sub("", word)
        if word and word not in LUCENE_STOPWORDS:
            terms.append(stemmer.stemWord(_as_lucene_porter_input(word)))
    return tuple(terms)


def analyze(text: str, memo: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Terms of `text` as Anserini's default English analyzer makes them: words, possessive
    's dropped, lower-cased, Lucene stop words removed, Porter stemming as Lucene does it.

    A catalogue repeats the same words millions of times; pass one `memo` dict to every call
    of an indexing run so each distinct word is analysed once.
    """
    memo = {} if memo is None else memo
    terms: list[str] = []
    for candidate in _CANDIDATE.findall(text.lower()):
        found = memo.get(candidate)
        if found is None:
            found = memo[candidate] = _terms_of_candidate(candidate)
        terms.extend(found)
    return terms


def lucene_stored_length(length: int) -> int:
    """A document length as Lucene's BM25 sees it: stored in one byte (SmallFloat.intToByte4),
    exact up to 39, above that (length - 24) rounded down to four significant bits."""
    if length < 40:
        return length
    rest = length - 24
    shift = rest.bit_length() - 4
    return 24 + ((rest >> shift) << shift)
