"""Where cohorts are replayed: this machine's cores (``local``) or a Ray cluster (``ray``).

An engine takes the cohorts to run and yields each one's recording as it finishes (in any
order); ``arena.engines.driver`` delivers them to the log in a fixed order, so the engine changes
how long a run takes and nothing it writes.

``local`` is a process pool of spawned workers, each of which loads the tape once (at its
start, from the path) and keeps it for every cohort it runs. Workers start with one BLAS thread
each (unless the environment already says how many): the workers already fill the cores, and
a BLAS pool per worker on top of them oversubscribes the machine. Training the diffusion
forecaster at forecastbench's sizes in two workers on two cores took 19.5 s each with
OpenBLAS's default threads and 3.5 s with one.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from arena.engines.recorded import RecordedCohort, record_cohort
from arena.errors import ArenaError
from arena.run.cohort import CohortConfig
from arena.run.settings import DEFAULT_OPTIONS, RunOptions, RunSettings
from replays.tape import Tape
from replays.tapefile import load_tape

Finished = tuple[int, Callable[[], RecordedCohort]]
"""A cohort that finished: its index among those asked for, and how to fetch its recording
(a Ray engine leaves it in the object store until the driver is ready to append it)."""


class EngineError(ArenaError, RuntimeError):
    """An engine that cannot start (Ray missing, a cluster address that does not answer)."""


@dataclass(frozen=True)
class CohortWork:
    """What every cohort of one run is replayed with, besides its config."""

    tape_path: Path
    options: RunOptions = DEFAULT_OPTIONS

    def settings(self, config: CohortConfig) -> RunSettings:
        return RunSettings(cohort=config, options=self.options)


class Engine(Protocol):
    """Runs cohorts and yields each recording once it is made, in completion order."""

    def run(self, work: CohortWork, configs: Sequence[CohortConfig]) -> Iterator[Finished]: ...


# -- local: a process pool ---------------------------------------------------------------------

_TAPE: Tape | None = None
"""The tape of a local worker process, loaded once by the pool's initializer."""


def _load_worker_tape(path: str) -> None:
    global _TAPE
    _TAPE = load_tape(path)


def _local_worker(settings: RunSettings) -> RecordedCohort:
    assert _TAPE is not None, "the pool's initializer loads the tape"
    return record_cohort(_TAPE, settings)


@dataclass
class LocalEngine:
    """``jobs`` spawned worker processes on this machine. With one job (or one cohort)
    ``arena.engines.driver`` runs the cohort in its own process instead, writing the log directly:
    nothing to gain from a worker, and a large cohort's events are never all held at once."""

    jobs: int = 1

    @property
    def in_process(self) -> bool:
        return self.jobs <= 1

    def run(self, work: CohortWork, configs: Sequence[CohortConfig]) -> Iterator[Finished]:
        context = multiprocessing.get_context("spawn")
        with (
            one_blas_thread_per_worker(),
            ProcessPoolExecutor(
                max_workers=min(self.jobs, len(configs)),
                mp_context=context,
                initializer=_load_worker_tape,
                initargs=(str(work.tape_path),),
            ) as pool,
        ):
            futures: dict[Future[RecordedCohort], int] = {
                pool.submit(_local_worker, work.settings(config)): k
                for k, config in enumerate(configs)
            }
            try:
                for future in as_completed(futures):
                    k = futures[future]
                    yield k, partial(_recording, future, configs[k])
            finally:
                for future in futures:
                    future.cancel()  # an error or an interrupt: start nothing more


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


def make_engine(options: RunOptions, cohorts: int) -> Engine:
    """The engine ``options`` ask for, for ``cohorts`` cohorts: local with
    ``options.workers(cohorts)`` processes, or Ray (``jobs`` 0: the whole cluster)."""
    if options.engine == "ray":
        from arena.engines.ray import RayEngine

        return RayEngine(address=options.address, jobs=options.jobs)
    return LocalEngine(options.workers(cohorts))
