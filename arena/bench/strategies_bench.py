"""Per-decision cost of the plugin boundary: building the view and checking the decision.

A strategy that returns the same HOLD is driven through the runner's decision step (view,
frozen clock, decision check, the DecisionMade event) at every tick of synthetic tapes with
different universe sizes; a straight line through the per-decision times gives the fixed cost
and the cost per market, against the target of 20 µs + 0.2 µs per market.

Of each figure, ``walk_us_per_decision`` is the price walk's share (``UniverseWalk.at`` at every
instant the runner asks it for, timed alone over the same schedules): the tape's prices as of a
decision instant, which any decision needs, not the boundary's own cost.

The same decision with ``--isolate`` (the agent in a worker process of its own) is measured
beside it: the view sent to the worker and the answer read back, two context switches.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from arena.run.cohort import CohortConfig
from arena.run.plan import DECISION, MARK
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from replays.asof import UniverseWalk
from replays.synthetic import random_walk_tape
from replays.tape import Tape
from strategies.api import Decision, Strategy, View

_HOLD = Decision()


class Still(Strategy):
    """Returns one prebuilt HOLD, so only the boundary is measured."""

    def decide(self, view: View) -> Decision:
        return _HOLD


def _runner(tape: Tape, cadence: str, markets: int, isolate: bool) -> CohortRunner:
    config = CohortConfig(
        start=datetime.fromtimestamp(tape.span()[0], UTC),
        agents={"still": "hold"},
        universe=markets,
        decision_cadence=cadence,
        mark_cadence="weekly",
    )
    settings = RunSettings(cohort=config, options=RunOptions(isolate=isolate))
    return CohortRunner(tape, settings, strategies={"still": Still()})


def _run_seconds(
    tape: Tape, cadence: str, markets: int, isolate: bool = False
) -> tuple[float, int]:
    runner = _runner(tape, cadence, markets, isolate)
    decisions = sum(1 for step in runner.schedule.steps if step[1] == DECISION)
    began = time.perf_counter()
    runner.run(None)
    return time.perf_counter() - began, decisions


def per_decision_us(
    markets: int, steps: int = 2_000, seed: int = 0, isolate: bool = False
) -> float:
    """Time per decision, net of everything a cohort costs without decisions (set-up, clock,
    resolutions, starting a worker): the difference between a decision every tick and a
    single decision."""
    tape = random_walk_tape(markets, steps, seed=seed, step_seconds=1)
    _run_seconds(tape, "weekly", markets, isolate)  # warm caches and imports
    many, n_many = _run_seconds(tape, "tick", markets, isolate)
    one, n_one = _run_seconds(tape, "weekly", markets, isolate)
    return (many - one) / (n_many - n_one) * 1e6


def _walk_seconds(tape: Tape, cadence: str, markets: int) -> float:
    """The runner's calls of the price walk (a mark's and a decision's instants) alone."""
    runner = _runner(tape, cadence, markets, False)
    instants = [ts for ts, kind, _ in runner.schedule.steps if kind in (DECISION, MARK)]
    walk = UniverseWalk(tape, runner.universe)
    began = time.perf_counter()
    for ts in instants:
        walk.at(ts)
    return time.perf_counter() - began


def walk_us(markets: int, steps: int = 2_000, seed: int = 0) -> float:
    """The price walk's share of ``per_decision_us``, net the same way."""
    tape = random_walk_tape(markets, steps, seed=seed, step_seconds=1)
    _walk_seconds(tape, "weekly", markets)
    many, n_many = _walk_seconds(tape, "tick", markets), _decisions(tape, "tick", markets)
    one, n_one = _walk_seconds(tape, "weekly", markets), _decisions(tape, "weekly", markets)
    return (many - one) / (n_many - n_one) * 1e6


def _decisions(tape: Tape, cadence: str, markets: int) -> int:
    steps = _runner(tape, cadence, markets, False).schedule.steps
    return sum(1 for step in steps if step[1] == DECISION)


def bench_strategies(sizes: tuple[int, ...] = (10, 100, 500), seed: int = 0) -> dict[str, Any]:
    micros = [per_decision_us(n, seed=seed) for n in sizes]
    slope, intercept = np.polyfit(np.array(sizes, float), np.array(micros), 1)
    return {
        "universe_sizes": list(sizes),
        "us_per_decision": [round(m, 2) for m in micros],
        "fixed_us": round(float(intercept), 2),
        "per_market_us": round(float(slope), 4),
        "target": "20 us + 0.2 us per market",
        "within_target": bool(all(m <= 20 + 0.2 * n for m, n in zip(micros, sizes, strict=True))),
        "walk_us_per_decision": [round(walk_us(n, seed=seed), 2) for n in sizes],
        "isolated_us_per_decision": [
            round(per_decision_us(n, seed=seed, isolate=True), 1) for n in sizes
        ],
    }
