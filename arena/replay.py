"""Replaying many cohorts into one store, in parallel across CPU cores.

Each cohort is its own stream, so workers never contend for a stream version; the store
serialises their appends (and the global hash chain) with SQLite's write lock. Workers get the
tape's path rather than the tape, so nothing large crosses a process boundary.

Workers start with one BLAS thread each (unless the environment already says how many): the
workers already fill the cores, and a BLAS pool per worker on top of them oversubscribes the
machine. Training the diffusion forecaster at forecastbench's sizes in two workers on two
cores took 19.5 s each with OpenBLAS's default threads and 3.5 s with one.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from arena.cohort import CohortConfig
from arena.runner import CohortRunner
from arena.settings import DEFAULT_OPTIONS, RunOptions, RunSettings
from ledger.anchor import write_head
from ledger.store import EventStore
from replays.tape import Tape
from replays.tapefile import load_tape


@dataclass(frozen=True)
class CohortDone:
    """What a finished cohort reports back: its stream and how much it wrote."""

    cohort: str
    events: int
    appended: int


def run_cohort(tape: Tape, settings: RunSettings, db: Path) -> CohortDone:
    runner = CohortRunner(tape, settings)
    with EventStore.open(db) as store:
        run = runner.run(store)
    return CohortDone(run.cohort, run.events, run.appended)


def _worker(tape_path: str, settings: RunSettings, db: str) -> CohortDone:
    return run_cohort(load_tape(tape_path), settings, Path(db))


def replay_cohorts(
    tape_path: Path,
    configs: Sequence[CohortConfig],
    db: Path,
    options: RunOptions = DEFAULT_OPTIONS,
    *,
    on_done: Callable[[CohortDone], None] | None = None,
) -> list[CohortDone]:
    """Replay every cohort, each run as ``options`` say (in ``options.workers`` processes);
    results come back in the order of ``configs``. The head the log is left at is recorded
    beside it (``ledger.anchor``), for ``arena verify`` to check later."""
    EventStore.open(db).close()  # create the schema once, before workers race to do it
    runs = [RunSettings(cohort=config, options=options) for config in configs]
    results: dict[int, CohortDone] = {}
    jobs = options.workers(len(runs))
    if jobs <= 1:
        tape = load_tape(tape_path)
        for k, settings in enumerate(runs):
            results[k] = run_cohort(tape, settings, db)
            if on_done:
                on_done(results[k])
    else:
        context = multiprocessing.get_context("spawn")
        with (
            one_blas_thread_per_worker(),
            ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool,
        ):
            futures = {
                pool.submit(_worker, str(tape_path), settings, str(db)): k
                for k, settings in enumerate(runs)
            }
            for future in as_completed(futures):
                k = futures[future]
                results[k] = future.result()
                if on_done:
                    on_done(results[k])
    with EventStore.open(db, readonly=True) as store:
        write_head(store)
    return [results[k] for k in range(len(configs))]


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def one_blas_thread_per_worker() -> Iterator[None]:
    """Spawned workers inherit the environment as it is when they start, and BLAS reads it
    once, when numpy loads; so set it around the pool's life and put it back after."""
    unset = [name for name in BLAS_THREAD_VARIABLES if name not in os.environ]
    for name in unset:
        os.environ[name] = "1"
    try:
        yield
    finally:
        for name in unset:
            os.environ.pop(name, None)
