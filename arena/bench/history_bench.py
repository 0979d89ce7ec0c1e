"""What a strategy that looks back over a window pays per decision as the history piles up.

``ExtremizedForecaster.spreads`` measures each market's price spread over the last week. It is
replayed over a long tape (by default 50 markets with a point every 10 minutes for 694 days:
100,000 points each, 1,008 in a week) with a decision a day, and at each decision its CPU time
is taken twice: reading each market's history bounded by the window (``since``, what it does)
and reading the whole history and cutting it (what it did before the bound existed). The first
costs the same at the last decision as at the first; the second grows with the history, so a
run's total grows with the square of its decisions.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from replays.synthetic import random_walk_tape
from strategies.api import Decision, MarketsView, Strategy, View
from strategies.forecasters import ExtremizedForecaster


class WholeHistoryReads(MarketsView):
    """The same markets, each bounded read served the way it was before the bound: the whole
    history copied, then cut at ``since``."""

    @classmethod
    def of(cls, markets: MarketsView) -> WholeHistoryReads:
        found = cls.__new__(cls)
        for name in MarketsView.__slots__:
            setattr(found, name, getattr(markets, name))
        return found

    def history(
        self, market: str, until: int | None = None, *, since: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        times, values = super().history(market, until)
        first = 0 if since is None else int(np.searchsorted(times, since))
        return times[first:], values[first:]


class SpreadTimer(Strategy):
    """Holds; times the forecaster's spreads both ways at each decision, and checks that the
    two agree (they must: the bound changes what is copied, never the answer)."""

    description = "times ExtremizedForecaster.spreads per decision"

    def __init__(self) -> None:
        super().__init__()
        self.forecaster = ExtremizedForecaster()
        self.bounded: list[float] = []
        self.whole: list[float] = []

    def decide(self, view: View) -> Decision:
        began = time.process_time()
        bounded = self.forecaster.spreads(view.markets)
        middle = time.process_time()
        whole = self.forecaster.spreads(WholeHistoryReads.of(view.markets))
        self.bounded.append(middle - began)
        self.whole.append(time.process_time() - middle)
        if not np.array_equal(bounded, whole, equal_nan=True):
            raise AssertionError(f"spreads differ at t={view.ts}")
        return Decision.hold()


def _ms(seconds: list[float]) -> float:
    return round(float(np.mean(seconds)) * 1e3, 3)


def bench_history(
    markets: int = 50, points: int = 100_000, step_seconds: int = 600, seed: int = 0
) -> dict[str, Any]:
    """CPU milliseconds per call of ``spreads`` in the first and the last tenth of a daily
    replay, bounded by the window and reading whole histories."""
    tape = random_walk_tape(markets, points, seed=seed, step_seconds=step_seconds)
    config = CohortConfig(
        start=datetime.fromtimestamp(tape.span()[0], UTC),
        agents={"spreads": "hold"},
        universe=markets,
        decision_cadence="daily",
        mark_cadence="weekly",
    )
    timer = SpreadTimer()
    CohortRunner(tape, config, strategies={"spreads": timer}).run(None)
    tenth = max(1, len(timer.bounded) // 10)
    return {
        "markets": markets,
        "points_per_market": points,
        "window_points": timer.forecaster.window // step_seconds,
        "decisions": len(timer.bounded),
        "bounded_first_tenth_ms": _ms(timer.bounded[:tenth]),
        "bounded_last_tenth_ms": _ms(timer.bounded[-tenth:]),
        "whole_first_tenth_ms": _ms(timer.whole[:tenth]),
        "whole_last_tenth_ms": _ms(timer.whole[-tenth:]),
        "bounded_cpu_s": round(sum(timer.bounded), 3),
        "whole_cpu_s": round(sum(timer.whole), 3),
    }
