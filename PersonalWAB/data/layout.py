"""Writing a data directory in the official layout (two product parts, two history parts,
instructions, profiles), shared by the synthetic generator and the construction pipeline
so both produce files the release's code and this project load the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PersonalWAB.data.loader import HISTORY_PARTS, INSTRUCTIONS_FILE, PRODUCT_PARTS, PROFILES_FILE, SYNTHETIC_MARKER
from PersonalWAB.scratch import atomic_write_bytes as write_atomic  # the one writer, named as its callers know it


def json_bytes(content: Any) -> bytes:
    """Compact UTF-8 JSON: the same content always gives the same bytes."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _halves(pairs: list[tuple[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    middle = (len(pairs) + 1) // 2
    return dict(pairs[:middle]), dict(pairs[middle:])


def official_files(products: list[tuple[str, dict[str, Any]]], histories: list[tuple[str, list[dict[str, Any]]]],
                   instructions: dict[str, list[dict[str, Any]]],
                   profiles: dict[str, dict[str, str]], synthetic_marker: str | None = None) -> dict[str, bytes]:
    """File name -> content of the four official files; products and histories in two parts each.
    `synthetic_marker`: written into each profile entry as its `SYNTHETIC_MARKER` key, beside
    `user_profile`, so generated files say so without their manifest (no model sees it)."""
    files: dict[str, bytes] = {}
    for n, part in enumerate(_halves(products), start=1):
        files[PRODUCT_PARTS.replace("*", str(n))] = json_bytes(part)
    for n, part in enumerate(_halves(histories), start=1):
        files[HISTORY_PARTS.replace("*", str(n))] = json_bytes(part)
    files[INSTRUCTIONS_FILE] = json_bytes(instructions)
    marker = {SYNTHETIC_MARKER: synthetic_marker} if synthetic_marker else {}
    files[PROFILES_FILE] = json_bytes({user_id: {"user_profile": profile, **marker}
                                       for user_id, profile in profiles.items()})
    return files


def write_files(out: Path, files: dict[str, bytes]) -> list[str]:
    """Write the files that differ from what `out` holds; returns their names."""
    changed = []
    for name, data in files.items():
        target = out / name
        if target.is_file() and target.read_bytes() == data:
            continue
        write_atomic(target, data)
        changed.append(name)
    return changed
