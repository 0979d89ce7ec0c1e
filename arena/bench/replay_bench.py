"""The peer workload: how many price ticks per second the whole replay path sustains.

The peers' own benchmark (``shared/bench/peer-workload``): their tape -- 500 binary markets x
2,000 one-second steps of a logit walk reverting to per-market anchors, seed 42, rebuilt point
for point by ``replays.synthetic.anchored_walk_tape`` -- and their strategy: buy when flat and
the price is under 0.40, sell everything when long and it is over 0.60 (19,944 orders on the
default tape). A decision at every step, enough cash that nothing is rejected, and every
decision, order and fill appended to a fresh SQLite log. The clock covers the runner and the
log, not building the synthetic tape.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from arena.bench.peer_bench import run_peers
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from ledger.store import EventStore
from replays.books import Books
from replays.synthetic import anchored_walk_tape
from replays.tape import Tape
from replays.validate_books import BookToken, Columns
from strategies.api import Bet, Decision, Sell, Strategy, View

BUY_BELOW = 0.40
SELL_ABOVE = 0.60
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


class BandTrader(Strategy):
    """Buy $50 of YES under 0.40 when flat; sell 100% over 0.60 when long. Vectorised."""

    description = "peer-benchmark band trader"

    def decide(self, view: View) -> Decision:
        markets = view.markets
        yes = markets.yes
        long = view.shares[:, 0] > 0
        tradable = markets.open
        ids = markets.ids
        buys = np.flatnonzero(~long & tradable & (yes < BUY_BELOW))
        sells = np.flatnonzero(long & tradable & (yes > SELL_ABOVE))
        if buys.size == 0 and sells.size == 0:
            return Decision()
        return Decision(
            bets=[Bet(market=ids[i], side="YES", amount=50.0) for i in buys],
            sells=[Sell(percentage=100.0, market=ids[i], side="YES") for i in sells],
        )


def _peak_rss_mb() -> float:
    """The high-water resident set since the last reset (VmHWM), or since start elsewhere."""
    if _STATUS.exists():
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak_rss() -> bool:
    """Start VmHWM again from the current RSS (Linux), so the run's peak excludes earlier work."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def tape_mb(tape: Tape) -> float:
    """MiB of the tape's arrays: what any replay of it holds at the least."""
    return tape.nbytes / 2**20


def tick_books(tape: Tape, levels: int = 5, seed: int = 0) -> Books:
    """A book of every market's YES token at every point of ``tape``: ``levels`` cent levels a
    side around the point's price (the first a cent away; moved inward near 0 and 1 so every
    level fits), sizes of 1 to 1,000 shares."""
    rng = np.random.default_rng(seed)
    n = len(tape.markets)
    times = [tape.times(m) for m in range(n)]
    mids = np.concatenate([tape.yes(m) for m in range(n)])
    counts = np.array([t.size for t in times], dtype=np.int64)
    rows = int(counts.sum())
    depth = np.arange(1, levels + 1) / 100
    room = (levels + 1) / 100  # a whole book a side inside (0, 1), the tape's price near it
    centre = np.clip(np.round(mids * 100) / 100, room, 1 - room)[:, None]
    bid_px = np.round(centre - depth, 2).reshape(-1)  # prices as they print, on the tick
    ask_px = np.round(centre + depth, 2).reshape(-1)
    level_offsets = np.arange(rows + 1, dtype=np.int64) * levels
    columns = Columns(
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        np.concatenate(times) * 1000, np.full(rows, 0.01),
        level_offsets, bid_px, rng.uniform(1, 1000, rows * levels).round(2),
        level_offsets, ask_px, rng.uniform(1, 1000, rows * levels).round(2),
    )  # fmt: skip
    tokens = [BookToken(token=f"{info.id}-yes", market=info.id, outcome=info.outcomes[0])
              for info in tape.markets]  # fmt: skip
    return Books(tokens, columns, source="<tick books>", lazy=True)


def bench_replay(
    markets: int = 500,
    steps: int = 2_000,
    seed: int = 42,
    *,
    execution: str = "fa",
    peer_scripts: Path | None = None,
    peer_python: str = sys.executable,
) -> dict[str, Any]:
    """Replay the peer workload once into a fresh log; speed, orders and peak memory. With
    ``peer_scripts``, the peers' scripts then run on the same tape (``peers``, ``notes``).
    Any ``execution`` but ``fa`` meets a book at every tick (``tick_books``, built outside the
    clock, as the tape is)."""
    tape = anchored_walk_tape(markets, steps, seed=seed)
    books = None if execution == "fa" else tick_books(tape)
    config = CohortConfig(
        start=datetime.fromtimestamp(tape.span()[0], UTC),
        agents={"band": "band"},
        universe=markets,
        cash=1e12,
        decision_cadence="tick",
        seed=seed,
        execution=execution,
        books=None if books is None else books.hash,
    )
    build_peak = _peak_rss_mb()
    reset = _reset_peak_rss()
    with tempfile.TemporaryDirectory() as tmp:
        began, cpu = time.perf_counter(), time.process_time()
        runner = CohortRunner(tape, config, strategies={"band": BandTrader()}, books=books)
        with EventStore.open(Path(tmp) / "bench.db") as store:
            run = runner.run(store)
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
        log_mb = (Path(tmp) / "bench.db").stat().st_size / 2**20
    book = run.state.books["band"]
    ticks = markets * steps
    figures: dict[str, Any] = {
        "execution": execution,
        "ticks": ticks,
        "orders": run.state.n_orders,
        "fills": book.n_bets + book.n_sells,
        "rejected": book.n_rejected,
        "events": run.events,
        "seconds": round(seconds, 4),
        "cpu_seconds": round(cpu_seconds, 4),
        "ticks_per_s": round(ticks / seconds),
        "ticks_per_cpu_s": round(ticks / cpu_seconds),
        "tape_mb": round(tape_mb(tape), 1),
        "log_mb": round(log_mb, 1),
        "run_peak_rss_mb" if reset else "peak_rss_mb": round(_peak_rss_mb(), 1),
        "build_peak_rss_mb": round(build_peak, 1),
    }
    if peer_scripts is not None:
        figures["peers"], figures["notes"] = run_peers(
            tape, peer_scripts, peer_python, figures["ticks_per_cpu_s"]
        )
    return figures
