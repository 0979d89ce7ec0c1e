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

from arena.engines.base import CohortWork, Engine, TapeSource
from arena.engines.local import LocalEngine
from arena.engines.recorded import (
    CohortDone,
    RecordedCohort,
    deliver,
    finished,
    journal_folder,
    journal_stored,
)
from arena.run.cohort import CohortConfig
from arena.run.pace import Watcher
from arena.run.plan import PlannedCohort, plan_cohort
from arena.run.runner import CohortRunner
from arena.run.settings import DEFAULT_OPTIONS, RunOptions, RunSettings
from ledger.anchor import write_head
from ledger.store import EventStore


def make_engine(options: RunOptions, cohorts: int) -> Engine:
    """The engine ``options`` ask for, for ``cohorts`` cohorts: local with
    ``options.workers(cohorts)`` processes, or Ray (``jobs`` 0: the whole cluster; imported
    only then, as the optional extra it is)."""
    if options.engine == "ray":
        from arena.engines.ray import RayEngine

        return RayEngine(address=options.address, jobs=options.jobs)
    return LocalEngine(options.workers(cohorts))


def replay_cohorts(
    source: TapeSource,
    cohorts: Sequence[PlannedCohort | CohortConfig],
    db: Path,
    options: RunOptions = DEFAULT_OPTIONS,
    *,
    skip_finished: bool = False,
    on_done: Callable[[CohortDone], None] | None = None,
    on_decision: Watcher | None = None,
) -> list[CohortDone]:
    """Replay every cohort, each run as ``options`` say (on ``options.engine``, with
    ``options.jobs`` workers); results come back in the order of ``cohorts``. A cohort given
    as a bare config is planned here (a start with nothing to decide is a LedgerError); the
    tape is the one ``source`` already loaded. The head the log is left at is recorded beside
    it (``ledger.anchor``), for ``arena verify`` to check later, also when the run is cut
    short, so reads check what it did write. ``on_decision`` is told of each decision of every
    cohort, whether run here or by an engine's workers (a progress display's per-decision
    lines; from workers it may be called from another thread, never two calls at once). None
    (nobody watches): the workers report nothing, at no cost."""
    planned = [
        c if isinstance(c, PlannedCohort) else PlannedCohort(c, plan_cohort(source.tape, c))
        for c in cohorts
    ]
    results: dict[int, CohortDone] = {}
    with EventStore.open(db) as store:  # creates the schema before any worker starts
        try:
            _replay(source, planned, store, options, skip_finished, on_done, on_decision, results)
        finally:
            write_head(store)
    return [results[k] for k in range(len(planned))]


def _replay(
    source: TapeSource,
    planned: Sequence[PlannedCohort],
    store: EventStore,
    options: RunOptions,
    skip_finished: bool,
    on_done: Callable[[CohortDone], None] | None,
    on_decision: Watcher | None,
    results: dict[int, CohortDone],
) -> None:
    """``replay_cohorts``' work, each finished cohort's outcome put in ``results`` as the log
    takes it."""
    tape = source.tape
    if skip_finished:
        for k, cohort in enumerate(planned):
            if (done := finished(store, cohort.config.cohort_id(tape.hash))) is not None:
                results[k] = done
    todo = [k for k in range(len(planned)) if k not in results]
    for k in sorted(results):
        if on_done:
            on_done(results[k])
    engine = make_engine(options, len(todo))
    if isinstance(engine, LocalEngine) and engine.in_process:
        for k in todo:
            settings = RunSettings(cohort=planned[k].config, options=options)
            runner = CohortRunner(tape, settings, plan=planned[k].plan, books=source.books)
            runner.watch = on_decision
            run = runner.run(store)
            results[k] = CohortDone(run.cohort, run.events, run.appended)
            if on_done:
                on_done(results[k])
    elif todo:
        waiting: dict[int, Callable[[], RecordedCohort]] = {}
        order = iter(todo)
        nxt = next(order, None)
        journal = journal_folder(Path(store.path))
        for k in todo:
            journal_stored(store, journal, planned[k].config.cohort_id(tape.hash))
        work = CohortWork(source, options, journal)
        for j, fetch in engine.run(work, [planned[k] for k in todo], on_decision):
            waiting[todo[j]] = fetch
            while nxt is not None and nxt in waiting:
                results[nxt] = deliver(store, waiting.pop(nxt)())
                if on_done:
                    on_done(results[nxt])
                nxt = next(order, None)
