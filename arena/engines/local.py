"""``--engine local``: cohorts replayed in a pool of spawned worker processes on this machine.

Each worker loads the tape once (at its start, from the path) and keeps it for every cohort it
runs; each cohort arrives with its plan, made once by the driver. Workers start with one BLAS
thread each (unless the environment already says how many): the workers already fill the cores,
and a BLAS pool per worker on top of them oversubscribes the machine. Training the diffusion
forecaster at forecastbench's sizes in two workers on two cores took 19.5 s each with OpenBLAS's
default threads and 3.5 s with one.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from arena.engines.base import CohortWork, EngineError, Finished
from arena.engines.recorded import RecordedCohort, record_cohort
from arena.run.cohort import CohortConfig
from arena.run.plan import CohortPlan, PlannedCohort
from arena.run.settings import RunSettings
from replays.bookfile import load_books
from replays.books import Books
from replays.tape import Tape
from replays.tapefile import load_tape

_TAPE: Tape | None = None
"""The tape of a local worker process, loaded once by the pool's initializer."""
_BOOKS: Books | None = None
"""Its order books, if the run has any, loaded once beside it."""


def _load_worker_tape(path: str, books: str | None) -> None:
    global _TAPE, _BOOKS
    _TAPE = load_tape(path)
    _BOOKS = None if books is None else load_books(books)


def _local_worker(settings: RunSettings, plan: CohortPlan) -> RecordedCohort:
    assert _TAPE is not None, "the pool's initializer loads the tape"
    return record_cohort(_TAPE, settings, plan, _BOOKS)


@dataclass
class LocalEngine:
    """``jobs`` spawned worker processes on this machine. With one job (or one cohort)
    ``arena.engines.driver`` runs the cohort in its own process instead, writing the log directly:
    nothing to gain from a worker, and a large cohort's events are never all held at once."""

    jobs: int = 1

    @property
    def in_process(self) -> bool:
        return self.jobs <= 1

    def run(self, work: CohortWork, cohorts: Sequence[PlannedCohort]) -> Iterator[Finished]:
        context = multiprocessing.get_context("spawn")
        with (
            one_blas_thread_per_worker(),
            ProcessPoolExecutor(
                max_workers=min(self.jobs, len(cohorts)),
                mp_context=context,
                initializer=_load_worker_tape,
                initargs=(str(work.source.path), _path(work.source.books_path)),
            ) as pool,
        ):
            futures: dict[Future[RecordedCohort], int] = {
                pool.submit(_local_worker, work.settings(cohort), cohort.plan): k
                for k, cohort in enumerate(cohorts)
            }
            try:
                for future in as_completed(futures):
                    k = futures[future]
                    yield k, partial(_recording, future, cohorts[k].config)
            finally:
                for future in futures:
                    future.cancel()  # an error or an interrupt: start nothing more


def _path(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _recording(future: Future[RecordedCohort], config: CohortConfig) -> RecordedCohort:
    """A worker's recording; a pool whose process died (killed by a signal: a plugin's native
    code crashing Python, or the kernel out of memory) as one line, not the pool's traceback."""
    try:
        return future.result()
    except BrokenProcessPool:
        raise EngineError(
            f"a worker process died abruptly before the cohort from {config.start:%Y-%m-%d} "
            "finished (a plugin's native code crashed Python, or memory ran out); the cohorts "
            "before it are in the log and the same command resumes there; --isolate runs each "
            "agent in a process of its own, where a crash is that agent's recorded error"
        ) from None


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
