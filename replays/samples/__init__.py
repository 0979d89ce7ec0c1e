"""Tapes shipped inside the package, so ``arena replay`` works with no data download."""

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def sample_path() -> Path:
    """The embedded 2024 US election tape (101 binary markets, columnar form)."""
    return _HERE / "election2024.tape"


SAMPLE = "sample"
"""The embedded tape's name wherever a command takes a tape file."""

SAMPLE_HASH = "0504338e08bd92f2bf6daf27b195f6b76408b798d2035caef83d37ad3907ae57"
"""The embedded tape's content hash, so a log can be told to come from it without loading it
(a test checks it against the file)."""

SAMPLE_BOOKS = "sample-books"
"""The second sample's name: 12 real BTC 15-minute markets with their 20-level order books
(``tape_file`` gives its price tape, ``books_file`` its books; ``NOTICE.md``: CC BY 4.0)."""

SAMPLE_BOOKS_TAPE_HASH = "c5275a0f0cff47370df2e24b8ab1a179e2d7050e887e9be8cc64e41d2c4ec3a4"
"""The content hash of the books sample's price tape (a test checks it against the file)."""

SAMPLE_BOOKS_HASH = "5d5081eab9effc20a3fa09d7431d16db0e181f9a5725e836ba0c169ff4afd7ab"
"""The content hash of the books sample's order books (a test checks it against the file)."""


def sample_books_paths() -> tuple[Path, Path]:
    """``(tape, books)`` of the embedded BTC 15-minute sample."""
    return _HERE / "btc15m.tape", _HERE / "btc15m.books"


def tape_file(path: str | Path) -> Path:
    """``sample`` names the embedded election tape, ``sample-books`` the BTC books sample's
    price tape; anything else is a path."""
    if str(path) == SAMPLE_BOOKS:
        return sample_books_paths()[0]
    return sample_path() if str(path) == SAMPLE else Path(path)


def books_file(path: str | Path) -> Path:
    """``sample-books`` names the embedded BTC order books; anything else is a path."""
    return sample_books_paths()[1] if str(path) == SAMPLE_BOOKS else Path(path)
