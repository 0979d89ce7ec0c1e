"""A cohort's state as a running replay keeps it: the fold, plus what each decision's view
needs of every agent's holdings without walking its book.

``LiveCohort`` is a ``CohortState`` whose fold also keeps, per agent, its shares as an array
(market × outcome, markets in the order they were listed: a replay lists its universe in
order) and its open positions as
plain records in its book's order. They are kept by the same ``apply`` that changes the book,
so they can never disagree with it, and they are derived from the log alone: folding a live
cohort's events into a fresh ``LiveCohort`` gives the same arrays and records. A rebuild folds
into a plain ``CohortState`` and pays nothing for them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from ledger.events import (
    CohortOpened,
    Event,
    MarketListed,
    OrderFilled,
    PositionRefunded,
    PositionSettled,
)
from ledger.projection import HANDLERS, CohortState, DecisionFacts

PositionRecord = tuple[str, str, str, int, float, float, float, int]
"""An open position as a view reads it: id, market, side, outcome index, shares, cost, last
fill price, and the market's index in the universe."""


class HeldPositions:
    """One agent's open positions as records, as they stood when it was handed out, built
    when first read: pricing waits for a plugin to read ``view.positions``, and so does this
    tuple, which at 50,000 markets cost 2.8 ms at each decision after a trade whether or not
    the plugin looked. The live records change after the decision (its own fills), so
    ``LiveCohort`` builds the tuple of any one still held before it changes them: whenever it
    is read, it is the decision's. It holds only the agent's own records, and lets go of them
    once built."""

    __slots__ = ("__weakref__", "_built", "_records")

    def __init__(self, records: dict[tuple[str, str], PositionRecord]) -> None:
        self._records: dict[tuple[str, str], PositionRecord] | None = records
        self._built: tuple[PositionRecord, ...] | None = None

    def records(self) -> tuple[PositionRecord, ...]:
        """The records, in the book's order (built now if not yet)."""
        if self._built is None:
            assert self._records is not None
            self._built, self._records = tuple(self._records.values()), None
        return self._built

    def __iter__(self) -> Iterator[PositionRecord]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self.records())


class LiveCohort(CohortState):
    """The live state of a replay: ``CohortState`` plus each agent's shares and records."""

    def __init__(self, cohort: str) -> None:
        super().__init__(cohort)
        self.index: dict[str, int] = {}
        """Each universe market's row in the shares arrays."""
        self._shares: dict[str, np.ndarray] | None = None
        self._records: dict[str, dict[tuple[str, str], PositionRecord]] = {}
        self._held: dict[str, weakref.ref[HeldPositions]] = {}
        """Per agent, the last ``HeldPositions`` handed out, while anyone still holds it."""

    def apply(self, event: Event | DecisionFacts) -> None:
        """The fold of ``CohortState.apply``, keeping the shares and records as it goes."""
        handler = LIVE_HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def shares(self, agent: str) -> np.ndarray:
        """The agent's shares by market and outcome: the live array, which only the fold may
        change (a view shows a frozen copy)."""
        return self._arrays()[agent]

    def holdings(self, agent: str) -> HeldPositions:
        """The agent's open positions as they stand now, built when first read; the same
        object until one of them changes, so decisions that neither trade nor read build
        nothing."""
        ref = self._held.get(agent)
        held = ref() if ref is not None else None
        if held is None:
            held = HeldPositions(self._records[agent])
            self._held[agent] = weakref.ref(held)
        return held

    def positions_held(self, agent: str) -> tuple[PositionRecord, ...]:
        """The agent's open positions as records, in its book's order."""
        return self.holdings(agent).records()

    def _arrays(self) -> dict[str, np.ndarray]:
        """The shares arrays, made at their first use (a replay lists every market before
        anyone trades, so they are made once) from the books as they stand."""
        if self._shares is None:
            width = max((len(self.markets[m].outcomes) for m in self.index), default=0)
            self._shares = {a: np.zeros((len(self.index), width)) for a in self.books}
            for agent, book in self.books.items():
                for p in book.positions.values():
                    self._shares[agent][self.index[p.market], p.outcome] = p.shares
        return self._shares

    def _hold(self, agent: str, market: str, side: str) -> None:
        """Bring the agent's record and share count of one position in line with its book. The
        records follow the book's dict operation by operation (update in place, append when
        opened, drop when closed), so they keep its order."""
        j = self.index[market]
        key = (market, side)
        position = self.books[agent].positions.get(key)
        records = self._records[agent]
        ref = self._held.pop(agent, None)
        if ref is not None and (held := ref()) is not None:
            held.records()  # a view may still read it: it keeps the positions it was shown
        if position is None:
            records.pop(key, None)
        else:
            p = position
            records[key] = (p.id, p.market, p.side, p.outcome, p.shares, p.cost, p.last_price, j)
        outcome = self.side_of(market, side)
        if outcome is not None:
            self._arrays()[agent][j, outcome[1]] = position.shares if position else 0.0

    def _opened_live(self, e: CohortOpened) -> None:
        self._opened(e)
        self._records = {agent: {} for agent in e.agents}

    def _listed_live(self, e: MarketListed) -> None:
        self._listed(e)
        if e.market not in self.index:
            self.index[e.market] = len(self.index)
            self._shares = None  # one row more: made again from the books when next used

    def _filled_live(self, e: OrderFilled) -> None:
        self._filled(e)
        self._hold(e.agent, e.market, e.side)

    def _settled_live(self, e: PositionSettled) -> None:
        self._settled(e)
        self._hold(e.agent, e.market, e.side)

    def _refunded_live(self, e: PositionRefunded) -> None:
        self._refunded(e)
        self._hold(e.agent, e.market, e.side)


LIVE_HANDLERS: dict[type, Any] = {
    **HANDLERS,
    CohortOpened: LiveCohort._opened_live,
    MarketListed: LiveCohort._listed_live,
    OrderFilled: LiveCohort._filled_live,
    PositionSettled: LiveCohort._settled_live,
    PositionRefunded: LiveCohort._refunded_live,
}
"""``HANDLERS``, with the events that change holdings (or their shape) keeping them too."""
