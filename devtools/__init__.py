"""Test helpers shipped with the package so tests and benchmarks can run with no API key."""
