"""A tape's resolved markets as the market diffusion model reads them, and its held-out
evaluation: forecasts next to the market price on markets resolved after the model's cut-off.

Evaluation is honest about time in both directions: a market is held out only if it resolved
after every market the model learned from (``trained_through``), and it is seen only at
instants after that cut-off, so no row asks the model about a moment at which it already knew
an outcome from that moment's future.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from replays.tape import Tape
from strategies.market_diffusion.examples import PER_MARKET, ResolvedPath, Rows, market_rows
from strategies.market_diffusion.features import MarketFacts
from strategies.market_diffusion.model import MarketModel


def resolved_paths(tape: Tape) -> Iterator[ResolvedPath]:
    """Every market of ``tape`` that resolved to a winner, with its points up to then."""
    for m, info in enumerate(tape.markets):
        resolution = tape.resolutions.get(info.id)
        if resolution is None or resolution.winner is None:
            continue
        times, values = tape.history(m, resolution.ts)
        if times.size == 0:
            continue
        facts = MarketFacts(info.question, info.category, info.end_ts, info.volume_history)
        yield ResolvedPath(
            info.id, facts, info.outcomes, times, values, resolution.winner, resolution.ts
        )


@dataclass
class HeldOut:
    """Held-out rows: per binary row the forecast, the market price, the outcome, the market
    and its category; multi-outcome rows as vectors. Instants are the rows' forecast times."""

    ids: list[str] = field(default_factory=list)
    instants: list[int] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    pred: list[float] = field(default_factory=list)
    market: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    multi_pred: list[list[float]] = field(default_factory=list)
    multi_market: list[list[float]] = field(default_factory=list)
    multi_y: list[int] = field(default_factory=list)
    markets: int = 0


def held_out(model: MarketModel, tape: Tape, per_market: int = PER_MARKET) -> HeldOut:
    """Rows of the markets that resolved after the model's cut-off, at instants after it, for
    the outcome counts the model knows; forecast in one block per outcome count."""
    cutoff = model.summary.trained_through
    found: dict[int, list[tuple[ResolvedPath, Rows]]] = defaultdict(list)
    for path in resolved_paths(tape):
        m = len(path.outcomes)
        if path.resolved_ts <= cutoff or m not in model.denoisers:
            continue
        rows = market_rows(path, cutoff + 1, per_market)
        if rows is not None:
            found[m].append((path, rows))
    out = HeldOut(markets=sum(len(v) for v in found.values()))
    for m, entries in sorted(found.items()):
        forecast = model.forecast(
            m,
            np.concatenate([rows.conditions for _, rows in entries]),
            np.concatenate([rows.prices for _, rows in entries]),
        )
        prices = np.concatenate([rows.prices for _, rows in entries])
        winners = [path.winner_index() for path, rows in entries for _ in rows.instants]
        if m == 2:
            out.pred += forecast[:, 0].tolist()
            out.market += prices[:, 0].tolist()
            out.y += [1.0 if w == 0 else 0.0 for w in winners]
            for path, rows in entries:
                out.ids += [path.id] * rows.instants.size
                out.instants += rows.instants.tolist()
                out.categories += [path.facts.category or ""] * rows.instants.size
        else:
            out.multi_pred += forecast.tolist()
            out.multi_market += _normalised(prices).tolist()
            out.multi_y += winners
    return out


def _normalised(prices: np.ndarray) -> np.ndarray:
    """A multi-outcome market's prices as a forecast: rows scaled to sum to 1 (a book's
    prices need not); a row of zeros becomes uniform."""
    totals = prices.sum(axis=1, keepdims=True)
    uniform = np.full_like(prices, 1.0 / prices.shape[1])
    safe = np.where(totals > 0, totals, 1.0)
    return np.where(totals > 0, prices / safe, uniform)
