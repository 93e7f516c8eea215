"""A PUMA step's console holds the step's own lines: the warnings and log chatter of the
libraries it drives (transformers, TRL, PEFT, torch, datasets, accelerate, the hub client)
are kept out, since they say nothing a person running the step can act on and bury its
progress and loss lines. `PUMA_VERBOSE=1` (or any `-W` / `PYTHONWARNINGS` the person gives)
lets them all through again. Errors still show.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

VERBOSE_ENV = "PUMA_VERBOSE"
LIBRARY_LOGGERS = ("transformers", "trl", "peft", "torch", "datasets", "accelerate", "huggingface_hub",
                   "sentence_transformers", "deepspeed")
# Libraries that set their loggers' level from these when they are first imported.
VERBOSITY_ENV = ("TRANSFORMERS_VERBOSITY", "DATASETS_VERBOSITY")


def verbose() -> bool:
    return (os.environ.get(VERBOSE_ENV) or "").strip().lower() not in ("", "0", "false", "no", "off")


def quiet_libraries() -> None:
    """Keep library warnings and info logs out of this process's console (see the module's
    docstring); nothing when PUMA_VERBOSE is set. Each process of a launched training step
    runs it again (`run_step`)."""
    if verbose():
        return
    if not sys.warnoptions:  # the person's own -W / PYTHONWARNINGS win
        warnings.simplefilter("ignore")
    for name in VERBOSITY_ENV:
        os.environ.setdefault(name, "error")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    if "transformers" in sys.modules:  # already set up from its variable: set it again
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity_error()
