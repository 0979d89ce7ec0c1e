"""What ``arena report`` loads: a report of one cohort (Student's t, no bootstrap) whose agents
state no beliefs and met no books needs neither numpy nor the books' readers nor the metrics
package, a fifth of the command's time on a 1 M-event log; a report that bootstraps loads
numpy when it does. Checked in a fresh process, as a person runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from arena.run.runner import CohortRunner
from ledger.store import EventStore
from replays.tape import Tape
from tests.conftest import hand_config

HEAVY = ("numpy", "replays.bookfile", "ledger.metrics")

_PROBE = (
    "import atexit, json, sys\n"
    f"atexit.register(lambda: print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]),"
    " file=sys.stderr))\n"
    "from arena.cli import main\n"
    "main()\n"
)


def loaded(*args: str) -> list[str]:
    """The heavy modules ``arena ARGS`` had loaded when it exited (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    names = json.loads(done.stderr.strip().splitlines()[-1])
    return [str(name) for name in names]


def test_a_report_of_one_cohort_loads_neither_numpy_nor_the_books_readers(
    tmp_path: Path, synthetic_tape: Tape
) -> None:
    db = tmp_path / "one.db"
    config = hand_config({"coin": "random?bets=3", "idle": "hold"}, universe=6)
    with EventStore.open(db) as store:
        CohortRunner(synthetic_tape, config).run(store)
    assert loaded("report", str(db)) == []
    assert loaded("report", str(db), "--json") == []
    assert "numpy" in loaded("report", str(db), "--json", "--interval", "markets")
