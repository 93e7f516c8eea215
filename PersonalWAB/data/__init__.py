"""Benchmark data: loading, validation, the synthetic generator and the downloader."""

from PersonalWAB.data.loader import BenchmarkData, load_benchmark_data

__all__ = ["BenchmarkData", "load_benchmark_data"]
