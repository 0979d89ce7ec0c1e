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

A cohort that asks a model (minutes to hours, its calls paid for) must not hold them only in a
worker's memory until it closes: from the first commit that holds a model call (the runner
commits each decision that asked one as it is made, ``arena.run.pace.Pace``), its recording
also appends each commit to a journal of its own (an event store of one stream in the run's
journal folder, ``journal_path``); so does any cohort once it has run
``RunOptions.commit_every`` seconds. Killed, even between two decisions, the run leaves the
journal holding every answer; the same command's worker reads it back as the stream's stored
prefix, so the runner checks it and serves its model answers again instead of asking
(``strategies.llm.resume``). A worker told to stop (``arena.engines.local``: the driver's
Ctrl-C) cuts its running decision as a Ctrl-C does in process and commits it, its calls and
the one in flight (aborted) included, before it ends. The log itself is still appended in the
cohorts' order, by the driver alone; the journal is removed once the log holds its cohort.

A recording touches the journal folder only when it needs it: when the folder exists (a
journal to read, perhaps) and once its cohort asks a model or turns slow. A fast cohort on a
Ray node that lacks the log's folder runs as it always did, and a slow one there stops with one
line naming the folder (``ArenaError``), as does any other failure to make, lock or read a
journal: the alternative, running on without a journal, would leave a paid run unresumable
with nobody told, since a worker has no way to tell the user but its cohort's outcome. The
folder is made beside the log, never its parents: a journal on a node's own disk would never be
read back or removed.

A journal is one recording's at a time: the recording holds an exclusive ``flock`` on a lock
file beside it (``<journal>.lock``) from before it reads the journal until it lets go of it, and
the kernel lets go for a process that dies. A resume started while the cut run's last worker is
still ending waits for it (``JOURNAL_WAIT``); two processes once appended to one journal that
way and the second failed with "concurrent append". Past the wait, one line says another run
still writes the journal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from arena.errors import ArenaError
from arena.run.cohort import CohortConfig
from arena.run.pace import Batched, DecisionSeen
from arena.run.plan import CohortPlan
from arena.run.runner import CohortRunner
from arena.run.settings import RunSettings
from ledger.errors import LedgerError
from ledger.events import EVENT_TYPES, Event, ModelCalled
from ledger.store import EventStore
from ledger.stream import MemorySink, SnapshotImage

if TYPE_CHECKING:
    from replays.books import Books
    from replays.tape import Tape


JOURNAL_WAIT = 10.0
"""Seconds a recording waits for a journal another process holds: a worker of a run just cut
short takes a moment to end (it dies with its driver, and may be in an append), while a second
run writing the same log at once should hear so soon."""


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
    """The journal folder of the log ``db``: beside it, named after it, as an absolute path (a
    Ray worker does not start in the driver's directory)."""
    db = db.absolute()
    return db.with_name(f"{db.name}.journal")


def _lock_path(journal: Path) -> Path:
    return journal.with_name(journal.name + ".lock")


def hold_journal(journal: Path, wait: float = JOURNAL_WAIT) -> int:
    """An exclusive lock on ``journal``'s lock file, taken within ``wait`` seconds: its file
    descriptor, which holds the lock until it is closed (or the process ends). ArenaError naming
    the journal once ``wait`` has passed with another process holding it, and naming its folder
    where it cannot be made or locked (``_journal_errors``).

    The lock file is removed by whoever holds it (a recording that wrote no journal, the driver
    once the log holds the cohort), and its folder once empty; a lock taken on a file removed
    meanwhile locks nothing, so it is taken again on the file the path names now."""
    lock = _lock_path(journal)
    deadline = time.monotonic() + wait
    while True:
        with _journal_errors(journal.parent):
            journal.parent.mkdir(exist_ok=True)  # never its parents (see the module's notes)
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:  # the folder was removed between the two lines
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _names(lock, fd):
                    return fd
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise ArenaError(
                        f"journal {journal}: another run is still writing it (its workers may "
                        "be ending); run the command again once it has ended"
                    ) from None
                time.sleep(0.05)
                continue
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # it locked a file removed meanwhile


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` names the file open as ``fd``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


@contextlib.contextmanager
def _journal_errors(folder: Path) -> Iterator[None]:
    """An OSError making, locking or reading a journal in ``folder`` as one line naming the
    folder and this machine (on a cluster, the node that lacks it)."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            reason = "the log's folder does not exist there"
        else:
            reason = exc.strerror or type(exc).__name__
        raise ArenaError(
            f"journal folder {folder} on {socket.gethostname()}: {reason}; a worker keeps the "
            "journal of a slow cohort, or of one asking a model, beside the log, so on a Ray "
            "cluster the log must be on a path every node reaches and can write"
        ) from None


def _unlink_lock(journal: Path) -> None:
    """Remove the lock file (held by the caller, or by nobody) and the folder once empty; a
    recording starting meanwhile makes them again."""
    _lock_path(journal).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty (other cohorts' journals), or gone
        journal.parent.rmdir()


class RecordedCohort(MemorySink):
    """One cohort's stream and snapshots in memory: what a worker returns instead of writing
    the log. It takes the runner's appends and snapshots exactly as the log would (the sink
    contract, ``ledger.stream.EventSink``), and only for its own cohort.

    With a ``journal`` file, what the file holds is the stream's stored prefix, and an append
    holding a model call, or made ``after`` seconds or more since the recording began, goes to
    the file too (with every event before it, and so does every append after it), each one a
    transaction. The journal is held (``hold_journal``, within
    ``wait`` seconds) from before it is read, or, where its folder did not exist, from the
    first append it takes, until ``close``; nothing is held after an error here."""

    def __init__(
        self,
        cohort: str,
        journal: Path | None = None,
        after: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        wait: float = JOURNAL_WAIT,
    ) -> None:
        super().__init__()
        self.cohort = cohort
        self.journal = journal
        self._deadline = clock() + after
        self._clock = clock
        self._wait = wait
        self._store: EventStore | None = None
        self._journaled = 0
        self._held: int | None = None
        if journal is None:
            return
        try:
            with _journal_errors(journal.parent):
                if journal.parent.exists():
                    self._held = hold_journal(journal, wait)
                    if journal.exists():
                        with EventStore.open(journal, create=False, readonly=True) as stored:
                            self.streams[cohort] = list(stored.read(stream=cohort))
                        self._journaled = len(self.streams[cohort])
        except BaseException:
            self.close()
            raise

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> int:
        if stream != self.cohort:
            raise LedgerError(f"recording of {self.cohort}: unexpected append to {stream!r}")
        version = super().append(stream, events, expected_version)
        if self.journal is not None and (
            self._store or self._clock() >= self._deadline or _asked(events)
        ):
            self._keep()
        return version

    def _keep(self) -> None:
        """Append to the journal every event it lacks."""
        assert self.journal is not None
        if self._store is None:
            with _journal_errors(self.journal.parent):
                if self._held is None:
                    self._held = hold_journal(self.journal, self._wait)
                    if self.journal.exists():
                        # written since this recording began, by another of the same cohort
                        # (a cut run's worker, still ending): this one's events replace it
                        _discard(self.journal)
                self._store = EventStore.open(self.journal)
        events = self.events[self._journaled :]
        if events:
            self._store.append(self.cohort, events, expected_version=self._journaled)
            self._journaled += len(events)

    def close(self) -> None:
        """Let go of the journal file (kept until the log holds the cohort), and of its lock
        (the lock file removed too when there is no journal: a fast cohort leaves nothing)."""
        store, self._store = self._store, None
        held, self._held = self._held, None
        try:
            if store is not None:
                store.close()
            if held is not None and self.journal is not None and not self.journal.exists():
                _unlink_lock(self.journal)
        finally:
            if held is not None:
                os.close(held)

    @property
    def events(self) -> list[Event]:
        return self.streams.get(self.cohort, [])

    @property
    def snapshots(self) -> list[SnapshotImage]:
        return self.images.get(self.cohort, [])


def _asked(events: Sequence[Event]) -> bool:
    """Whether ``events`` hold a model call (one paid for, unless served from a record)."""
    return any(type(event) is ModelCalled for event in events)


def record_cohort(
    tape: Tape,
    settings: RunSettings | CohortConfig,
    plan: CohortPlan | None = None,
    books: Books | None = None,
    send: Callable[[list[DecisionSeen]], None] | None = None,
    stop: int | None = None,
) -> RecordedCohort:
    """Replay one cohort into a recording (what every parallel worker runs), by its ``plan``
    where the driver made it; journaled where ``settings.journal`` names a folder. ``send``:
    where its decisions go, in batches (``arena.run.pace.Batched``), when the driver watches.
    ``stop``: the signal that cuts the run as a Ctrl-C does (``RunInterrupted`` raised here
    once the cut decision is committed, to the journal too where the cohort keeps one)."""
    runner = CohortRunner(tape, settings, plan=plan, books=books)
    runner.stop_signal = stop
    journal = None
    after = 0.0
    if isinstance(settings, RunSettings) and settings.journal is not None:
        journal = journal_path(Path(settings.journal), runner.cohort)
        after = settings.options.commit_every
    batched = None if send is None else Batched(send)
    runner.watch = batched
    sink = RecordedCohort(runner.cohort, journal, after)
    try:
        runner.run(sink)
    finally:
        sink.close()
        if batched is not None:  # before the recording goes back, and its timer stopped
            batched.flush()
    return sink


def journal_stored(store: EventStore, folder: Path, cohort: str) -> None:
    """Before a worker replays ``cohort`` again: when the log already holds it with model
    calls (a run cut short after the driver appended it), its journal in ``folder`` is made
    to hold every stored event, so the worker serves the stored answers again instead of asking
    the model, and records the same bytes the log holds (asked again, the answers' latencies
    alone made the log "diverge"). A cohort of rule-based agents is left to replay from
    nothing, as it always did: it records the same events whatever the clock."""
    stored = store.stream_version(cohort)
    others = set(EVENT_TYPES) - {"ModelCalled"}
    if not stored or not store.versioned_payloads(cohort, skip=others):
        return
    recording = RecordedCohort(cohort, journal_path(folder, cohort))
    try:
        have = len(recording.events)
        if have < stored:
            events = list(store.read(stream=cohort))
            recording.append(cohort, events[have:], expected_version=have)
    finally:
        recording.close()


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
    """Remove a journal the log now holds, its lock file, and its folder once empty."""
    _discard(journal)
    _unlink_lock(journal)


def _discard(journal: Path) -> None:
    """Remove a journal's files (SQLite's beside it too), leaving its lock file."""
    for path in (journal, *(journal.with_name(journal.name + end) for end in ("-wal", "-shm"))):
        path.unlink(missing_ok=True)


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
