"""A benchmark's tables written into a markdown file between its own markers, so the figures a doc
shows are the script's output, never typed by hand."""

from __future__ import annotations

from pathlib import Path


def markers(name: str, script: str) -> tuple[str, str]:
    """The begin and end markers of block `name` written by `script`."""
    return f"<!-- {name}: begin (written by {script}) -->", f"<!-- {name}: end -->"


def write_block(doc: Path, name: str, script: str, block: str) -> None:
    """Replace the text between the doc's markers of `name` with `block` (the markers must be there)."""
    begin, end = markers(name, script)
    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise ValueError(f"--doc {doc}: no block between {begin!r} and {end!r} to write the tables into")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{block}{end}{tail}", encoding="utf-8")
