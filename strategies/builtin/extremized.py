"""``extremized``: trade the market against K-Fish's asymmetric extremization of its own price.

The forecast is p = 0.5 + (q − 0.5)·f(s), K-Fish's stretch (methodology §3.2, reused from
``ledger.metrics``): f = 1 + a when the spread s ≤ 0.05, 1 − a/2 when s ≥ 0.20, linear between,
clipped into [0.01, 0.99]. The spread is the population std of the market's prices over the last
``window_days`` (a calm market reads as a crowd in agreement and is pushed away from 0.5, a
volatile one is pulled toward it), or the fixed ``spread`` setting when given.

It trades like ``sign``: B dollars on the side the forecast favours when |p − q| − c exceeds
``min_edge`` (5 points by default, so the 0.01/0.99 clip alone does not trigger trades on
near-certain markets), sells a held side when the forecast turns, and states p (or 1 − p) as
the bet's ``belief``.
"""

from __future__ import annotations

import pydantic

from strategies.builtin.edge import EdgeTrader, TraderSettings
from strategies.forecaster_registry import Forecaster
from strategies.forecasters import DAY, ExtremizedForecaster


class ExtremizedSettings(TraderSettings):
    min_edge: float = pydantic.Field(
        default=0.05, ge=0, lt=1, description="trade only when |p − q| − c exceeds this"
    )
    a: float = pydantic.Field(
        default=0.5, ge=0, le=2, description="aggressiveness: stretch 1 + a, shrink 1 − a/2"
    )
    spread: float | None = pydantic.Field(
        default=None, ge=0, description="fixed spread s; unset = std of recent prices"
    )
    window_days: float = pydantic.Field(
        default=7.0, gt=0, description="days of price history the spread is measured over"
    )


class Extremized(EdgeTrader):
    """Bets B dollars where K-Fish's extremized price differs from the price by a margin."""

    Settings = ExtremizedSettings
    mode = "sign"
    description = "K-Fish asymmetric extremization of the price; bets where it differs"
    settings: ExtremizedSettings

    def make_forecaster(self) -> Forecaster:
        s = self.settings
        return ExtremizedForecaster(a=s.a, spread=s.spread, window=round(s.window_days * DAY))
