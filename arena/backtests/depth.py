"""The dollars a recorded book held near the price each bet was shown: what the ladder prints
per decision beside the P/L its rungs cost.

A strategy sees one price per outcome (the tape's). Whether a bet of its size could have been
had near that price is a question for the book standing when it decided: here, for every bet
of every ``DecisionMade`` of a log, the dollars the asks offered at no more than 1¢ and 5¢ over
the price shown (each level's price × its size). A bet of $2,500 where $52 sits within 1¢ is a
bet the tape's price flatters; the ladder's ``touch`` and ``l2`` rungs say by how much.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from ledger.events import DecisionMade, Event
from ledger.projection import side_index
from replays.books import Books
from replays.errors import TapeError
from replays.tape import Tape

CENTS = (0.01, 0.05)
"""How far over the shown price the dollars are counted: 1¢ and 5¢."""
_EPS = 1e-9  # a level at the shown price + 1¢ is within 1¢, whatever the doubles' last bits


@dataclass(frozen=True)
class BetDepth:
    """One bet: what was asked, the price shown, and the dollars the asks held within each of
    ``CENTS`` of it (None where the books hold no snapshot of the outcome then)."""

    cohort: str
    agent: str
    ts: int
    market: str
    side: str
    asked: float
    shown: float
    within: tuple[float, ...] | None


def within(prices: Sequence[float], sizes: Sequence[float], shown: float, cents: float) -> float:
    """Dollars on the ask levels (best first) priced at most ``cents`` over ``shown``."""
    total = 0.0
    for price, size in zip(prices, sizes, strict=True):
        if price > shown + cents + _EPS:
            break
        total += price * size
    return total


def bet_depths(events: Iterable[Event], tape: Tape, books: Books) -> list[BetDepth]:
    """Every bet of ``events`` (a log in order), against the book standing at its decision."""
    rows = []
    for event in events:
        if not isinstance(event, DecisionMade) or not event.bets:
            continue
        for bet in event.bets:
            m = tape.index.get(bet.market)
            if m is None:
                continue
            outcomes = tape.markets[m].outcomes
            found = side_index(outcomes, bet.side)
            prices = tape.price_at(bet.market, event.ts)
            if found is None or prices is None:
                continue
            shown = prices[found[1]]
            try:
                snap = books.book_at(books.token(bet.market, outcomes[found[1]]), event.ts * 1000)
            except TapeError:
                snap = None
            held = None
            if snap is not None:
                asks = snap.ask_px.tolist(), snap.ask_sz.tolist()
                held = tuple(within(*asks, shown, c) for c in CENTS)
            rows.append(BetDepth(event.cohort, event.agent, event.ts, bet.market, found[0],
                                 bet.amount, shown, held))  # fmt: skip
    return rows


@dataclass(frozen=True)
class AgentDepth:
    """An agent's bets in sum: how many had a book, the median dollars within each of
    ``CENTS``, and the share of the dollars it asked that those levels could fill."""

    agent: str
    bets: int
    median: tuple[float, ...]
    share: tuple[float, ...]


def by_agent(rows: Sequence[BetDepth]) -> list[AgentDepth]:
    """Each agent's bets that met a book, in the order the agents first bet."""
    grouped: dict[str, list[BetDepth]] = {}
    for row in rows:
        if row.within is not None:
            grouped.setdefault(row.agent, []).append(row)
    out = []
    for agent, bets in grouped.items():
        asked = sum(b.asked for b in bets)
        levels = [[b.within[k] for b in bets if b.within] for k in range(len(CENTS))]
        share = [
            sum(min(b.asked, b.within[k]) for b in bets if b.within) / asked if asked else 0.0
            for k in range(len(CENTS))
        ]
        out.append(AgentDepth(agent, len(bets), tuple(median(v) for v in levels), tuple(share)))
    return out
