"""PersonalWAB: a benchmark for personalized web agents (reimplementation).

Importing this package loads nothing heavy: data, indexes, models and the JVM are
all opened lazily on first use.

It does set one default for the process: OpenMP threads (torch's CPU workers) sleep
instead of spinning while they wait for work (`OMP_WAIT_POLICY=PASSIVE`). Spinning
workers fight every other busy process for the cores and made SASRec training and
MiniLM encoding 4-8x slower on a loaded machine (scripts/benchmark_sasrec_load.py);
sleeping ones cost little on a quiet one. The policy is read when torch loads, so it
only applies when this package is imported first; set the variable to override it.
"""

import os as _os

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
