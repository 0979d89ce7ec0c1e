"""The peers' own scripts on the same tape, in the same run, for ratios rather than old figures.

The scripts (``bench_backtrader.py``, ``bench_nautilus.py`` in ``shared/bench/peer-workload``)
are not part of arena and their engines are not its dependencies: each runs in a subprocess of
whichever interpreter is given, and an engine that interpreter cannot import is skipped with a
one-line note. Each prints one JSON line with its run loop's CPU seconds.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from replays.tape import Tape

PEERS = {"backtrader": "bench_backtrader.py", "nautilus_trader": "bench_nautilus.py"}


def tape_matrix(tape: Tape) -> np.ndarray:
    """The tape's YES prices as the peers read them: ``(steps, markets)`` float64."""
    return np.stack([tape.yes(m) for m in range(len(tape.markets))], axis=1)


def _importable(python: str, module: str) -> bool:
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    return probe.returncode == 0


def run_peers(
    tape: Tape, scripts: Path, python: str, arena_ticks_per_cpu_s: float
) -> tuple[dict[str, Any], list[str]]:
    """Each importable peer's figures (with arena's speed over theirs), and notes on the rest."""
    figures: dict[str, Any] = {}
    notes: list[str] = []
    scripts = scripts.resolve()  # the scripts run in a scratch folder: no relative paths
    with tempfile.TemporaryDirectory() as tmp:
        matrix = Path(tmp) / "tape.npy"
        np.save(matrix, tape_matrix(tape))
        for module, script in PEERS.items():
            path = scripts / script
            if not path.is_file():
                notes.append(f"{module}: skipped, no {path}")
                continue
            if not _importable(python, module):
                notes.append(f"{module}: skipped, not importable by {python}")
                continue
            done = subprocess.run(
                [python, str(path), str(matrix)],
                capture_output=True,
                text=True,
                check=False,
                cwd=tmp,
            )
            last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
            if not last:
                error = (done.stderr.strip().splitlines() or ["no output"])[-1]
                notes.append(f"{module}: failed ({error})")
                continue
            result = json.loads(last[0])
            speed = result.get("ticks_per_cpu_s_run")
            figures[module] = {
                "orders": result.get("orders"),
                "ticks_per_cpu_s": speed,
                "arena_times_faster": round(arena_ticks_per_cpu_s / speed, 1) if speed else None,
            }
    return figures, notes
