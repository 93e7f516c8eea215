"""A benchmark's tables written into a doc between its markers (scripts/doc_block.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts.doc_block import markers, write_block


def test_the_block_is_replaced_between_its_markers_and_nothing_else_changes(tmp_path: Path):
    begin, end = markers("figures", "scripts/x.py")
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\n{begin}\nold table\n{end}\n\nafter\n")
    write_block(doc, "figures", "scripts/x.py", "new table\n")
    assert doc.read_text() == f"# Title\n\n{begin}\nnew table\n{end}\n\nafter\n"


def test_a_doc_without_the_markers_is_refused_and_left_as_it_was(tmp_path: Path):
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n")
    with pytest.raises(ValueError, match="no block between"):
        write_block(bare, "figures", "scripts/x.py", "x")
    assert bare.read_text() == "no markers\n"
