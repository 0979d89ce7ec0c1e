"""The books' coverage ledger for the markets a run traded, when its cohorts met order books.

A fill against a book is only as good as the book: gaps, crossed or one-sided snapshots, tick
changes and unmirrored YES/NO pairs in the markets an agent traded say how far to trust its
fills (``replays.validate_books.ledger``). The log records the books' content hash
(``CohortOpened.settings["books"]``), not their path, so the report opens the file the user
passes (``arena report --books FILE``), or the embedded sample when the hash is the sample's;
when neither is the cohort's, it says so in one line instead of a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.projection import CohortState
from replays.errors import TapeError
from replays.samples import SAMPLE_BOOKS_HASH, books_file, sample_books_paths

if TYPE_CHECKING:  # the books' readers load when a cohort met books: most reports never do
    from replays.validate_books import MarketLedger

GAP_SECONDS = 10.0
"""A gap in the ledger: snapshots of one token further apart than this (``arena tapes
validate``'s default)."""


@dataclass(frozen=True)
class Coverage:
    """The ledger of one books file over the markets its cohorts traded, or why there is none."""

    books: str  # the content hash the cohorts recorded
    cohorts: tuple[str, ...]
    markets: tuple[str, ...]  # traded, sorted
    entries: tuple[MarketLedger, ...] = ()
    missing: str | None = None  # one line, when the file could not be opened or is another

    def as_dict(self) -> dict[str, Any]:
        return {
            "books": self.books, "cohorts": list(self.cohorts), "markets": list(self.markets),
            "gap_seconds": GAP_SECONDS, "ledger": [e.as_dict() for e in self.entries],
            "missing": self.missing,
        }  # fmt: skip


def books_of(state: CohortState) -> str | None:
    """The content hash of the books the cohort's orders met, if any."""
    settings = state.opened.settings if state.opened is not None else {}
    books = settings.get("books")
    return books if isinstance(books, str) else None


def traded(state: CohortState) -> set[str]:
    """The markets any agent of the cohort bought in."""
    return {market for book in state.books.values() for market in book.bets_by_market}


def coverage(states: Sequence[CohortState], given: str | Path | None = None) -> list[Coverage]:
    """One ``Coverage`` per books file the cohorts used (by hash, in first-use order), over the
    markets traded in the cohorts that used it; ``given`` is the file the user named."""
    cohorts: dict[str, list[CohortState]] = {}
    for state in states:
        if (books := books_of(state)) is not None:
            cohorts.setdefault(books, []).append(state)
    return [_ledger(books, used, given) for books, used in cohorts.items()]


def _ledger(books: str, states: list[CohortState], given: str | Path | None) -> Coverage:
    markets = tuple(sorted(set().union(*(traded(s) for s in states))))
    base = Coverage(books, tuple(s.cohort for s in states), markets)
    path = _path(books, given)
    if isinstance(path, str):
        return Coverage(books, base.cohorts, markets, missing=path)
    if not markets:
        return base
    from replays.bookfile import load_books
    from replays.validate_books import ledger

    try:
        entries = ledger(load_books(path), GAP_SECONDS, set(markets))
    except (TapeError, OSError) as exc:
        return Coverage(books, base.cohorts, markets, missing=f"coverage ledger: {exc}")
    return Coverage(books, base.cohorts, markets, tuple(entries))


def _path(books: str, given: str | Path | None) -> Path | str:
    """The file with content hash ``books``, or the one line that says why there is none."""
    short = books[:12]
    if given is not None:
        from replays.bookfile import recorded_hash

        path = books_file(given)
        try:
            found = recorded_hash(path)
        except (TapeError, OSError) as exc:
            return f"coverage ledger: {exc}"
        if found == books:
            return path
        return (
            f"coverage ledger: {path} holds books {str(found)[:12]}, not the cohorts' "
            f"{short}: no ledger"
        )
    if books == SAMPLE_BOOKS_HASH:
        return sample_books_paths()[1]
    return f"coverage ledger: books {short} not found; pass --books FILE to show it"
