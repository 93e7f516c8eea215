"""What a command may write (`PersonalWAB.outputs`): an output it can write at all (not a FIFO, a
device or a folder, in a folder that can be made and written), named up front in one line by every
command, and never an input of the running command."""

from __future__ import annotations

from pathlib import Path

from PersonalWAB.outputs import output_problem
from tests.conftest import make_fifo


def test_output_check_names_a_fifo_up_front(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path)
    assert output_problem(fifo, "--out") == f"--out {fifo}: is a FIFO (named pipe)"
