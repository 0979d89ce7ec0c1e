"""Replaying many cohorts into one store, in parallel across CPU cores.

Each cohort is its own stream, so workers never contend for a stream version; the store
serialises their appends (and the global hash chain) with SQLite's write lock. Workers get the
tape's path rather than the tape, so nothing large crosses a process boundary.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from arena.cohort import CohortConfig
from arena.runner import CohortRunner
from ledger.store import EventStore
from replays.tape import Tape
from replays.tapefile import load_tape


@dataclass(frozen=True)
class CohortDone:
    """What a finished cohort reports back: its stream and how much it wrote."""

    cohort: str
    events: int
    appended: int


def run_cohort(tape: Tape, config: CohortConfig, db: Path, decision_timeout: float) -> CohortDone:
    runner = CohortRunner(tape, config, decision_timeout=decision_timeout)
    with EventStore.open(db) as store:
        run = runner.run(store)
    return CohortDone(run.cohort, run.events, run.appended)


def _worker(tape_path: str, config: CohortConfig, db: str, decision_timeout: float) -> CohortDone:
    return run_cohort(load_tape(tape_path), config, Path(db), decision_timeout)


def replay_cohorts(
    tape_path: Path,
    configs: Sequence[CohortConfig],
    db: Path,
    *,
    jobs: int = 1,
    decision_timeout: float = 0.0,
    on_done: Callable[[CohortDone], None] | None = None,
) -> list[CohortDone]:
    """Replay every cohort; results come back in the order of ``configs``."""
    EventStore.open(db).close()  # create the schema once, before workers race to do it
    results: dict[int, CohortDone] = {}
    if jobs <= 1 or len(configs) <= 1:
        tape = load_tape(tape_path)
        for k, config in enumerate(configs):
            results[k] = run_cohort(tape, config, db, decision_timeout)
            if on_done:
                on_done(results[k])
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = {
                pool.submit(_worker, str(tape_path), config, str(db), decision_timeout): k
                for k, config in enumerate(configs)
            }
            for future in as_completed(futures):
                k = futures[future]
                results[k] = future.result()
                if on_done:
                    on_done(results[k])
    return [results[k] for k in range(len(configs))]
