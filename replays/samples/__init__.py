"""Tapes shipped inside the package, so ``arena replay`` works with no data download."""

from pathlib import Path


def sample_path() -> Path:
    """The embedded 2024 US election tape (101 binary markets, columnar form)."""
    return Path(__file__).resolve().parent / "election2024.tape"


SAMPLE = "sample"
"""The embedded tape's name wherever a command takes a tape file."""

SAMPLE_HASH = "1569b5755d678b429be4705347b251d13e0c0c5a1f31f7df3b28b85fc773789d"
"""The embedded tape's content hash, so a log can be told to come from it without loading it
(a test checks it against the file)."""


def tape_file(path: str | Path) -> Path:
    """``sample`` names the embedded election tape; anything else is a path."""
    return sample_path() if str(path) == SAMPLE else Path(path)
