"""The bootstrap over markets for a set of cohorts (``ledger.intervals``' ``markets`` method).

Apart from ``ledger.leaderboard`` because it needs numpy, a tenth of a CPU-second to import:
a report whose interval is Student's t over cohorts (one cohort, or cohorts that share no
market) never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ledger.intervals import (
    DRAWS,
    PairedDifference,
    bootstrap_difference,
    bootstrap_interval,
    cohort_mean_draws,
    market_weights,
)
from ledger.projection import CohortState, implied_briers


class MarketResample:
    """The bootstrap over markets for a set of cohorts: one weight matrix over the union of
    their universes, applied alike to every agent, so paired differences stay paired."""

    def __init__(self, states: Sequence[CohortState], draws: int = DRAWS, seed: int = 0) -> None:
        self.states = list(states)
        self.markets = sorted({m for s in self.states for m in s.markets})
        self.index = {m: j for j, m in enumerate(self.markets)}
        self.draws = draws
        self.seed = seed
        self.weights = market_weights(max(len(self.markets), 1), draws, seed)
        self._matrices: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def matrices(self, agent: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per cohort the agent traded in (rows), by market (columns): its return in percent
        of starting cash, its summed implied Brier and its resolved bets."""
        if agent in self._matrices:
            return self._matrices[agent]
        states = [s for s in self.states if agent in s.books]
        shape = (len(states), self.weights.shape[1])
        ret, brier_sum, resolved = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        for k, state in enumerate(states):
            cash = state.books[agent].initial_cash
            for market, pnl in state.market_pnl(agent).items():
                ret[k, self.index[market]] += pnl / cash * 100.0 if cash else 0.0
            rows = state.books[agent].brier_rows
            if rows:  # bincount adds each market's rows in their order, as a loop would
                columns = [self.index[r.market] for r in rows]
                width = shape[1]
                brier_sum[k] = np.bincount(columns, weights=implied_briers(rows), minlength=width)
                resolved[k] = np.bincount(columns, minlength=width)
        self._matrices[agent] = (ret, brier_sum, resolved)
        return ret, brier_sum, resolved

    def return_interval(self, agent: str, mean: float) -> tuple[float | None, float | None]:
        """The interval of the agent's mean return over its cohorts."""
        ret = self.matrices(agent)[0]
        draws = cohort_mean_draws(self.weights, ret)
        return bootstrap_interval(draws, mean, _carrying(ret))

    def brier_interval(self, agent: str, mean: float) -> tuple[float | None, float | None]:
        """The interval of the mean over cohorts of each cohort's mean implied Brier."""
        _, brier_sum, resolved = self.matrices(agent)
        draws = cohort_mean_draws(self.weights, brier_sum, resolved)
        return bootstrap_interval(draws, mean, _carrying(resolved))

    def paired(self, a: str, b: str, mean: float) -> PairedDifference:
        """``a``'s mean return minus ``b``'s; both must be in every cohort."""
        diff = self.matrices(a)[0] - self.matrices(b)[0]
        draws = cohort_mean_draws(self.weights, diff)
        return bootstrap_difference(draws, np.zeros_like(draws), mean, _carrying(diff))


def _carrying(matrix: np.ndarray) -> int:
    """How many markets (columns) carry any of the figure."""
    return int(np.count_nonzero(np.abs(matrix).sum(axis=0)))
