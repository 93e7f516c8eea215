"""The `tokenizer` item of the puma check: the stand-in's SentencePiece model (trained with
Llama's settings, `PUMA.tiny_model --tokenizer sentencepiece`) tokenizing every text of step 1
as the release loaded it and as this project loads it.

Release side (release/worker.py's `tokenizer_ids`, on the libraries of its time): the slow
`LlamaTokenizer.from_pretrained` (its SFT, generation, DPO and agent) and
`AutoTokenizer.from_pretrained` (its data scripts' memory cut), and the slow one in legacy
mode, which the release did not use, to show what that mode would change. Project side:
`PUMA.modeling.load_tokenizer` on this project's libraries. Texts: the function and
parameter prompts of both splits, their labels, the SFT texts (prompt, label and `</s>`, as
the release's dataset writes them) and the uncut memories.

One difference between the libraries is noted, not counted, on labels only: a text that starts
with whitespace gets SentencePiece's dummy "▁" from the release's slow tokenizer in any case and
from transformers 5's (a Metaspace pre-tokenizer) only when it does not start with one already,
so the project's ids have one "▁" fewer after BOS. Neither side tokenizes a label on its own
(the release's dataset and TRL 0.11, and the project's `--recipe release`, tokenize prompt and
label together); prompts, memories and SFT texts, which are tokenized on their own, must match.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from collections.abc import Callable
from typing import Any

from devtools.parity.compare import Tally
from devtools.parity.mirror import ReleaseRunner

SPLITS = ("train", "test")
# the release's loading calls, each compared with the project's tokenizer
RELEASE_LOADERS = {"LlamaTokenizer": "tokenizer", "AutoTokenizer": "tokenizer (AutoTokenizer, data scripts)"}
LEGACY = "LlamaTokenizer legacy"
LEADING_SPACE = "labels starting with whitespace: one '▁' fewer in the project (never tokenized alone)"
# the files of a Llama tokenizer folder the release's `LlamaTokenizer` reads
TOKENIZER_FILES = ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")


def step1_texts(release_dir: Path) -> tuple[list[str], list[str]]:
    """Every text of the release's step-1 files and its kind, in file order."""
    texts: list[str] = []
    kinds: list[str] = []
    for kind, name in (("function", "function_data.json"), ("param", "param_data.json")):
        data = json.loads((release_dir / name).read_text(encoding="utf-8"))
        for split in SPLITS:
            for example in data.get(split, []):
                parts = {f"{kind} prompt": example["prompt"], "label": example["target"],
                         "sft text": f"{example['prompt']}{example['target']}</s>"}
                if "mem" in example:
                    parts["memory"] = example["mem"]
                for part, text in parts.items():
                    texts.append(text)
                    kinds.append(part)
    return texts, kinds


def project_observation(model: Path, texts: list[str]) -> dict[str, Any]:
    """The ids of every text by the tokenizer the project loads for `model`."""
    from PUMA.modeling import load_tokenizer

    tokenizer = load_tokenizer(model)
    return {"class": type(tokenizer).__name__, "ids": [tokenizer(text)["input_ids"] for text in texts]}


def first_id_difference(release: list[int], project: list[int]) -> dict[str, Any]:
    at = next((i for i, (a, b) in enumerate(zip(release, project)) if a != b), min(len(release), len(project)))
    return {"at": at, "lengths": [len(release), len(project)], "release": release[max(0, at - 2):at + 6],
            "project": project[max(0, at - 2):at + 6]}


def one_space_fewer(text: str, release: list[int], project: list[int], space_id: int | None) -> bool:
    """The project's ids are the release's without the dummy "▁" of a text led by whitespace."""
    return (text[:1].isspace() and space_id is not None and len(release) > 2 and release[1] == space_id
            and release[:1] + release[2:] == project)


def compare(release: dict[str, Any], project: dict[str, Any], texts: list[str], kinds: list[str],
            loader: str = "LlamaTokenizer") -> Tally:
    """The ids of one of the release's loading calls against the project's, text by text;
    for the slow tokenizer, how many texts the legacy mode would have cut otherwise is noted."""
    tally = Tally()
    theirs, ours = release[loader]["ids"], project["ids"]
    if len(theirs) != len(texts) or len(ours) != len(texts):
        tally.add("count", False, {"texts": len(texts), "release": len(theirs), "project": len(ours)})
    for index, (kind, a, b) in enumerate(zip(kinds, theirs, ours)):
        if a != b and kind == "label" and one_space_fewer(texts[index], a, b, release[loader].get("space_id")):
            tally.note(LEADING_SPACE)
            tally.add(kind, True)
            continue
        tally.add(kind, a == b, None if a == b else {"index": index, "kind": kind, "text": texts[index][:80],
                                                      **first_id_difference(a, b)})
    if loader == "LlamaTokenizer" and LEGACY in release:
        tally.noted["texts the legacy mode would cut otherwise"] = sum(
            a != b for a, b in zip(theirs, release[LEGACY]["ids"]))
    return tally


def run_item(runner: ReleaseRunner, release_dir: Path, model: Path, hub_name: str, work: Path,
             log: Callable[[str], None]) -> dict[str, Tally]:
    """Both sides tokenize the texts of the release's step-1 files; the release loads the
    stand-in by the hub name it hard-codes (`hub_name`, redirected to `model`)."""
    texts, kinds = step1_texts(release_dir)
    log(f"puma tokenizer: {len(texts)} step-1 texts by the release's LlamaTokenizer / AutoTokenizer and the "
        "project's load_tokenizer ...")
    texts_file, out, log_path = work / "tokenizer_texts.json", work / "release_tokenizer_ids.json", \
        work / "release_tokenizer.log"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    process = runner.start("tokenizer_ids", log_path, hub={hub_name: str(model)}, model=hub_name, texts=texts_file,
                           out=out)
    ours = project_observation(model, texts)
    runner.finish(process, "release tokenizer ids", log_path)
    theirs = json.loads(out.read_text(encoding="utf-8"))
    return {label: compare(theirs, ours, texts, kinds, loader) for loader, label in RELEASE_LOADERS.items()}


def copy_tokenizer_files(model: Path, out: Path) -> None:
    """The stand-in's tokenizer files into an adapter folder, as the release's scripts saved
    theirs beside an adapter (its `LlamaTokenizer` reads them back from there)."""
    for name in TOKENIZER_FILES:
        if (model / name).exists():
            shutil.copyfile(model / name, out / name)
