"""Benchmarks behind ``arena bench``: speed is measured here, never asserted in tests."""
