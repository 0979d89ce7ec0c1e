"""A cohort replayed away from the log, and how its events reach the log.

Parallel workers (processes on this machine, or Ray tasks on a cluster) never open the event
log: each replays its cohort into a :class:`RecordedCohort`, a list that takes the runner's
appends and snapshots exactly as the store would, and hands it back. The driver then
:func:`deliver`\\ s the recordings one by one, in the order the cohorts were asked for, so the
global hash chain, the head and every digest are the same whichever worker finished first and
whichever engine ran them.

Delivering into a log that already holds part of the stream (a run stopped mid-append, or a
log written by an older arena) checks the stored events against the recording and appends only
the rest, as the runner itself does when it resumes.

A slow cohort (a model-backed agent's, minutes to hours) must not hold its paid calls only in a
worker's memory until it closes: once it has run ``RunOptions.commit_every`` seconds, its
recording also appends each commit to a journal of its own (an event store of one stream in
the run's journal folder, ``journal_path``). Killed, the run leaves the journal; the same
command's worker reads it back as the stream's stored prefix, so the runner checks it and
serves its model answers again instead of asking (``strategies.llm.resume``). The log itself
is still appended in the cohorts' order, by the driver alone; the journal is removed once the
log holds its cohort.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from arena.run.cohort import CohortConfig
from arena.run.plan import CohortPlan
from arena.run.runner import CohortRunner
from arena.run.settings import RunSettings
from ledger.errors import LedgerError
from ledger.events import Event
from ledger.store import EventStore
from ledger.stream import MemorySink, SnapshotImage

if TYPE_CHECKING:
    from replays.books import Books
    from replays.tape import Tape


@dataclass(frozen=True)
class CohortDone:
    """What a finished cohort reports back: its stream and how much it wrote."""

    cohort: str
    events: int
    appended: int


def journal_path(folder: Path, cohort: str) -> Path:
    """The journal of ``cohort`` in a run's journal ``folder``."""
    return folder / f"{cohort}.db"


def journal_folder(db: Path) -> Path:
    """The journal folder of the log ``db``: beside it, named after it."""
    return db.with_name(f"{db.name}.journal")


class RecordedCohort(MemorySink):
    """One cohort's stream and snapshots in memory: what a worker returns instead of writing
    the log. It takes the runner's appends and snapshots exactly as the log would (the sink
    contract, ``ledger.stream.EventSink``), and only for its own cohort.

    With a ``journal`` file, what the file holds is the stream's stored prefix, and appends
    made ``after`` seconds or more since the recording began go to the file too (with every
    event before them), each one a transaction."""

    def __init__(
        self,
        cohort: str,
        journal: Path | None = None,
        after: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.cohort = cohort
        self.journal = journal
        self._deadline = clock() + after
        self._clock = clock
        self._store: EventStore | None = None
        self._journaled = 0
        if journal is not None and journal.exists():
            with EventStore.open(journal, create=False, readonly=True) as stored:
                self.streams[cohort] = list(stored.read(stream=cohort))
            self._journaled = len(self.streams[cohort])

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> int:
        if stream != self.cohort:
            raise LedgerError(f"recording of {self.cohort}: unexpected append to {stream!r}")
        version = super().append(stream, events, expected_version)
        if self.journal is not None and (self._store or self._clock() >= self._deadline):
            self._keep()
        return version

    def _keep(self) -> None:
        """Append to the journal every event it lacks."""
        assert self.journal is not None
        if self._store is None:
            self.journal.parent.mkdir(parents=True, exist_ok=True)
            self._store = EventStore.open(self.journal)
        events = self.events[self._journaled :]
        if events:
            self._store.append(self.cohort, events, expected_version=self._journaled)
            self._journaled += len(events)

    def close(self) -> None:
        """Let go of the journal file (kept until the log holds the cohort)."""
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def events(self) -> list[Event]:
        return self.streams.get(self.cohort, [])

    @property
    def snapshots(self) -> list[SnapshotImage]:
        return self.images.get(self.cohort, [])


def record_cohort(
    tape: Tape,
    settings: RunSettings | CohortConfig,
    plan: CohortPlan | None = None,
    books: Books | None = None,
) -> RecordedCohort:
    """Replay one cohort into a recording (what every parallel worker runs), by its ``plan``
    where the driver made it; journaled where ``settings.journal`` names a folder."""
    runner = CohortRunner(tape, settings, plan=plan, books=books)
    journal = None
    after = 0.0
    if isinstance(settings, RunSettings) and settings.journal is not None:
        journal = journal_path(Path(settings.journal), runner.cohort)
        after = settings.options.commit_every
    sink = RecordedCohort(runner.cohort, journal, after)
    try:
        runner.run(sink)
    finally:
        sink.close()
    return sink


def deliver(store: EventStore, recorded: RecordedCohort) -> CohortDone:
    """Append a recording to the log: its events in one transaction, then its snapshots.

    Events the log already holds for the stream must equal the recording's first ones
    (LedgerError naming the version otherwise); only the rest are appended. Snapshots already
    stored are left as they are (``add_snapshot`` ignores them)."""
    stream, events = recorded.cohort, recorded.events
    stored = store.stream_version(stream)
    if stored > len(events):
        raise LedgerError(
            f"cohort {stream}: the log holds {stored} events, this replay made {len(events)}; "
            "replay into a fresh database"
        )
    if stored:
        for version, event in enumerate(store.read(stream=stream), start=1):
            if event != events[version - 1]:
                raise LedgerError(
                    f"cohort {stream}: the stored log diverges from this replay at version "
                    f"{version}; replay into a fresh database"
                )
    if len(events) > stored:
        store.append(stream, events[stored:], expected_version=stored)
    for snap in recorded.snapshots:
        store.add_snapshot(stream, snap.version, snap.state, fmt=snap.fmt, closing=snap.closing)
    if recorded.journal is not None:
        forget(recorded.journal)
    return CohortDone(stream, len(events), len(events) - stored)


def forget(journal: Path) -> None:
    """Remove a journal the log now holds (its folder too, once empty)."""
    for path in (journal, *(journal.with_name(journal.name + end) for end in ("-wal", "-shm"))):
        path.unlink(missing_ok=True)
    if journal.parent.is_dir() and not any(journal.parent.iterdir()):
        journal.parent.rmdir()


def finished(store: EventStore, cohort: str) -> CohortDone | None:
    """The cohort as the log holds it, if it is complete: every event through its close and
    the closing snapshot at the last of them (what a resumed sweep need not run again)."""
    version = store.stream_version(cohort)
    if not version:
        return None
    latest = store.snapshots(cohort, latest=True)
    if not latest or not latest[0].closing or latest[0].version != version:
        return None
    return CohortDone(cohort, version, 0)
