"""PersonalWAB: a benchmark for personalized web agents (reimplementation).

Importing this package loads nothing heavy: data, indexes, models and the JVM are
all opened lazily on first use.
"""

__version__ = "0.1.0"
