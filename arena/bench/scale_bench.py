"""How the replay's cost grows with the universe: the peers' workload at several market counts.

Each size is ``arena.bench.replay_bench.bench_replay`` (the peers' band trader deciding at
every step, its log included) in a fresh spawned process, so one size's peak memory is not
another's. Linear in events means the CPU-seconds grow as the events do: ``exponent``, the
slope of log CPU-seconds over log events between the smallest and the largest size, is 1 then
(it was 1.38 from 5,000 to 50,000 markets while settlement scanned every open position of every
agent for each market it resolved). Each size also pays its process's one-time costs inside
the clock (freezegun's first scan of the loaded modules among them, 0.1–0.3 CPU-s), so toy
sizes say nothing about growth; 5,000 markets × 2,000 steps is 5–6 CPU-s.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from arena.bench.replay_bench import bench_replay

_KEPT = ("markets", "ticks", "events", "cpu_seconds", "seconds", "run_peak_rss_mb", "log_mb")
"""Per size; ``log_mb`` is the closed log's file, its snapshots included (they grew with the
square of a cohort's events before their spacing grew with their size)."""


def growth_exponent(small: tuple[float, float], large: tuple[float, float]) -> float:
    """The slope of log cost over log size between two ``(size, cost)`` points: 1 when the
    cost grows as the size does, 2 when it grows as its square."""
    (size_a, cost_a), (size_b, cost_b) = small, large
    return math.log(cost_b / cost_a) / math.log(size_b / size_a)


def _one_size(markets: int, steps: int, seed: int) -> dict[str, Any]:
    """One size's figures, with the machine's load average (1 minute) before and after: on a
    shared machine CPU-seconds grow with it, so sizes are comparable only at like loads."""
    before = os.getloadavg()[0]
    figures = bench_replay(markets, steps, seed)
    figures["markets"] = markets
    figures["us_per_event"] = round(figures["cpu_seconds"] / figures["events"] * 1e6, 2)
    figures["load_average"] = [round(before, 2), round(os.getloadavg()[0], 2)]
    return {key: figures[key] for key in (*_KEPT, "us_per_event", "load_average")}


def bench_scale(markets: Sequence[int], steps: int = 2_000, seed: int = 42) -> dict[str, Any]:
    """The workload at each of ``markets`` (ascending) × ``steps``, each in its own process;
    per size its CPU-seconds, µs an event and peak RSS, and the growth exponent."""
    sizes = sorted(set(markets))
    runs = []
    for n in sizes:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
            runs.append(child.submit(_one_size, n, steps, seed).result())
    figures: dict[str, Any] = {"steps": steps, "sizes": runs}
    if len(runs) > 1:
        first, last = runs[0], runs[-1]
        figures["exponent"] = round(
            growth_exponent(
                (first["events"], first["cpu_seconds"]), (last["events"], last["cpu_seconds"])
            ),
            3,
        )
    return figures
