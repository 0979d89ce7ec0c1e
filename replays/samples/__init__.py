"""Tapes shipped inside the package, so ``arena replay`` works with no data download."""

from pathlib import Path


def sample_path() -> Path:
    """The embedded 2024 US election tape (101 binary markets, columnar form)."""
    return Path(__file__).resolve().parent / "election2024.tape"


SAMPLE = "sample"
"""The embedded tape's name wherever a command takes a tape file."""

SAMPLE_HASH = "0504338e08bd92f2bf6daf27b195f6b76408b798d2035caef83d37ad3907ae57"
"""The embedded tape's content hash, so a log can be told to come from it without loading it
(a test checks it against the file)."""


def tape_file(path: str | Path) -> Path:
    """``sample`` names the embedded election tape; anything else is a path."""
    return sample_path() if str(path) == SAMPLE else Path(path)
