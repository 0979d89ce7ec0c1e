"""Tapes shipped inside the package, so ``arena replay`` works with no data download."""

from pathlib import Path


def sample_path() -> Path:
    """The embedded 2024 US election tape (101 binary markets, columnar form)."""
    return Path(__file__).resolve().parent / "election2024.tape"
