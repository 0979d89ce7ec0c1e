"""How long the market diffusion model takes at the issue's sizes: training on 20,000 markets
for 2,000 steps of batch 256 (target under 2 minutes), and forecasting 500 markets to the
precision of 16 bisection steps of 32-step DDIM sampler runs (target under 1 s).

The markets are synthetic (a random walk of prices, random questions and categories), made
here so the figure needs no data file; a row costs the same whatever its numbers are. Times
are CPU seconds (process time), which a busy shared machine disturbs least, and wall seconds.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from strategies.diffusion import DiffusionConfig
from strategies.market_diffusion.examples import ResolvedPath, market_rows, training_set
from strategies.market_diffusion.features import MarketFacts
from strategies.market_diffusion.model import MARKET_DEFAULTS, MarketModel

HOUR = 3_600
WORDS = ("bitcoin", "election", "senate", "price", "above", "win", "rate", "cut", "team", "cup")


def synthetic_markets(n: int, seed: int = 0, points: int = 48) -> list[ResolvedPath]:
    """``n`` resolved binary markets, each with ``points`` hourly prices (a logit random walk)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        start = 1_700_000_000 + int(rng.integers(0, 90 * 24)) * HOUR
        times = start + HOUR * np.arange(points, dtype=np.int64)
        logit = np.cumsum(rng.normal(0, 0.3, points)) + rng.normal(0, 2)
        yes = 1 / (1 + np.exp(-logit))
        words = " ".join(rng.choice(WORDS, 6))
        facts = MarketFacts(f"Will {words} ({k})?", str(rng.choice(WORDS[:4])), int(times[-1]))
        winner = "Yes" if rng.random() < yes[-1] else "No"
        out.append(
            ResolvedPath(
                str(k),
                facts,
                ("Yes", "No"),
                times,
                np.column_stack([yes, 1 - yes]),
                winner,
                int(times[-1]) + 1,
            )
        )
    return out


def _timed(work: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def bench_diffusion(
    markets: int, steps: int, batch: int, forecast_markets: int, mc: int, sample_steps: int
) -> dict[str, Any]:
    paths = synthetic_markets(markets)
    data, rows_cpu, _ = _timed(lambda: training_set(paths, 2**62, per_market=1))
    config = DiffusionConfig(
        hidden=MARKET_DEFAULTS.hidden, depth=MARKET_DEFAULTS.depth, steps=steps, batch=batch,
        lr=MARKET_DEFAULTS.lr, sample_steps=sample_steps, mc=mc,
    )  # fmt: skip
    model, train_cpu, train_wall = _timed(lambda: MarketModel.fit(data, config, 0))
    picked = [market_rows(p, -(2**62), 1) for p in paths[:forecast_markets]]
    conds = np.concatenate([r.conditions for r in picked if r is not None])
    prices = np.concatenate([r.prices for r in picked if r is not None])
    _, forecast_cpu, forecast_wall = _timed(lambda: model.forecast(2, conds, prices))
    return {
        "training_markets": markets,
        "steps": steps,
        "batch": batch,
        "hidden": config.hidden,
        "depth": config.depth,
        "rows_cpu_seconds": round(rows_cpu, 2),
        "train_cpu_seconds": round(train_cpu, 2),
        "train_wall_seconds": round(train_wall, 2),
        "forecast_markets": int(conds.shape[0]),
        "mc": mc,
        "sample_steps": sample_steps,
        "forecast_cpu_seconds": round(forecast_cpu, 3),
        "forecast_wall_seconds": round(forecast_wall, 3),
    }
