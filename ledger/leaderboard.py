"""Standings within a cohort and the leaderboard across cohorts (origins §1.11, §1.12).

Everything here is read off the projected state, so a leaderboard can be rebuilt from the log
like any other projection. The formulas are Forecaster Arena's: agents in a cohort rank by
total value; across cohorts an agent ranks by summed P/L (not by Brier), its Brier is the mean
over *all* its rows (trade-weighted, not cohort-weighted) and its P/L percentage is the
capital-weighted return. On top of that we add what the original only suggested: a Student-t
confidence interval over cohorts, because a mean return over three cohorts without its spread
invites reading noise as skill.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import msgspec
import numpy as np

from ledger.errors import LedgerError
from ledger.metrics import brier, ece, log_loss, murphy
from ledger.projection import BrierRow, CohortState, Ledger

RANDOM_BRIER = 0.25
"""The Brier of always saying 0.5: the baseline of Forecaster Arena's skill score."""

_Z_975 = 1.959963984540054
_SERIES_MAX_DF = 1000
"""Above this the exact series (one term per two degrees of freedom) gives way to the
Cornish-Fisher expansion, whose error there is below 1e-9."""


class AgentStanding(msgspec.Struct, frozen=True, kw_only=True):
    """One agent's account and scores in one cohort, as the cohort page shows them."""

    cohort: str
    agent: str
    cash: float
    positions_value: float
    total_value: float
    pnl: float
    return_pct: float
    realized_pnl: float
    unrealized_pnl: float
    brier: float | None
    bss: float | None
    bss_market: float | None
    n_resolved: int
    win_rate: float | None
    n_bets: int
    n_sells: int
    n_rejected: int
    n_decisions: int
    n_errors: int
    initial_cash: float


class LeaderboardRow(msgspec.Struct, frozen=True, kw_only=True):
    """One agent across every cohort it traded in."""

    agent: str
    cohorts: int
    total_pnl: float
    pnl_pct: float
    brier: float | None
    win_rate: float | None
    n_resolved: int
    return_mean: float
    return_ci_low: float | None
    return_ci_high: float | None
    brier_mean: float | None
    brier_ci_low: float | None
    brier_ci_high: float | None


class PairedDifference(NamedTuple):
    """The mean of paired differences ``a - b`` and its 95% interval."""

    mean: float
    ci_low: float | None
    ci_high: float | None
    significant: bool


# -- statistics ----------------------------------------------------------------------------------


def _t_two_sided_mass(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df``, by the finite series of Abramowitz and
    Stegun 26.7.3-4; exact up to rounding, so no table runs out and no scipy is needed."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return (2.0 / math.pi) * (theta + math.sin(theta) * math.cos(theta) * total)
    term, total = 1.0, 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (12.706 for df=1)."""
    if df < 1:
        raise LedgerError(f"degrees of freedom must be at least 1, got {df}")
    if df > _SERIES_MAX_DF:
        z = _Z_975
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    lo, hi = 0.0, 64.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_two_sided_mass(mid, df) < 0.95:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2


def mean_ci(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """Mean and 95% interval ``mean ± t·s/√n`` (sample s); no interval for a single value."""
    n = len(values)
    if n == 0:
        raise LedgerError("cannot take the mean of no values")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, None, None
    s = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile_975(n - 1) * s / math.sqrt(n)
    return mean, mean - half, mean + half


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference:
    """Compare two strategies on the same cohorts: the interval of the per-cohort differences.

    Pairing removes the variation that cohorts share (a bull week lifts both), which is why
    ``arena backtest`` compares per cohort rather than two independent means. ``significant``
    means the 95% interval excludes zero; one pair never is.
    """
    if len(a) != len(b):
        raise LedgerError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    mean, low, high = mean_ci([x - y for x, y in zip(a, b, strict=True)])
    significant = low is not None and high is not None and (low > 0 or high < 0)
    return PairedDifference(mean, low, high, significant)


# -- scores of Brier rows -----------------------------------------------------------------------


def _mean_brier(rows: Sequence[BrierRow]) -> float | None:
    return math.fsum(r.brier for r in rows) / len(rows) if rows else None


def _win_rate(rows: Sequence[BrierRow]) -> float | None:
    return sum(r.won for r in rows) / len(rows) if rows else None


def _skill(brier: float | None, reference: float | None) -> float | None:
    if brier is None or reference is None or reference <= 0:
        return None
    return 1.0 - brier / reference


def _market_brier(rows: Sequence[BrierRow]) -> float | None:
    """The Brier the market itself would have scored: the price paid for each traded side."""
    return math.fsum((r.price - r.won) ** 2 for r in rows) / len(rows) if rows else None


# -- standings ----------------------------------------------------------------------------------


def cohort_standings(state: CohortState) -> list[AgentStanding]:
    """The agents of one cohort, richest first (ties by name, so the order is stable)."""
    rows = []
    for agent, book in state.books.items():
        positions_value = state.positions_value(agent)
        open_cost = math.fsum(p.cost for p in book.positions.values())
        total_value = book.cash + positions_value
        pnl = total_value - book.initial_cash
        brier = _mean_brier(book.brier_rows)
        rows.append(
            AgentStanding(
                cohort=state.cohort,
                agent=agent,
                cash=book.cash,
                positions_value=positions_value,
                total_value=total_value,
                pnl=pnl,
                return_pct=pnl / book.initial_cash * 100.0 if book.initial_cash else 0.0,
                realized_pnl=book.realized,
                unrealized_pnl=positions_value - open_cost,
                brier=brier,
                bss=_skill(brier, RANDOM_BRIER),
                bss_market=_skill(brier, _market_brier(book.brier_rows)),
                n_resolved=len(book.brier_rows),
                win_rate=_win_rate(book.brier_rows),
                n_bets=book.n_bets,
                n_sells=book.n_sells,
                n_rejected=book.n_rejected,
                n_decisions=book.n_decisions,
                n_errors=book.n_errors,
                initial_cash=book.initial_cash,
            )
        )
    rows.sort(key=lambda r: (-r.total_value, r.agent))
    return rows


def _states(source: Ledger | Iterable[CohortState]) -> list[CohortState]:
    if isinstance(source, Ledger):
        return [source.cohorts[name] for name in sorted(source.cohorts)]
    return list(source)


def standings(source: Ledger | Iterable[CohortState]) -> dict[str, list[AgentStanding]]:
    """``cohort_standings`` of every cohort, keyed by cohort name."""
    return {state.cohort: cohort_standings(state) for state in _states(source)}


def leaderboard(source: Ledger | Iterable[CohortState]) -> list[LeaderboardRow]:
    """Every agent name across all cohorts, ordered by total P/L (origins §1.12)."""
    per_agent: dict[str, list[AgentStanding]] = {}
    rows_of: dict[str, list[BrierRow]] = {}
    for state in _states(source):
        for standing in cohort_standings(state):
            per_agent.setdefault(standing.agent, []).append(standing)
            rows_of.setdefault(standing.agent, []).extend(state.books[standing.agent].brier_rows)
    board = []
    for agent, results in per_agent.items():
        rows = rows_of[agent]
        total_pnl = math.fsum(r.pnl for r in results)
        capital = math.fsum(r.initial_cash for r in results)
        return_mean, return_low, return_high = mean_ci([r.return_pct for r in results])
        briers = [r.brier for r in results if r.brier is not None]
        brier_mean, brier_low, brier_high = mean_ci(briers) if briers else (None, None, None)
        board.append(
            LeaderboardRow(
                agent=agent,
                cohorts=len(results),
                total_pnl=total_pnl,
                pnl_pct=total_pnl / capital * 100.0 if capital else 0.0,
                brier=_mean_brier(rows),
                win_rate=_win_rate(rows),
                n_resolved=len(rows),
                return_mean=return_mean,
                return_ci_low=return_low,
                return_ci_high=return_high,
                brier_mean=brier_mean,
                brier_ci_low=brier_low,
                brier_ci_high=brier_high,
            )
        )
    board.sort(key=lambda r: (-r.total_pnl, r.agent))
    return board


def belief_scores(rows: Sequence[BrierRow]) -> dict[str, object] | None:
    """Proper scores of the beliefs an agent stated, against the implied-confidence Brier of the
    same bets; None when it stated none (a belief is its P(the bet's side wins))."""
    stated = [r for r in rows if r.belief is not None]
    if not stated:
        return None
    p = np.array([r.belief for r in stated], dtype=np.float64)
    won = np.array([r.won for r in stated], dtype=np.float64)
    decomposition = murphy(p, won)
    return {
        "n": len(stated),
        "brier": brier(p, won),
        "log_loss": log_loss(p, won),
        "ece": ece(p, won),
        "murphy": {
            "reliability": decomposition.reliability,
            "resolution": decomposition.resolution,
            "uncertainty": decomposition.uncertainty,
        },
        "implied_brier": math.fsum(r.brier for r in stated) / len(stated),
    }
