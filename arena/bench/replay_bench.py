"""The peer workload: how many price ticks per second the whole replay path sustains.

500 binary markets x 2,000 one-second steps of a mean-reverting logit random walk (prices
rounded to 0.001, clipped to [0.02, 0.98]); a decision at every step by a strategy that buys
$50 of YES when flat below 0.40 and sells everything when long above 0.60; enough cash that
nothing is rejected; every decision, order and fill appended to a fresh SQLite log. The clock
covers the runner and the log, not building the synthetic tape.
"""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from arena.cohort import CohortConfig
from arena.runner import CohortRunner
from ledger.store import EventStore
from replays.synthetic import random_walk_tape
from strategies.api import Bet, Decision, Sell, Strategy, View


class BandTrader(Strategy):
    """Buy $50 of YES under 0.40 when flat; sell 100% over 0.60 when long. Vectorised."""

    description = "peer-benchmark band trader"

    def decide(self, view: View) -> Decision:
        markets = view.markets
        yes = markets.yes
        long = view.shares[:, 0] > 0
        tradable = markets.open
        ids = markets.ids
        buys = np.flatnonzero(~long & tradable & (yes < 0.40))
        sells = np.flatnonzero(long & tradable & (yes > 0.60))
        if buys.size == 0 and sells.size == 0:
            return Decision()
        return Decision(
            bets=[Bet(market=ids[i], side="YES", amount=50.0) for i in buys],
            sells=[Sell(percentage=100.0, market=ids[i], side="YES") for i in sells],
        )


def bench_replay(markets: int = 500, steps: int = 2_000, seed: int = 0) -> dict[str, Any]:
    tape = random_walk_tape(markets, steps, seed=seed, step_seconds=1)
    config = CohortConfig(
        start=datetime.fromtimestamp(tape.span()[0], UTC),
        agents={"band": "band"},
        universe=markets,
        cash=1e12,
        decision_cadence="tick",
        seed=seed,
    )
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        runner = CohortRunner(tape, config, strategies={"band": BandTrader()})
        with EventStore.open(Path(tmp) / "bench.db") as store:
            run = runner.run(store)
        seconds = time.perf_counter() - began
    book = run.state.books["band"]
    ticks = markets * steps
    return {
        "ticks": ticks,
        "orders": run.state.n_orders,
        "fills": book.n_bets + book.n_sells,
        "rejected": book.n_rejected,
        "events": run.events,
        "seconds": round(seconds, 4),
        "ticks_per_s": round(ticks / seconds),
    }
