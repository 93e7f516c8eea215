"""A tiny randomly initialised Llama and a tokenizer trained locally on a data directory's
texts, saved like a hub model so every PUMA step loads them by path. For CPU tests, the
smoke run and the parity harness only: it learns little.

Two tokenizers: `bpe` (default), a byte-level BPE of the `tokenizers` library; and
`sentencepiece`, the kind Llama-2 ships: a SentencePiece BPE model trained with Llama's
settings and saved as Llama-2-chat's folder holds it, so the slow `LlamaTokenizer` the
release loads reads the same file as the tokenizer this project loads.

`python -m PUMA.tiny_model --data_dir DIR --out DIR [--tokenizer bpe|sentencepiece --vocab_size 1000
    --hidden_size 64 --layers 2 --heads 4]`
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from PersonalWAB.settings import setting

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")
TOKENIZERS = ("bpe", "sentencepiece")
# The trainer settings of Llama-2's tokenizer.model (its trainer and normalizer specs) that shape
# how text is cut: BPE, bytes for characters outside the vocabulary, one digit per piece, text
# taken as it is (no normalisation, no whitespace folding) behind a leading "▁", ids 0/1/2 for
# <unk>/<s>/</s> and no pad piece.
LLAMA_SENTENCEPIECE: dict[str, Any] = dict(
    model_type="bpe", byte_fallback=True, split_digits=True, normalization_rule_name="identity",
    add_dummy_prefix=True, remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
    split_by_unicode_script=True, split_by_whitespace=True, split_by_number=True, max_sentencepiece_length=16,
    character_coverage=0.99995, max_sentence_length=4192, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
    unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>")
# Llama-2-chat's tokenizer_config.json, less its chat template: the slow `LlamaTokenizer`, BOS
# added, no pad token (the release sets it to EOS), the non-legacy handling of text after
# special tokens.
LLAMA_TOKENIZER_CONFIG = {
    "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
    "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None, "legacy": False,
    "clean_up_tokenization_spaces": False, "padding_side": "right", "sp_model_kwargs": {}, "model_max_length": 4096}


@dataclass
class TinyModelConfig:
    """The tiny model's settings (`python -m PUMA.tiny_model`)."""

    data_dir: str = setting(str, "data folder whose texts train the tokenizer", required=True)
    out: str = setting(str, "folder for the model and tokenizer", required=True)
    vocab_size: int = setting(1000, "tokenizer vocabulary size")
    hidden_size: int = setting(64, "hidden size (the MLP's is twice it)")
    layers: int = setting(2, "decoder layers")
    heads: int = setting(4, "attention heads")
    max_positions: int = setting(2048, "longest sequence the model takes")
    seed: int = setting(0, "seed of the random weights")
    tokenizer: str = setting("bpe", "bpe: byte-level BPE; sentencepiece: Llama's kind, trained with Llama's "
                             "settings", choices=TOKENIZERS)

    @property
    def intermediate_size(self) -> int:
        return 2 * self.hidden_size


def corpus(data_dir: Path | str, limit: int = 20_000) -> Iterator[str]:
    """Instructions, product titles/stores and review texts of a data directory, plus the
    function names and prompt words every PUMA prompt uses."""
    from PersonalWAB.data.loader import load_benchmark_data
    from PersonalWAB.protocol import load_protocol

    data = load_benchmark_data(data_dir)
    texts = load_protocol().texts
    yield from (texts[name] for name in texts if name.startswith("puma.") and isinstance(texts[name], str))
    for split in data.tasks.values():
        for task in split:
            yield task["task"]
    for product in islice(data.products.values(), limit):
        yield f"{product.get('title', '')} | {product.get('main_category', '')} | {product.get('store', '')} | " \
              f"{product.get('parent_asin', '')}"
    for behaviours in data.histories.values():
        for behaviour in behaviours:
            yield behaviour["review"].get("text", "")


def train_tokenizer(texts: Iterator[str], vocab_size: int = 1000) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(texts, trainer=trainer)
    bos = backend.token_to_id("<s>")
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                           special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", model_max_length=4096)


def train_sentencepiece(texts: Iterator[str], out: Path | str, vocab_size: int = 1000) -> Path:
    """A SentencePiece model trained on `texts` with Llama's settings, written into the folder
    `out` as Llama-2-chat's tokenizer files (tokenizer.model, tokenizer_config.json,
    special_tokens_map.json); returns `out`. The vocabulary may come out smaller than
    `vocab_size` on a small corpus."""
    import sentencepiece

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=(t for t in texts if t), model_writer=model,
                                             vocab_size=vocab_size, hard_vocab_limit=False, num_threads=1,
                                             minloglevel=2, **LLAMA_SENTENCEPIECE)
    (out / "tokenizer.model").write_bytes(model.getvalue())
    (out / "tokenizer_config.json").write_text(json.dumps(LLAMA_TOKENIZER_CONFIG, indent=1), encoding="utf-8")
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=1), encoding="utf-8")
    return out


def make_tiny_model(data_dir: Path | str, out: Path | str, config: TinyModelConfig | None = None) -> Path:
    """Train the tokenizer, build the random Llama, save both into `out`; returns `out`."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    config = config or TinyModelConfig()
    if config.tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer {config.tokenizer!r}: expected one of {', '.join(TOKENIZERS)}")
    out = Path(out)
    if config.tokenizer == "sentencepiece":
        tokenizer = AutoTokenizer.from_pretrained(train_sentencepiece(corpus(data_dir), out, config.vocab_size))
    else:
        tokenizer = train_tokenizer(corpus(data_dir), config.vocab_size)
    torch.manual_seed(config.seed)
    model_config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        num_hidden_layers=config.layers, num_attention_heads=config.heads, num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(model_config)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    if config.tokenizer == "bpe":  # the sentencepiece files are written as Llama-2-chat's already
        tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    from PUMA.cli import parse_step

    config = parse_step(TinyModelConfig, argv, "python -m PUMA.tiny_model", __doc__, "tiny_model")
    out = make_tiny_model(config.data_dir, config.out, config)
    print(f"tiny model and tokenizer saved in {out}")
    return 0


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
