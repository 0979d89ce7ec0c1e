"""How long ``arena lab parity`` takes at the seed's defaults (n = 50,000); target under 10 s.

Two figures: the experiment itself in this process (sampling, four forecasters, five metrics
each, the checks; best and median of ``repeats``), and the whole command in a fresh
interpreter, ``arena lab parity --quiet --json``, which adds Python, numpy and click start-up
and printing: what a user waits for.

With ``published``, also the largest configurations forecastbench published, each in a fresh
interpreter with its peak memory: intrinsic-post at d = 32, k = 16 and 20 (the original takes
about 6 s at k = 16; arena's check of them was quadratic in 2^k until it was made linear) and
groupstress at d = 24, k = 8 (refused past d = 22 before; its histograms are 2^d cells).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

from arena.forecasting.lab.experiments import ParityConfig, run_parity
from arena.forecasting.lab.progress import Silent

_COMMAND = "from arena.cli import main; main()"
_MEASURED = """
import json, resource, sys, time
from arena.forecasting.lab import experiments as e
from arena.forecasting.lab.progress import Silent
name, fields = sys.argv[1], json.loads(sys.argv[2])
start, cpu = time.perf_counter(), time.process_time()
result = getattr(e, name)(getattr(e, sys.argv[3])(**fields), Silent())
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_mib": rss / 1024,
                  "checks_ok": result.ok}))
"""
_INTRINSIC = {"d": 32, "rho": 0.9, "n_train": 20_000, "n_test": 5_000, "float32": True}
PUBLISHED = (
    ("intrinsic-post", "run_intrinsic_post", "IntrinsicPostConfig", {**_INTRINSIC, "k": 16}),
    ("intrinsic-post", "run_intrinsic_post", "IntrinsicPostConfig", {**_INTRINSIC, "k": 20}),
    (
        "groupstress",
        "run_groupstress",
        "GroupStressConfig",
        {"d": 24, "k": 8, "rho": 0.9, "n": 100_000, "float32": True},
    ),
)
"""(experiment, its function, its config class, a published run's settings): the seed's
``sweep_rhok_sur_d32_k{16,20}_rho0p90_ntr20000_nte5000`` and ``groupstress_k8`` (d = 24)."""


def bench_published() -> dict[str, Any]:
    """Each of ``PUBLISHED`` once in a fresh interpreter: wall and CPU seconds in the
    experiment (on a shared machine the CPU figure is the one to compare), the process's peak
    resident memory (imports included), and whether its checks held."""
    figures: dict[str, Any] = {}
    for experiment, function, config, fields in PUBLISHED:
        done = subprocess.run(
            [sys.executable, "-c", _MEASURED, function, json.dumps(fields), config],
            check=True,
            capture_output=True,
            text=True,
        )
        shown = {key: fields[key] for key in ("d", "k") if key in fields}
        name = " ".join([experiment, *(f"{key}={value}" for key, value in shown.items())])
        for key, value in json.loads(done.stdout).items():
            figures[f"{name} {key}"] = value
    return figures


def bench_lab(n: int, repeats: int, published: bool = False) -> dict[str, Any]:
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
    } | (bench_published() if published else {})
