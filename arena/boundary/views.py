"""Each agent's ``View`` of a decision instant: the instant's prices (``Quotes``), its cash and
priced positions, the universe's market facts and the history handle, frozen so one agent's
view cannot change another's.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ledger.live import PositionRecord
from ledger.rules import RuleSet
from strategies.api import History as ReadHistory
from strategies.api import (
    MarketMeta,
    MarketsView,
    PositionView,
    View,
)

if TYPE_CHECKING:
    pass

from arena.boundary.past import Layout, frozen


class Quotes(NamedTuple):
    """Every outcome's price of each market at the instant (``at`` is what
    ``MarketsView.prices`` calls):
    a binary market's from ``yes`` (NO = 1 − YES), any other's from its row of ``rows``
    (``row[j]``; NaN where the market has no price now). Read-only, rebuilt each instant."""

    yes: np.ndarray
    rows: np.ndarray
    row: tuple[int, ...]
    widths: tuple[int, ...]
    yes_column: tuple[int, ...]

    def at(self, j: int) -> tuple[float, ...] | None:
        """Every outcome's price of market ``j`` now, or None before its first point and past
        the tape's coverage of it (where no price is known)."""
        side = self.yes_column[j]
        if side >= 0:
            yes = float(self.yes[j])
            if math.isnan(yes):
                return None
            return (yes, 1.0 - yes) if side == 0 else (1.0 - yes, yes)
        prices = self.rows[self.row[j], : self.widths[j]]
        return None if math.isnan(prices[0]) else tuple(float(x) for x in prices)


def priced_positions(
    records: tuple[PositionRecord, ...],
    yes: np.ndarray,
    binary: np.ndarray,
    yes_column: np.ndarray,
    prices: Callable[[int], tuple[float, ...] | None],
) -> tuple[PositionView, ...]:
    """``records`` as ``PositionView``s at the instant's prices (a side without a price keeps
    its last fill price). Called only when a plugin reads ``view.positions``: pricing every
    open position at every decision was most of a tick-cadence replay's time. Everything it
    is bound to is already the plugin's to see (its own positions, the shown prices), so a
    plugin that unwraps it finds nothing more."""
    views = []
    for pid, market, side, outcome, shares, cost, last, j in records:
        if binary[j]:
            now = float(yes[j])
            price = last if math.isnan(now) else (now if outcome == yes_column[j] else 1.0 - now)
        else:
            quote = prices(j)
            price = last if quote is None or math.isnan(quote[outcome]) else quote[outcome]
        views.append(
            PositionView(id=pid, market=market, side=side, shares=shares, cost=cost, price=price)
        )
    return tuple(views)


class Views:
    """Builds each agent's ``View`` at a decision instant.

    Shared by every agent at an instant, and writable by none: the prices, the open mask, the
    market facts' arrays and the history handle. Each agent's own: its index and market facts
    (copied once per cohort, so a plugin that rewrites them confuses only itself) and its
    shares (a frozen copy at each decision).
    """

    def __init__(
        self,
        ids: tuple[str, ...],
        meta: tuple[MarketMeta, ...],
        layout: Layout,
        history: ReadHistory,
        agents: Iterable[str],
        rules: RuleSet,
    ) -> None:
        self.ids = ids
        self.history = history
        self.rules = rules
        self.index = {name: {m: j for j, m in enumerate(ids)} for name in agents}
        self.meta = {name: tuple(dataclasses.replace(m) for m in meta) for name in self.index}
        self.binary = frozen(np.array([m.is_binary for m in meta], dtype=bool))
        self.ts = 0
        self.yes = self.open = self.volume = self.binary
        self._volume_given: np.ndarray | None = None
        multi = itertools.count()
        self._row = tuple(next(multi) if side < 0 else -1 for side in layout.yes_column)
        self._layout = layout
        self.quotes = self._quotes(np.empty((0, 1)))
        self.listed = len(ids)
        """How many markets are listed now (a rolling cohort's universe grows as markets list,
        in order): an agent's view holds these, and no market not yet listed."""
        self._listed_index: dict[tuple[str, int], dict[str, int]] = {}

    def _quotes(self, rows: np.ndarray) -> Quotes:
        layout = self._layout
        return Quotes(self.yes, frozen(rows), self._row, layout.widths, layout.yes_column)

    def move_to(
        self, ts: int, yes: np.ndarray, open_mask: np.ndarray, volume: np.ndarray, rows: np.ndarray
    ) -> None:
        """Prices, open markets and volumes of the instant every agent now decides at;
        ``rows``: every outcome's price of the markets that are not binary (``AsOf.rows``)."""
        self.ts, self.yes, self.open = ts, frozen(yes), frozen(open_mask)
        if volume is not self._volume_given or volume.flags.writeable:
            self.volume = frozen(volume)  # else the same read-only array as last instant's
            self._volume_given = volume
        if rows.size or rows.shape != self.quotes.rows.shape:
            self.quotes = self._quotes(rows)
        else:  # binary markets only: the same empty rows as last instant's (no data to change)
            q = self.quotes
            self.quotes = Quotes(self.yes, q.rows, q.row, q.widths, q.yes_column)

    def view(
        self, name: str, week: int, cash: float, shares: np.ndarray,
        positions: Callable[[], tuple[PositionView, ...]],
    ) -> View:  # fmt: skip
        k = self.listed
        if k == len(self.ids):
            markets = MarketsView(
                ts=self.ts, ids=self.ids, index=self.index[name], meta=self.meta[name],
                yes=self.yes, open_mask=self.open, volume=self.volume, binary=self.binary,
                prices=self.quotes.at, history=self.history,
            )  # fmt: skip
        else:  # the listed prefix only: a market not yet listed is not there to be seen
            index = self._listed_index.get((name, k))
            if index is None:
                index = {m: j for m, j in self.index[name].items() if j < k}
                self._listed_index[(name, k)] = index
            markets = MarketsView(
                ts=self.ts, ids=self.ids[:k], index=index, meta=self.meta[name][:k],
                yes=self.yes[:k], open_mask=self.open[:k], volume=self.volume[:k],
                binary=self.binary[:k], prices=self.quotes.at, history=self.history,
            )  # fmt: skip
        return View(
            ts=self.ts,
            week=week,
            cash=cash,
            rules=self.rules,
            markets=markets,
            shares=frozen(shares),
            _positions=positions,
        )


# -- an agent's code, in this process --------------------------------------------------------
