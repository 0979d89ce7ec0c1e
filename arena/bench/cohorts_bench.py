"""The weekly-cohort workload: every Sunday of the embedded election sample, five agents.

26 cohorts (2024-05-12 .. 2024-11-03), agents hold, favourite, contrarian, random and sign,
replayed into a fresh log in parallel over the CPU cores, timed from the first worker start to
the last commit (tape loading and process start-up included).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.run.cohort import CohortConfig, sundays
from arena.run.settings import RunOptions
from replays.instants import parse_instant
from replays.samples import sample_path

AGENTS = {
    "hold": "hold",
    "favourite": "favourite",
    "contrarian": "contrarian",
    "random": "random",
    "sign": "sign",
}


def bench_cohorts(jobs: int = 0) -> dict[str, Any]:
    starts = sundays(parse_instant("2024-05-12"), parse_instant("2024-11-03"))
    configs = [CohortConfig(start=s, agents=AGENTS) for s in starts]
    options = RunOptions(jobs=jobs)
    workers = options.workers(len(configs))
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        source = TapeSource.load(sample_path())
        done = replay_cohorts(source, configs, Path(tmp) / "cohorts.db", options)
        seconds = time.perf_counter() - began
    return {
        "cohorts": len(done),
        "agents": len(AGENTS),
        "events": sum(d.events for d in done),
        "jobs": workers,
        "seconds": round(seconds, 3),
        "target_seconds": 5.0,
    }
