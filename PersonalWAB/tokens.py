"""Token counts of texts, one tokenizer for every figure the project gives in tokens: tiktoken's
cl100k_base, from the files litellm ships (nothing is downloaded). Counts of texts seen before are
kept, so a memory budget applied task after task encodes each behaviour once."""

from __future__ import annotations

import threading
from collections.abc import Callable

TOKENIZER = "cl100k_base"
_COUNTS: dict[str, int] = {}
_LOCK = threading.Lock()


def token_counter() -> Callable[[list[str]], list[int]]:
    """Token counts of many texts at once (cl100k_base, offline through litellm's bundled files)."""
    from PersonalWAB.llm import load_litellm

    load_litellm()
    from litellm.litellm_core_utils.default_encoding import encoding

    return lambda texts: [len(tokens) for tokens in encoding.encode_ordinary_batch(texts, num_threads=2)]


def count_tokens(texts: list[str]) -> list[int]:
    """The tokens of each text, counted once per distinct text in this process."""
    missing = [text for text in dict.fromkeys(texts) if text not in _COUNTS]
    if missing:
        counted = dict(zip(missing, token_counter()(missing)))
        with _LOCK:
            _COUNTS.update(counted)
    return [_COUNTS[text] for text in texts]
