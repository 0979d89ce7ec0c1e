"""How long ``arena lab parity`` takes at the seed's defaults (n = 50,000); target under 10 s.

Two figures: the experiment itself in this process (sampling, four forecasters, five metrics
each, the checks; best and median of ``repeats``), and the whole command in a fresh
interpreter, ``arena lab parity --quiet --json``, which adds Python, numpy and click start-up
and printing: what a user waits for.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Any

from arena.forecasting.lab.experiments import ParityConfig, run_parity
from arena.forecasting.lab.progress import Silent

_COMMAND = "from arena.cli import main; main()"


def bench_lab(n: int, repeats: int) -> dict[str, Any]:
    cfg = ParityConfig(n=n)
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run_parity(cfg, Silent())
        runs.append(time.perf_counter() - start)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _COMMAND, "lab", "parity", "--quiet", "--json", "--n", str(n)],
        check=True,
        capture_output=True,
    )
    command = time.perf_counter() - start
    return {
        "experiment": "parity",
        "n": n,
        "experiment_seconds_best": min(runs),
        "experiment_seconds_median": statistics.median(runs),
        "command_seconds": command,
        "rows_per_second": n / min(runs),
        "checks_ok": result.ok,
    }
