"""Helpers shared by the test suite and the benchmarks (tiny models built offline)."""
