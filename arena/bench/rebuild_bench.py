"""How fast every projection is rebuilt from a large log.

The log is made by the real broker, so it is a log the simulator could have written: five
agents trading 200 binary markets, a decision per agent per step (buys when flat, sells when
long, the odd bet below the minimum that is rejected), a mark every 50 steps, and every
market resolved at the end. Making it is not timed; reading and folding it is, several times
on the same file: the best run is the figure (this machine's neighbours only ever slow it
down), the median says how much they did. The rebuilt state is checked against the state the
broker kept live while writing the log, so a fast wrong rebuild cannot pass for a fast one.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arena.run.plan import VOLUME_FINAL
from ledger.events import (
    BetIntent,
    CohortOpened,
    DecisionMade,
    Event,
    Marked,
    MarketListed,
    SellIntent,
)
from ledger.projection import CohortState
from ledger.rebuild import rebuild
from ledger.rules import Broker, rules_for, settle
from ledger.snapshot import FORMAT, encode_state
from ledger.store import EventStore

AGENTS = ("alpha", "bravo", "charlie", "delta", "echo")


def make_log(
    store: EventStore,
    n_events: int,
    seed: int = 0,
    markets: int = 200,
    snapshot_every: int | None = None,
    agents: Sequence[str] = AGENTS,
) -> tuple[int, CohortState]:
    """Append a coherent cohort of at least ``n_events`` events; with ``snapshot_every``, store
    a snapshot after each append that passes that many events since the last, as the runner
    does for a long cohort. Returns the count and the
    state the broker kept live while making them."""
    rng = np.random.default_rng(seed)
    cohort = "bench-rebuild"
    state = CohortState(cohort)
    ids = [f"m{i:04d}" for i in range(markets)]
    head: list[Event] = [
        CohortOpened(
            cohort=cohort,
            ts=0,
            start=0,
            rules="v1",
            cash=1e9,
            agents=list(agents),
            decision_cadence="tick",
            mark_cadence="50s",
            settings={"universe_by": VOLUME_FINAL},  # as every replay records it
        ),
        *(
            MarketListed(
                cohort=cohort,
                ts=0,
                market=m,
                question=f"Will {m} happen?",
                outcomes=["Yes", "No"],
                volume=float(i),
            )
            for i, m in enumerate(ids)
        ),
    ]
    for event in head:
        state.record(event)
    written = version = snapshot_at = 0
    broker = Broker(state, rules_for("v1"))
    prices = rng.uniform(0.05, 0.95, markets)
    step = 0
    while written + len(state.pending) < n_events:
        step += 1
        prices = np.clip(prices + rng.normal(0, 0.02, markets), 0.02, 0.98).round(3)
        quote_of = {m: (float(p), 1.0 - float(p)) for m, p in zip(ids, prices, strict=True)}
        if step % 50 == 0:
            mark = Marked(cohort=cohort, ts=step, markets=ids,
                          prices=[list(quote_of[m]) for m in ids])  # fmt: skip
            state.record(mark)
        for agent in agents:
            book = state.books[agent]
            picks = rng.choice(markets, size=3, replace=False)
            bets, sells = [], []
            for i in picks:
                market = ids[i]
                if (market, "YES") in book.positions:
                    sells.append(SellIntent(percentage=100.0, market=market, side="YES"))
                else:
                    amount = 40.0 if rng.random() < 0.05 else 50.0
                    bets.append(BetIntent(market=market, side="YES", amount=amount))
            decision = DecisionMade(cohort=cohort, ts=step, agent=agent, week=1, action="MIXED",
                                    bets=bets, sells=sells)  # fmt: skip
            state.record(decision)
            broker.execute(agent, step, bets, sells, quote_of.get)
        if len(state.pending) >= 50_000:
            pending = state.collect()
            version = store.append(cohort, pending, expected_version=version)
            written += len(pending)
            if snapshot_every and version - snapshot_at >= snapshot_every:
                store.add_snapshot(cohort, version, encode_state(state), fmt=FORMAT, closing=False)
                snapshot_at = version
    for market in ids:
        settle(state, market, step + 1, "Yes" if rng.random() < 0.5 else "No")
    pending = state.collect()
    store.append(cohort, pending, expected_version=version)
    return written + len(pending), state


def bench_rebuild(n_events: int = 1_000_000, seed: int = 0, repeats: int = 3) -> dict[str, Any]:
    """Rebuild a log of ``n_events`` ``repeats`` times. ``seconds`` is the best wall time and
    ``cpu_seconds`` that run's CPU time over all threads (the read-ahead thread included)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rebuild.db"
        with EventStore.open(path) as store:
            made, live = make_log(store, n_events, seed)
        runs: list[tuple[float, float]] = []
        with EventStore.open(path, readonly=True) as store:
            for _ in range(max(1, repeats)):
                began, cpu_began = time.perf_counter(), time.process_time()
                ledger = rebuild(store)
                runs.append((time.perf_counter() - began, time.process_time() - cpu_began))
    state = ledger.cohorts["bench-rebuild"]
    if state.digest() != live.digest():
        raise RuntimeError("bench rebuild: the rebuilt projections differ from the live state")
    seconds, cpu_seconds = min(runs)
    return {
        "events": made,
        "seconds": round(seconds, 4),
        "median_seconds": round(statistics.median(wall for wall, _ in runs), 4),
        "cpu_seconds": round(cpu_seconds, 4),
        "events_per_s": round(made / seconds),
        "agents": len(state.books),
        "brier_rows": sum(len(b.brier_rows) for b in state.books.values()),
    }
