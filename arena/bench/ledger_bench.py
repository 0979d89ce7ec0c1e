"""How fast the event store appends realistic events.

The events are built before the clock starts and encoded inside it, because ``append`` encodes:
the figure is what a replay pays per event, not what SQLite alone can do. CPU seconds (every
thread of this process) are reported beside wall seconds: on a shared 2-core machine the wall
figure moves with the neighbours' load, while the CPU cost of an event does not.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ledger.events import BetIntent, DecisionMade, Event, Marked, OrderFilled, OrderPlaced
from ledger.store import EventStore

_START_TS = 1_725_148_800  # Sunday 2024-09-01 00:00 UTC
_STREAMS = 5


def sample_events(n: int, seed: int = 0) -> list[Event]:
    """``n`` events shaped like a replay's: a decision, then an order and its fill, then a mark
    of a few markets, repeated, with prices and amounts that vary like real ones."""
    rng = random.Random(seed)
    makers: list[Callable[[int], Event]] = [
        lambda i: _decision(rng, i),
        lambda i: _placed(rng, i),
        lambda i: _filled(rng, i),
        lambda i: _marked(rng, i),
    ]
    return [makers[i % len(makers)](i) for i in range(n)]


def bench_append(
    n_events: int = 1_000_000, batch: int = 10_000, repeats: int = 1
) -> dict[str, float]:
    """Append ``n_events`` in ``batch``-sized appends spread over a few streams, into a fresh
    log ``repeats`` times.

    Returns ``events``, ``seconds`` (appends only, wall; the best run, since a neighbour's load
    only ever slows a run down), ``median_seconds``, ``cpu_seconds`` (user plus system time of
    all this process's threads in the best run: the append pipeline uses two, so it may exceed
    ``seconds``), ``events_per_s`` and ``file_mb_per_million`` (database plus WAL, scaled to a
    million events).
    """
    events = sample_events(n_events)
    runs: list[tuple[float, float]] = []
    for _ in range(max(1, repeats)):
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "bench.db"
            with EventStore.open(target) as store:
                start, cpu_start = time.perf_counter(), time.process_time()
                for i, first in enumerate(range(0, n_events, batch)):
                    store.append(f"cohort-{i % _STREAMS}", events[first : first + batch])
                runs.append((time.perf_counter() - start, time.process_time() - cpu_start))
            size = sum(p.stat().st_size for p in target.parent.glob(target.name + "*"))
    seconds, cpu_seconds = min(runs)
    return {
        "events": n_events,
        "seconds": seconds,
        "median_seconds": statistics.median(wall for wall, _ in runs),
        "cpu_seconds": cpu_seconds,
        "events_per_s": n_events / seconds,
        "file_mb_per_million": size / n_events,  # bytes per event = MB per million events
    }


def _decision(rng: random.Random, i: int) -> DecisionMade:
    market = f"0x{rng.getrandbits(64):016x}"
    return DecisionMade(
        cohort="bench",
        ts=_START_TS + i,
        agent=f"agent-{i % 5}",
        week=i // 1000,
        action="BET",
        reasoning="The market underprices YES given the polling trend and the base rate.",
        bets=[BetIntent(market=market, side="YES", amount=round(rng.uniform(50, 2500), 2))],
    )


def _placed(rng: random.Random, i: int) -> OrderPlaced:
    return OrderPlaced(
        cohort="bench",
        ts=_START_TS + i,
        agent=f"agent-{i % 5}",
        order_id=f"o-{i}",
        kind="buy",
        market=f"0x{rng.getrandbits(64):016x}",
        side=rng.choice(["YES", "NO"]),
        amount=round(rng.uniform(50, 2500), 2),
    )


def _filled(rng: random.Random, i: int) -> OrderFilled:
    price = rng.uniform(0.01, 0.99)
    amount = round(rng.uniform(50, 2500), 2)
    return OrderFilled(
        cohort="bench",
        ts=_START_TS + i,
        agent=f"agent-{i % 5}",
        order_id=f"o-{i - 1}",
        kind="buy",
        market=f"0x{rng.getrandbits(64):016x}",
        side="YES",
        position_id=f"p-{i}",
        price=price,
        shares=amount / price,
        amount=amount,
        cash_before=rng.uniform(2500, 10_000),
        confidence=rng.random(),
    )


def _marked(rng: random.Random, i: int) -> Marked:
    markets = [f"0x{rng.getrandbits(64):016x}" for _ in range(3)]
    prices = [[p, 1 - p] for p in (rng.random() for _ in markets)]
    return Marked(cohort="bench", ts=_START_TS + i, markets=markets, prices=prices)
