"""Replaying many cohorts into one log, on any engine, with the same log every time.

Each cohort is its own stream. An engine (``arena.engines.local``: this machine's cores, or a Ray
cluster) replays the cohorts wherever it likes and hands back each one's recording; this driver
alone writes the log, appending the recordings in the order of ``configs`` as soon as each one's
predecessors are in. So the hash chain, the head recorded beside the log and every digest are
the same for one worker or many, for ``local`` or ``ray``, and from one run to the next.

``skip_finished`` makes a run resumable at the level of cohorts: a cohort the log already holds
complete (through its closing snapshot) is not replayed again. Without it a finished cohort is
replayed and checked against the log, event by event, as ``arena replay`` always has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from arena.engines.local import CohortWork, LocalEngine, make_engine
from arena.engines.recorded import CohortDone, RecordedCohort, deliver, finished
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.run.settings import DEFAULT_OPTIONS, RunOptions, RunSettings
from ledger.anchor import write_head
from ledger.store import EventStore
from replays.tapefile import load_tape


def replay_cohorts(
    tape_path: Path,
    configs: Sequence[CohortConfig],
    db: Path,
    options: RunOptions = DEFAULT_OPTIONS,
    *,
    skip_finished: bool = False,
    on_done: Callable[[CohortDone], None] | None = None,
) -> list[CohortDone]:
    """Replay every cohort, each run as ``options`` say (on ``options.engine``, with
    ``options.jobs`` workers); results come back in the order of ``configs``. The head the log
    is left at is recorded beside it (``ledger.anchor``), for ``arena verify`` to check later."""
    results: dict[int, CohortDone] = {}
    with EventStore.open(db) as store:  # creates the schema before any worker starts
        if skip_finished:
            tape_hash = load_tape(tape_path).hash
            for k, config in enumerate(configs):
                if (done := finished(store, config.cohort_id(tape_hash))) is not None:
                    results[k] = done
        todo = [k for k in range(len(configs)) if k not in results]
        for k in sorted(results):
            if on_done:
                on_done(results[k])
        engine = make_engine(options, len(todo))
        if isinstance(engine, LocalEngine) and engine.in_process:
            tape = load_tape(tape_path) if todo else None
            for k in todo:
                assert tape is not None
                run = CohortRunner(tape, RunSettings(cohort=configs[k], options=options)).run(store)
                results[k] = CohortDone(run.cohort, run.events, run.appended)
                if on_done:
                    on_done(results[k])
        elif todo:
            waiting: dict[int, Callable[[], RecordedCohort]] = {}
            order = iter(todo)
            nxt = next(order, None)
            work = CohortWork(tape_path, options)
            for j, fetch in engine.run(work, [configs[k] for k in todo]):
                waiting[todo[j]] = fetch
                while nxt is not None and nxt in waiting:
                    results[nxt] = deliver(store, waiting.pop(nxt)())
                    if on_done:
                        on_done(results[nxt])
                    nxt = next(order, None)
        write_head(store)
    return [results[k] for k in range(len(configs))]
