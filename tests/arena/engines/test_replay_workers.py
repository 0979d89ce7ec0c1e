"""Parallel replays: what the worker processes start with, and a worker that dies."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arena.engines.local import BLAS_THREAD_VARIABLES, one_blas_thread_per_worker
from ledger.store import EventStore
from tests.conftest import Arena


def _environment_of_a_spawned_process(names: tuple[str, ...]) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


def test_workers_get_one_blas_thread_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's choice stands
    context = multiprocessing.get_context("spawn")
    with one_blas_thread_per_worker(), context.Pool(1) as pool:
        seen = pool.apply(_environment_of_a_spawned_process, (BLAS_THREAD_VARIABLES,))
    assert seen == {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "1"}
    # and this process's environment is as it was
    assert "OPENBLAS_NUM_THREADS" not in os.environ and "MKL_NUM_THREADS" not in os.environ
    assert os.environ["OMP_NUM_THREADS"] == "3"


CRASH = """
import ctypes
from strategies.api import Decision, Strategy


class Crash(Strategy):
    def decide(self, view):
        if view.week >= 2:
            ctypes.string_at(0)  # native code that crashes Python: SIGSEGV
        return Decision()
"""


def test_a_worker_a_plugin_crashes_is_one_line_and_the_log_keeps_what_came_before(
    arena: Arena, tmp_path: Path
) -> None:
    """A plugin whose native code kills its worker process (no Python error to catch) ends
    the run in one line naming where it stopped, not the process pool's traceback; the log
    holds the cohorts delivered before, and the same command resumes."""
    plugin = tmp_path / "crash.py"
    plugin.write_text(CRASH)
    db = tmp_path / "run.db"
    agents = ("--agent", "fav=favourite")
    first = arena("replay", "--tape", "sample", "--start", "2024-09-01", *agents, "--db", db)
    assert first.exit_code == 0, first.output
    crashed = arena(
        "replay", "--tape", "sample", "--starts", "2024-09-01..2024-09-15", *agents,
        "--agent", f"c={plugin}:Crash", "--jobs", "2", "--db", db,
    )  # fmt: skip
    assert crashed.exit_code == 1
    [line] = crashed.stderr.strip().splitlines()
    assert line.startswith(
        "Error: a worker process died abruptly before the cohort from 2024-09-01"
    )
    assert "--isolate" in line
    with EventStore.open(db, readonly=True) as store:
        assert len(store.streams()) == 1  # the earlier run's cohort, untouched


def test_a_plugin_crashing_the_only_process_prints_the_crash_with_its_line(
    tmp_path: Path,
) -> None:
    """In process (one cohort) nothing is left to catch a segfault: the process prints the
    crash's trace, which names the plugin's file and line (faulthandler), and dies of it."""
    plugin = tmp_path / "crash.py"
    plugin.write_text(CRASH)
    done = subprocess.run(
        [sys.executable, "-c", "from arena.cli import main; main()", "replay", "--tape", "sample",
         "--start", "2024-09-01", "--agent", f"c={plugin}:Crash", "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert f'File "{plugin}", line 9 in decide' in done.stderr
