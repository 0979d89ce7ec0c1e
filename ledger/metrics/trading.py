"""Trading-based scores: what a forecast would have earned against the market price.

Proper scores say how close a forecast is to the outcome; these say whether the *difference*
from the market carries money (methodology §2.3, §2.4). ``p`` is the forecast, ``q`` the price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from ledger.metrics.validation import (
    FloatArray,
    MetricInputError,
    as_outcomes,
    as_probabilities,
    check_non_negative,
    same_length,
)

TradingMode = Literal["sign", "linear"]
KELLY_FRAC_CAP = 0.25
KELLY_EPS = 1e-9


def _market_inputs(
    p: ArrayLike, q: ArrayLike, y: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    probs, prices, labels = as_probabilities("p", p), as_probabilities("q", q), as_outcomes("y", y)
    same_length(p=probs, q=prices, y=labels)
    return probs, prices, labels


def positions(p: FloatArray, q: FloatArray, B: float, mode: TradingMode) -> FloatArray:
    """Position b per event: ``sign`` stakes B in the direction of the edge (none when p == q);
    ``linear`` stakes in proportion to the edge, capped at B either way."""
    if mode == "sign":
        return B * np.sign(p - q)
    if mode == "linear":
        return np.clip(B * (p - q), -B, B)
    raise MetricInputError(f"mode must be 'sign' or 'linear', got {mode!r}")


def realized_trading_pnl(
    p: ArrayLike,
    q: ArrayLike,
    y: ArrayLike,
    *,
    B: float = 1.0,
    transaction_cost: float = 0.0,
    mode: TradingMode = "sign",
) -> float:
    """Mean over all events (no-trade events count as 0) of b(y - q) - c|b|.

    b > 0 buys YES at q; b < 0 shorts YES, i.e. buys NO at 1 - q.
    """
    check_non_negative("B", B)
    check_non_negative("transaction_cost", transaction_cost)
    probs, prices, labels = _market_inputs(p, q, y)
    b = positions(probs, prices, B, mode)
    return float(np.mean(b * (labels - prices) - transaction_cost * np.abs(b)))


@dataclass(frozen=True)
class KellyResult:
    """Outcome of the capped-Kelly bankroll run: rows evaluated, return, and final bankroll."""

    n: int
    roi: float
    final_bankroll: float


def kelly_factors(
    p: ArrayLike,
    q: ArrayLike,
    y: ArrayLike,
    *,
    fee: float = 0.0,
    scale: float = 1.0,
    frac_cap: float = KELLY_FRAC_CAP,
    eps: float = KELLY_EPS,
) -> FloatArray:
    """What each row's bet multiplies the bankroll by in forecastbench's Kelly simulator
    (methodology §2.4).

    YES when p > q with fraction (p - q)/(1 - q), NO when p < q with (q - p)/q, both scaled and
    capped; the fee (fee * f * bankroll) is paid before the bet. A win multiplies what is left by
    1 + f*odds (odds (1-q)/q for YES, q/(1-q) for NO), a loss by 1 - f.
    """
    check_non_negative("fee", fee)
    check_non_negative("scale", scale)
    check_non_negative("frac_cap", frac_cap)
    probs, prices, labels = _market_inputs(p, q, y)
    probs = np.clip(probs, eps, 1.0 - eps)
    prices = np.clip(prices, eps, 1.0 - eps)
    yes = probs > prices
    no = probs < prices
    edge = np.where(yes, (probs - prices) / (1.0 - prices), (prices - probs) / prices)
    f = np.where(yes | no, np.clip(scale * edge, 0.0, frac_cap), 0.0)
    odds = np.where(yes, (1.0 - prices) / prices, prices / (1.0 - prices))
    won = np.where(yes, labels == 1.0, labels == 0.0)
    factor: FloatArray = (1.0 - fee * f) * np.where(won, 1.0 + f * odds, 1.0 - f)
    return factor


def kelly_bankroll(
    p: ArrayLike,
    q: ArrayLike,
    y: ArrayLike,
    *,
    fee: float = 0.0,
    initial_bankroll: float = 1.0,
    scale: float = 1.0,
    frac_cap: float = KELLY_FRAC_CAP,
    eps: float = KELLY_EPS,
) -> KellyResult:
    """forecastbench's Kelly simulator, rows bet one after another in order: every step
    multiplies the bankroll (:func:`kelly_factors`), so the run is their product."""
    factor = kelly_factors(p, q, y, fee=fee, scale=scale, frac_cap=frac_cap, eps=eps)
    with np.errstate(over="ignore"):  # long shots can compound past a float: inf
        final = initial_bankroll * float(np.prod(factor))
    return KellyResult(n=len(factor), roi=final / initial_bankroll - 1.0, final_bankroll=final)


@dataclass(frozen=True)
class KellyRuns:
    """Separate Kelly runs, one per bettor: rows, runs, and each run's return from 1."""

    n: int
    rois: FloatArray

    @property
    def mean_roi(self) -> float:
        return float(np.mean(self.rois))


def kelly_by_run(
    p: ArrayLike, q: ArrayLike, y: ArrayLike, runs: ArrayLike, *, fee: float = 0.0
) -> KellyRuns:
    """forecastbench's simulator run once per value of ``runs``, each from a bankroll of 1.

    Why: rows of parallel bettors (arena's cohorts and agents, each starting with its own
    cash) are not one bettor's sequence. Chained as one run, every cohort's factor multiplies
    the others', so 26 cohorts of an agent that lost 1.7 % on average compounded to a "return"
    of +1.5e12 %: exponential in the number of cohorts, not a property of the forecasts.
    """
    factor = kelly_factors(p, q, y, fee=fee)
    codes = np.asarray(runs)
    if codes.shape != factor.shape:
        raise MetricInputError(f"runs has {codes.size} rows, the forecasts {factor.size}")
    _, inverse = np.unique(codes, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inverse[order]) != 0])
    with np.errstate(over="ignore"):
        rois: FloatArray = np.multiply.reduceat(factor[order], starts) - 1.0
    return KellyRuns(n=len(factor), rois=rois)


def bounded_trader_profit(
    p_true: ArrayLike, q: ArrayLike, *, B: float = 1.0, transaction_cost: float = 0.0
) -> float:
    """B * mean(max(|p - q| - c, 0)): the best a trader with a position in [-B, B] and linear
    payoff b(Y - q) can expect when it knows the true probability (methodology §2.3)."""
    check_non_negative("B", B)
    check_non_negative("transaction_cost", transaction_cost)
    truth, prices = as_probabilities("p_true", p_true), as_probabilities("q", q)
    same_length(p_true=truth, q=prices)
    return float(B * np.mean(np.maximum(np.abs(truth - prices) - transaction_cost, 0.0)))
