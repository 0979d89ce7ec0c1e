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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


class RecordedCohort(MemorySink):
    """One cohort's stream and snapshots in memory: what a worker returns instead of writing
    the log. It takes the runner's appends and snapshots exactly as the log would (the sink
    contract, ``ledger.stream.EventSink``), and only for its own cohort."""

    def __init__(self, cohort: str) -> None:
        super().__init__()
        self.cohort = cohort

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> int:
        if stream != self.cohort:
            raise LedgerError(f"recording of {self.cohort}: unexpected append to {stream!r}")
        return super().append(stream, events, expected_version)

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
    where the driver made it."""
    runner = CohortRunner(tape, settings, plan=plan, books=books)
    sink = RecordedCohort(runner.cohort)
    runner.run(sink)
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
    return CohortDone(stream, len(events), len(events) - stored)


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
