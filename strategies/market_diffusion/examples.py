"""Rows for training and evaluating the market diffusion model: resolved markets seen at
instants spread over their lives.

A resolved market gives ``per_market`` rows, at instants evenly spaced from its first price
point to its last point before it resolved (both included), each row conditioned only on what
was knowable at its instant and labelled with how the market resolved. Which markets may give
rows is the caller's rule: training takes those resolved strictly before a cut-off, evaluation
those resolved after the model's cut-off, seen only at instants after it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from strategies.diffusion import embed_texts
from strategies.market_diffusion.features import (
    MarketFacts,
    conditions,
    label_coordinates,
    ordered,
)
from strategies.market_diffusion.model import TrainingSet

PER_MARKET = 8
"""Rows per market by default: a market's path matters, not only where it ended."""


@dataclass(frozen=True)
class ResolvedPath:
    """A resolved market's facts, its price points ((n, k) in outcome order) and its end."""

    id: str
    facts: MarketFacts
    outcomes: tuple[str, ...]
    times: np.ndarray
    prices: np.ndarray
    winner: str
    resolved_ts: int

    def winner_index(self) -> int:
        """The winner's column in model order (``features.ordered``), by case-blind label."""
        labels = [o.casefold() for o in self.outcomes]
        return ordered(self.outcomes).index(labels.index(self.winner.casefold()))


@dataclass(frozen=True)
class Rows:
    """One market's rows: instants, conditions, and the price at each instant (model order)."""

    instants: np.ndarray
    conditions: np.ndarray
    prices: np.ndarray


def spread_instants(first: int, last: int, count: int) -> np.ndarray:
    """``count`` instants evenly spaced over [first, last], rounded down, without repeats."""
    if last <= first:
        return np.array([first], dtype=np.int64)
    return np.unique(np.linspace(first, last, count).astype(np.int64))


def market_rows(market: ResolvedPath, after: int, per_market: int) -> Rows | None:
    """Rows at instants from max(first point, ``after``) to the last point before the market
    resolved; None when no point is in that span."""
    times = np.asarray(market.times, dtype=np.int64)
    before = int(np.searchsorted(times, market.resolved_ts, side="left"))
    if before == 0:
        return None
    first, last = max(int(times[0]), after), int(times[before - 1])
    if first > last:
        return None
    instants = spread_instants(first, last, per_market)
    prices = np.asarray(market.prices, dtype=np.float64)[:before, ordered(market.outcomes)]
    text = embed_texts([market.facts.question])[0]
    rows = conditions(market.facts, times[:before], prices, instants, text)
    at = np.searchsorted(times[:before], instants, side="right") - 1
    return Rows(instants, rows, prices[at])


def training_set(
    markets: Iterable[ResolvedPath], before: int, per_market: int = PER_MARKET
) -> TrainingSet:
    """Rows of every market resolved strictly before ``before``, grouped by outcome count.
    Nothing about a market that resolved at or after ``before`` is read."""
    conds: dict[int, list[np.ndarray]] = defaultdict(list)
    targets: dict[int, list[np.ndarray]] = defaultdict(list)
    prices: dict[int, list[np.ndarray]] = defaultdict(list)
    through = None
    for market in markets:
        if market.resolved_ts >= before:
            continue
        rows = market_rows(market, -(2**62), per_market)
        if rows is None:
            continue
        m = len(market.outcomes)
        conds[m].append(rows.conditions)
        prices[m].append(rows.prices)
        label = label_coordinates(market.winner_index(), m)
        targets[m].append(np.broadcast_to(label, (rows.instants.size, m - 1)))
        through = market.resolved_ts if through is None else max(through, market.resolved_ts)
    return TrainingSet(
        conditions={m: np.concatenate(c) for m, c in conds.items()},
        targets={m: np.concatenate(t) for m, t in targets.items()},
        prices={m: np.concatenate(p) for m, p in prices.items()},
        markets={m: len(c) for m, c in conds.items()},
        trained_through=-1 if through is None else through,
    )
