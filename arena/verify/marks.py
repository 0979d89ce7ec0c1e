"""``arena verify --tape T --books B``: marks at the mid, the bid or by liquidation derived
again.

A cohort run with ``--marks-at bid`` or ``liquidation`` values its positions by prices taken
from the order books, not from the tape. The chain proves those ``Marked`` events were not
edited after they were written, and the checking fold that the state every close recorded
follows from them; neither says they were the books' prices. This derives each such mark again
from the cohort's books (``arena.run.execution.best_bids``, and for liquidation
``liquidation_marks`` over the positions the fold holds at the mark) and names the first that
differs.
"""

from __future__ import annotations

from arena.run.execution import best_bids, book_mids, liquidation_marks
from ledger.events import Marked
from ledger.projection import CohortState
from replays.books import Books
from replays.tape import Tape

BOOK_MARKS = ("mid", "bid", "liquidation")


def mark_problem(mark: Marked, state: CohortState, tape: Tape, books: Books) -> str | None:
    """Why ``mark`` is not what the books give (``state``: the cohort folded up to it), or
    None; None too for a cohort marked at the tape's price."""
    settings = state.opened.settings if state.opened is not None else {}
    marks_at = settings.get("marks_at")
    if marks_at not in BOOK_MARKS:
        return None
    at = mark.ts * 1000
    derive, what = (book_mids, "mids") if marks_at == "mid" else (best_bids, "best bids")
    for market, prices in zip(mark.markets, mark.prices, strict=True):
        want = derive(tape, books, market, at)
        if prices != want:
            return f"marks market {market} at {prices!r}, where the books' {what} are {want!r}"
    if marks_at != "liquidation":
        return None
    marked = dict(zip(mark.markets, mark.prices, strict=True))
    shared = settings.get("liquidity") == "shared"
    want_held = liquidation_marks(tape, books, state.books, marked, at, shared)
    if (mark.held or {}) != want_held:
        return (f"marks holdings by liquidation at {mark.held!r}, where the books give "
                f"{want_held!r}")  # fmt: skip
    return None
