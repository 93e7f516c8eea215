"""A PUMA step's console holds the step's own lines (`PUMA.quiet`): library warnings stay out
unless PUMA_VERBOSE is set."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from PUMA.quiet import VERBOSITY_ENV
from tests.conftest import HANG_GUARD_S, REPO_ROOT


QUIET_PROBE = """
import sys
from PUMA.cli import run_step

def warn(argv):
    import torch
    from transformers.utils import logging
    torch.tensor(torch.tensor([1.0]))  # torch's UserWarning: copy construct from a tensor
    logging.get_logger("transformers.probe").warning("a transformers warning")
    print("step done", file=sys.stderr)
    return 0

sys.exit(run_step(warn))
"""


@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.slow
def test_library_warnings_stay_out_of_a_step_unless_verbose(verbose: bool):
    # a step run in-process earlier in the session leaves its library verbosity variables behind
    env = {k: v for k, v in os.environ.items() if k not in ("PUMA_VERBOSE", "PYTHONWARNINGS", *VERBOSITY_ENV)}
    if verbose:
        env["PUMA_VERBOSE"] = "1"
    done = subprocess.run([sys.executable, "-c", QUIET_PROBE], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert "step done" in done.stderr
    leaked = ("copy construct from a tensor" in done.stderr, "a transformers warning" in done.stderr)
    assert leaked == ((True, True) if verbose else (False, False))
