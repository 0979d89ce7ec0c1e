"""Settlement reads each book's index of open positions by market (``Book.by_market``), so a
resolution visits only its own market's positions; the index is kept by the same fold that
keeps ``positions``, and a copied, restored or rebuilt state has it too.

The histories are ``test_projection``'s: random trading, marks, resolutions and voids recorded
on a live cohort as a replay records them."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import NoReturn

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.events import MarketResolved, PositionRefunded, PositionSettled
from ledger.projection import Book, CohortState, Position
from ledger.rebuild import rebuild
from ledger.rules import settle
from ledger.snapshot import decode_state, encode_state
from ledger.store import EventStore
from tests.ledger import test_projection as histories
from tests.ledger.test_rules import Prices, bet, make_state, run, sell


def assert_indexed(book: Book) -> None:
    """``by_market`` is ``positions`` grouped by market: the same objects, each market's
    sides in ``positions``' order, and no market left with an empty entry."""
    grouped: dict[str, list[tuple[str, Position]]] = {}
    for (market, side), position in book.positions.items():
        grouped.setdefault(market, []).append((side, position))
    assert sorted(book.by_market) == sorted(grouped)
    for market, sides in grouped.items():
        indexed = list(book.by_market[market].items())
        assert [side for side, _ in indexed] == [side for side, _ in sides]
        assert all(a is b for (_, a), (_, b) in zip(indexed, sides, strict=True))


def closed_in_scan_order(state: CohortState, market: str) -> list[tuple[str, str]]:
    """What settlement closed before the index: every book scanned, in agent order, for the
    market's positions in the book's order."""
    return [
        (agent, p.id)
        for agent, book in state.books.items()
        for p in book.positions.values()
        if p.market == market
    ]


@settings(max_examples=120, deadline=None)
@given(rules=histories.rules, ops=histories.history, finish=st.booleans())
def test_the_index_is_the_positions_by_market_after_every_step(
    rules: str, ops: list[tuple[object, ...]], finish: bool
) -> None:
    """After any sequence of applies the index equals the positions filtered by market, and
    each resolution or void closes exactly what a scan of every position would have, in the
    same order."""
    history = histories.Run(rules)
    for op in ops:
        ending = op[0] in ("resolve", "void") and op[1] not in history.state.resolutions
        expected = closed_in_scan_order(history.state, str(op[1])) if ending else []
        before = len(history.events)
        history.step(op)
        closed = [
            (e.agent, e.position_id)
            for e in history.events[before:]
            if isinstance(e, (PositionSettled, PositionRefunded))
        ]
        assert closed == expected
        for book in history.state.books.values():
            assert_indexed(book)
    if finish:
        history.settle_everything()
    copied = history.state.copy()
    restored = decode_state(encode_state(history.state))
    with tempfile.TemporaryDirectory() as tmp, EventStore.open(Path(tmp) / "log.db") as store:
        store.append("c", history.events)
        rebuilt = rebuild(store).cohorts["c"]
    for state in (history.state, copied, restored, rebuilt):
        for book in state.books.values():
            assert_indexed(book)


class Unscannable(dict[tuple[str, str], Position]):
    """A book's positions that may be looked up and deleted one by one but never walked."""

    def _walked(self, *_: object) -> NoReturn:
        raise AssertionError("settlement walked a book's positions")

    values = items = keys = __iter__ = _walked


def test_settlement_visits_only_the_resolving_markets_positions() -> None:
    """Two agents hold positions on ``bin`` and elsewhere; settling ``bin`` never walks a
    book (every book's positions refuse it) and pays, by hand:

    alice: NO $600 at 0.75 = 800 shares, YES $1,000 at 0.25 = 4,000 shares, the NO sold whole
    ($600 back), NO again $300 at 0.75 = 400 shares (a new position, after the YES in her
    book); YES $500 of ``closing`` at 0.5. bob: YES $500 of ``bin`` = 2,000 shares.
    ``bin`` resolves No: alice's YES pays 0 (realized -1,000), her NO pays 400 (realized
    +100), bob's YES pays 0 (realized -500), in that order; ``closing`` stays open."""
    state, prices = make_state(), Prices()
    run(state, prices, [bet("bin", "NO", 600), bet("bin", "YES", 1_000)])
    run(state, prices, sells=[sell("bin", "NO", 100)])
    run(state, prices, [bet("bin", "NO", 300), bet("closing", "YES", 500)])
    run(state, prices, [bet("bin", "YES", 500)], agent="bob")
    for book in state.books.values():
        book.positions = Unscannable(book.positions)

    events = settle(state, "bin", 20, "No")

    assert events[0] == MarketResolved(cohort="c1", ts=20, market="bin", winner="No")
    paid = [
        (e.agent, e.position_id, e.shares, e.payout, e.realized)
        for e in events[1:]
        if isinstance(e, PositionSettled)
    ]
    assert paid == [
        ("alice", "alice/bin/YES/1", 4_000.0, 0.0, -1_000.0),
        ("alice", "alice/bin/NO/2", 400.0, 400.0, 100.0),
        ("bob", "bob/bin/YES/1", 2_000.0, 0.0, -500.0),
    ]
    assert len(events) == 4
    alice, bob = state.books["alice"], state.books["bob"]
    assert list(alice.by_market) == ["closing"] and bob.by_market == {}
    # alice: 10,000 - 600 - 1,000 + 600 - 300 - 500 + 400 = 8,600; bob: 10,000 - 500
    assert (alice.cash, bob.cash) == (8_600.0, 9_500.0)
