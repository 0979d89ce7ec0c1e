"""Seeded synthetic tapes, for tests and benchmarks that need size or control real data lacks.

Prices follow a mean-reverting random walk in logit space, so they wander like real binary
markets, stay inside (0, 1) and drift toward 0.5 rather than sticking at the edges.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import save_tape

THETA = 0.02  # pull toward logit 0 per step
SIGMA = 0.15  # logit noise per step
NOISE_BLOCK = 2**22  # normal draws per block of the anchored walk (32 MB)


def random_walk_tape(
    n_markets: int,
    n_steps: int,
    seed: int,
    step_seconds: int = 1,
    start_ts: int = 1_704_067_200,
) -> Tape:
    """``n_markets`` binary markets on one shared grid of ``n_steps`` instants.

    Each market resolves one step after its last point, YES with probability equal to its
    last price, so a well-calibrated forecaster scores as it should.
    """
    _check_size(n_markets, n_steps)
    rng = np.random.default_rng(seed)
    logits = np.empty((n_steps, n_markets))
    logits[0] = rng.normal(0.0, 1.5, n_markets)
    noise = rng.standard_normal((n_steps - 1, n_markets)) * SIGMA
    for i in range(1, n_steps):  # one vector op per step; markets move together
        logits[i] = logits[i - 1] * (1.0 - THETA) + noise[i - 1]
    prices = _rounded_prices(logits)
    return _synthetic_tape(prices, rng, step_seconds, start_ts)


def anchored_walk_tape(
    n_markets: int,
    n_steps: int,
    seed: int = 42,
    *,
    theta: float = 0.05,
    sigma: float = 0.2,
    step_seconds: int = 1,
    start_ts: int = 1_704_067_200,
) -> Tape:
    """The peers' benchmark tape (``shared/bench/peer-workload``): each market's logit reverts
    to its own anchor (drawn N(0, 0.3)) with pull ``theta`` and N(0, ``sigma``) noise a step,
    prices rounded to 0.001 and clipped to [0.02, 0.98] -- point for point the prices their
    generator writes for the same seed, so arena and the peers replay the same tape.

    The noise is drawn a block of steps at a time (the generator's stream is the same whether
    drawn at once or in blocks) and prices are written straight into the tape's market-major
    column, so building 50,000 x 2,000 needs the tape's own memory, not three times it.
    """
    _check_size(n_markets, n_steps)
    rng = np.random.default_rng(seed)
    anchor = rng.normal(0.0, 0.3, size=n_markets)
    x = anchor.copy()
    column = np.empty((n_markets, n_steps))  # market-major: the tape's own layout
    block = max(1, NOISE_BLOCK // n_markets)
    for first in range(0, n_steps, block):
        noise = rng.normal(0.0, sigma, size=(min(block, n_steps - first), n_markets))
        for k, step_noise in enumerate(noise):
            x = x + theta * (anchor - x) + step_noise
            column[:, first + k] = x
    for row in column:  # per market, so the temporaries stay one row long
        row[:] = _rounded_prices(row)
    return _synthetic_tape(column.T, rng, step_seconds, start_ts)


def _check_size(n_markets: int, n_steps: int) -> None:
    if n_markets < 1 or n_steps < 1:
        raise ValueError("need at least one market and one step")


def _rounded_prices(logits: np.ndarray) -> np.ndarray:
    """Logits to prices as a quoted market shows them: to 0.001, never 0 or 1."""
    prices: np.ndarray = np.clip(np.round(1.0 / (1.0 + np.exp(-logits)), 3), 0.02, 0.98)
    return prices


def _synthetic_tape(
    prices: np.ndarray, rng: np.random.Generator, step_seconds: int, start_ts: int
) -> Tape:
    """The ``syn-`` markets of ``prices`` (instants x markets) on a grid from ``start_ts``;
    volumes and winners drawn from ``rng`` after the prices (each YES with its last price)."""
    n_steps, n_markets = prices.shape
    grid = start_ts + step_seconds * np.arange(n_steps, dtype=np.int64)
    volumes = np.round(rng.lognormal(11.0, 1.5, n_markets), 2)
    yes_won = rng.random(n_markets) < prices[-1]
    return _binary_tape(
        "syn-{:05d}", "Synthetic market {}?", grid, step_seconds, prices, volumes, yes_won
    )


def fair_tape(
    n_markets: int,
    n_days: int,
    seed: int,
    spread: float = 1.0,
    start_ts: int = 1_704_067_200,
) -> Tape:
    """``n_markets`` binary markets priced *fairly*: every price is the probability of YES given
    everything known at its instant, so no strategy has an edge and every bet's expected P/L is
    exactly zero. For testing what intervals claim when the truth is known.

    Each market follows a Brownian signal ``X`` (one step a day, from ``N(0, spread² n_days)``:
    at 1 the first prices are uniform on (0, 1), smaller keeps them nearer 0.5) and
    resolves YES iff ``X`` is above zero one day after its last point, so the price at day ``t``
    is ``Φ(X_t / √(n_days − t))``, a martingale. All markets resolve at the same instant, as the
    markets of one election do: weekly cohorts of this tape share their outcomes.
    """
    if n_markets < 1 or n_days < 1:
        raise ValueError("need at least one market and one day")
    day = 86_400
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((n_days, n_markets))
    walk = np.cumsum(steps, axis=0) + rng.normal(0.0, spread * np.sqrt(n_days), n_markets)
    signal = np.vstack([walk[:1] - steps[:1], walk[:-1]])  # X at each day's point
    remaining = np.arange(n_days, 0, -1, dtype=np.float64)[:, None]
    normal_cdf = np.vectorize(lambda z: 0.5 * math.erfc(-z / math.sqrt(2.0)))
    prices = np.clip(normal_cdf(signal / np.sqrt(remaining)), 1e-9, 1.0 - 1e-9)
    grid = start_ts + day * np.arange(n_days, dtype=np.int64)
    volumes = np.arange(n_markets, 0, -1, dtype=np.float64)
    return _binary_tape("fair-{:04d}", "Fair market {}?", grid, day, prices, volumes, walk[-1] > 0)


def _binary_tape(
    id_format: str,
    question_format: str,
    grid: np.ndarray,
    step: int,
    prices: np.ndarray,
    volumes: np.ndarray,
    yes_won: np.ndarray,
) -> Tape:
    """Binary markets sharing one time ``grid`` (``prices`` is instants × markets), open from
    its first instant to its last, each resolving ``step`` seconds after it."""
    last_ts = int(grid[-1])
    markets = [
        MarketInfo(
            id=id_format.format(k),
            question=question_format.format(k),
            outcomes=("Yes", "No"),
            category="synthetic",
            volume=float(volume),
            open_ts=int(grid[0]),
            close_ts=last_ts,
        )
        for k, volume in enumerate(volumes)
    ]
    resolutions = {
        m.id: Resolution(market=m.id, ts=last_ts + step, winner="Yes" if won else "No")
        for m, won in zip(markets, yes_won, strict=True)
    }
    return Tape.on_grid(markets, grid, prices.T.reshape(-1), resolutions)


_LOAD_PROBE = """
import json, pathlib, resource, sys, time
t0 = time.perf_counter()
from replays.tapefile import load_tape
tape = load_tape(sys.argv[1])
seconds = time.perf_counter() - t0
status = pathlib.Path("/proc/self/status")
lines = status.read_text().splitlines() if status.exists() else []
hwm = [ln for ln in lines if ln.startswith("VmHWM")]
rss_kb = int(hwm[0].split()[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"points": tape.n_points, "load_seconds": seconds, "peak_rss_mb": rss_kb / 1024}))
"""


def bench_tape_load(n_markets: int = 500, n_points: int = 10_080) -> dict[str, float]:
    """Time and peak memory of loading a columnar tape in a fresh interpreter.

    A subprocess is the honest measure: the building process already holds the arrays, and
    its RSS would include them. Peak RSS is VmHWM (ru_maxrss can carry the parent's peak
    across fork+exec). Load time includes importing numpy and the tape modules.
    """
    tape = random_walk_tape(n_markets, n_points, seed=0, step_seconds=60)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.tape"
        save_tape(tape, path)
        file_mb = path.stat().st_size / 2**20
        del tape
        out = subprocess.run(
            [sys.executable, "-c", _LOAD_PROBE, str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
    probe = json.loads(out.stdout)
    return {
        "markets": n_markets,
        "points": probe["points"],
        "load_seconds": probe["load_seconds"],
        "peak_rss_mb": probe["peak_rss_mb"],
        "file_mb": file_mb,
    }
