"""``kelly``: fractional Kelly stakes from any forecaster, on binary and multi-outcome markets.

Buying an outcome at price q that the forecaster gives probability p is a bet that pays
(1 − q)/q per dollar with probability p; Kelly's stake for it is the fraction

    f = (p − q) / (1 − q)

of the bankroll (the cash at the decision), positive only where p > q. The agent bets
``fraction`` × f × cash (a quarter of Kelly by default: full Kelly's swings are large and it
assumes the forecast is exact), less what it already holds on that outcome, in whole cents,
largest f first. The rules' maximum caps the whole decision, under either rule set: its bets
together stay within ``max_fraction`` (25%) of the cash at the decision (rules v1 alone would let
each bet take 25% of what the one before left, most of the cash in one decision), and a bet
under the minimum is skipped (``View.budget`` judges each bet as the broker will).

A binary market's outcomes are YES at q and NO at 1 − q, with p and 1 − p. A market of N
outcomes is traded the same way on every outcome: the forecaster gives P(first outcome) (the
price it reads is the first outcome's, ``MarketsView.yes``), and the rest of the probability is
shared among the other outcomes in proportion to their prices. Per market the agent backs the
one outcome with the largest f whose p − q exceeds ``min_edge``. It never sells: a position
is held to resolution, and topped up when the forecast's stake grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pydantic

from strategies.api import Bet, Decision, MarketsView, View
from strategies.builtin.edge import EDGE_TOLERANCE, ForecasterChoice, NamedForecaster, cents


class KellySettings(ForecasterChoice):
    fraction: float = pydantic.Field(
        default=0.25, gt=0, le=1, description="share of Kelly's stake bet (1: full Kelly)"
    )
    min_edge: float = pydantic.Field(
        default=0.0, ge=0, lt=1, description="bet an outcome only when p − q exceeds this"
    )


def kelly_fraction(p: float, q: float) -> float:
    """Kelly's share of the bankroll for buying at price q what wins with probability p."""
    return (p - q) / (1.0 - q)


def outcome_beliefs(first: float, prices: Sequence[float]) -> np.ndarray:
    """Every outcome's probability from P(first outcome): the rest shared among the others in
    proportion to their prices (all of it to the second of two)."""
    q = np.asarray(prices, dtype=np.float64)
    rest = q[1:].sum()
    others = q[1:] / rest * (1.0 - first) if rest > 0 else np.zeros(q.size - 1)
    return np.concatenate(([first], others))


@dataclass(frozen=True)
class Pick:
    """The outcome of one market Kelly backs: its index in the universe, label, price, the
    forecast's probability and Kelly's fraction."""

    market: int
    side: str
    price: float
    belief: float
    f: float


def pick(markets: MarketsView, i: int, p: float, min_edge: float) -> Pick | None:
    """The outcome of market ``i`` with the largest Kelly fraction whose edge p − q exceeds
    ``min_edge``, or None."""
    sides: tuple[str, ...]
    prices: tuple[float, ...]
    if markets.binary[i]:
        q = float(markets.yes[i])
        sides, prices = ("YES", "NO"), (q, 1.0 - q)
    else:
        sides = markets.meta_at(i).outcomes
        prices = markets.prices(markets.ids[i]) or ()
        if len(prices) != len(sides):
            return None
    beliefs = outcome_beliefs(p, prices)
    best: Pick | None = None
    for side, q, belief in zip(sides, prices, beliefs, strict=True):
        if not 0.0 < q < 1.0 or belief - q <= min_edge + EDGE_TOLERANCE:
            continue
        f = kelly_fraction(float(belief), q)
        if best is None or f > best.f:
            best = Pick(i, side, q, float(belief), f)
    return best


class Kelly(NamedForecaster):
    """Stakes a fraction of Kelly's bet on the outcome a forecaster rates above its price."""

    Settings = KellySettings
    settings: KellySettings
    description = (
        "fractional Kelly from any forecaster: fraction × (p − q)/(1 − q) of cash on the "
        "outcome it rates above its price, binary or multi-outcome"
    )

    def decide(self, view: View) -> Decision:
        markets = view.markets
        s = self.settings
        p = np.asarray(self.forecaster.forecast(view), dtype=np.float64)
        picks = [
            found
            for i in np.flatnonzero(markets.open & np.isfinite(p))
            if (found := pick(markets, int(i), float(p[i]), s.min_edge)) is not None
        ]
        picks.sort(key=lambda k: -k.f)  # stable: ties keep the universe's order
        held = {(pos.market, pos.side): pos.cost for pos in view.positions}
        budget = view.budget()
        left = cents(view.max_fraction * view.cash)  # the decision's share, under v1 as v2
        bets: list[Bet] = []
        notes: list[str] = []
        small: list[str] = []
        for k in picks:
            market = markets.ids[k.market]
            stake = cents(s.fraction * k.f * view.cash)
            shortfall = cents(stake - held.get((market, k.side), 0.0))
            if shortfall < view.min_bet:
                if shortfall > 0:
                    small.append(f"{market} {k.side} ${shortfall:.2f}")
                continue
            cap = min(budget.room(), left)
            amount = budget.take(min(shortfall, cap))
            if not amount:
                notes.append(f"no room left under the decision's maximum for {market} {k.side}")
                break
            left = cents(left - amount)
            bets.append(Bet(market=market, side=k.side, amount=amount, belief=k.belief))
            cut = (
                f", cut from ${shortfall:.2f} to the ${cap:.2f} maximum"
                if amount < shortfall
                else ""
            )
            notes.append(
                f"{k.side} ${amount:.2f} on {market} (p {k.belief:.3f} vs price {k.price:.3f}: "
                f"Kelly {k.f:.3f} × {s.fraction:g}{cut})"
            )
        if small:
            notes.append(f"skipped below the ${view.min_bet:.2f} minimum: {', '.join(small)}")
        if not notes:
            abstain = getattr(self.forecaster, "abstain", None)
            notes.append(
                f"no forecast: {abstain}" if abstain else "no outcome priced below its forecast"
            )
        return Decision(bets=bets, reasoning="; ".join(notes), trace=self._forecast_trace())
