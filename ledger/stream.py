"""Writing one cohort's stream: what a replay's live state recorded, appended in batches, with
resume and snapshots at intervals.

The writer saves a state the way a repository saves an aggregate: it drains the events the
state recorded (``CohortState.collect``) and appends them to the state's stream. Because every
event it writes comes from that queue, and the state applied each one as it was recorded, the
state is always the fold of the stream up to ``version``, which is what makes its snapshot
images (``ledger.snapshot``) true without a refold.

Resume: a replay is deterministic, so a cohort whose stream is already partly in the store is
simply written again. Events the store already holds are compared with the regenerated ones,
read lazily in pages as the replay reaches them (they must be equal, or the write stops with
the version where they diverge), and only the rest are appended. An interrupted replay thus
ends with the same log as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ledger.errors import ConcurrencyError, LedgerError
from ledger.events import Event
from ledger.projection import CohortState
from ledger.snapshot import FORMAT, encode_state

FLUSH_EVERY = 50_000
"""Events buffered before an append: one transaction each, far from the store's chunk size."""
SNAPSHOT_EVERY = 200_000
"""A long cohort stores a snapshot of its state at the first flush after at least this many
events since its last one, so a read of a cohort still running folds about this many at
most, until its images grow big (``SNAPSHOT_BYTES_PER_EVENT``)."""
SNAPSHOT_BYTES_PER_EVENT = 64
"""The next periodic snapshot also waits an event for every this many bytes of the last one's
image. An image holds a row per scored buy, so it grows with the cohort: at a fixed spacing
the snapshots' bytes (and the CPU that encodes them) grew with the square of its events, 980
MB beside a 2.4 GB log at 50,000 markets × 2,000 steps. Spaced by their size they stay under
this many bytes an event, a fifth of the ~315 an event takes in the log, and a read folds at
most about as many events as the image has bytes / 64 (images under 12.8 MB keep
``SNAPSHOT_EVERY``: every log of the sample and the tour has its snapshots where it had)."""


def snapshot_spacing(image_bytes: int) -> int:
    """Events after a snapshot of ``image_bytes`` before the next periodic one may fall: a
    function of the image alone, so a run places its snapshots at the same versions however
    it commits, in process or on a worker, and a rerun finds them there."""
    return max(SNAPSHOT_EVERY, image_bytes // SNAPSHOT_BYTES_PER_EVENT)


class EventSink(Protocol):
    """Where a stream is written: the log (``ledger.store.EventStore``) or memory
    (``MemorySink``: a worker's recording, a test's). Every sink keeps one contract, which
    ``tests/ledger/test_sinks.py`` holds each of them to:

    * ``read(stream)``: the stream's events, in version order (none for a new stream);
    * ``append(stream, events, expected_version)``: all of ``events`` appended after version
      ``expected_version`` and the stream's new version returned, or, if the stream is not at
      that version, ``ConcurrencyError`` and nothing appended;
    * ``add_snapshot(stream, version, state, fmt=, closing=)``: the state's image after event
      ``version`` kept, True; False if that version has one already; ``LedgerError`` if the
      stream has no such event."""

    def read(self, stream: str) -> Iterable[object]: ...

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> int: ...

    def add_snapshot(
        self, stream: str, version: int, state: bytes, *, fmt: int, closing: bool
    ) -> bool: ...


@dataclass(frozen=True)
class SnapshotImage:
    """A snapshot a ``MemorySink`` keeps: the state's image after event ``version``."""

    version: int
    state: bytes
    fmt: int
    closing: bool


class MemorySink:
    """A sink in memory with the log's checks: what a worker records and hands back to be
    appended to the log in order (``arena.engines.recorded``), or what a test looks at."""

    def __init__(self) -> None:
        self.streams: dict[str, list[Event]] = {}
        self.images: dict[str, list[SnapshotImage]] = {}

    def read(self, stream: str) -> list[Event]:
        return list(self.streams.get(stream, ()))

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> int:
        held = self.streams.setdefault(stream, [])
        if expected_version is not None and expected_version != len(held):
            raise ConcurrencyError(
                f"stream {stream!r} is at version {len(held)}, not {expected_version}"
            )
        held.extend(events)
        return len(held)

    def add_snapshot(
        self, stream: str, version: int, state: bytes, *, fmt: int, closing: bool
    ) -> bool:
        if not 1 <= version <= len(self.streams.get(stream, ())):
            raise LedgerError(f"no snapshot of {stream!r} at version {version}: no such event")
        images = self.images.setdefault(stream, [])
        if any(image.version == version for image in images):
            return False
        images.append(SnapshotImage(version, state, fmt, closing))
        return True


class StreamWriter:
    """Appends a live state's recorded events to its stream, checking any already stored.

    Events wait until ``FLUSH_EVERY`` of them do; a stepped replay that must show every step
    at once calls ``flush`` itself after each save. ``commit`` appends what waits without
    moving where batches and snapshots fall: a slow run (a model-backed agent's) commits its
    decisions as they happen, and its log, snapshots included, is the one a fast run writes."""

    def __init__(self, sink: EventSink | None, state: CohortState) -> None:
        self.sink = sink
        self.state = state
        self.stream = state.cohort
        self._stored: Iterator[object] | None = iter(sink.read(self.stream)) if sink else None
        self.version = 0
        """How many events of the stream exist: stored, matched, or waiting in ``pending``."""
        self.pending: list[Event] = []
        self.appended = 0
        self.snapshot_at = 0
        self.snapshot_bytes = 0
        """The last snapshot's image size, which spaces the next (``snapshot_spacing``)."""
        self._batched = 0
        """Events taken since the last ``flush``, committed or not: where batches fall."""

    def save(self) -> None:
        """Take every event the state recorded since the last save; append once enough wait."""
        self._take()
        if self._batched >= FLUSH_EVERY:
            self.flush()

    def _take(self) -> None:
        events = self.state.collect()
        if self._stored is not None:
            events = self._skip_stored(events)
        self.version += len(events)
        self._batched += len(events)
        self.pending += events

    def _skip_stored(self, events: list[Event]) -> list[Event]:
        """The events past the stored prefix, after checking the ones inside it."""
        stored = self._stored
        assert stored is not None
        for k, event in enumerate(events):
            held = next(stored, None)
            if held is None:
                self._stored = None  # the stored prefix is used up: the rest are new
                return events[k:]
            self.version += 1
            if held != event:
                raise LedgerError(
                    f"cohort {self.stream}: the stored log diverges from this replay at "
                    f"version {self.version}; replay into a fresh database"
                )
        return []

    def flush(self, *, periodic: bool = True) -> None:
        """Append what waits (one transaction), and a snapshot if one is due (and
        ``periodic``): the end of a batch."""
        self.commit()
        due = self.version - self.snapshot_at >= snapshot_spacing(self.snapshot_bytes)
        if self.sink is not None and self._batched and periodic and due:
            self.snapshot(closing=False)
        self._batched = 0

    def commit(self) -> None:
        """Save, and append what waits now (one transaction), leaving the batch open: the
        events are in the store, and the next snapshot falls where it would have."""
        self._take()
        if self.sink is not None and self.pending:
            start = self.version - len(self.pending)
            self.sink.append(self.stream, self.pending, expected_version=start)
            self.appended += len(self.pending)
        self.pending = []

    def close(self) -> None:
        """Save and append the rest, then store the closing snapshot. A periodic snapshot due
        at the same version is not taken: a version holds one snapshot, and the last one of a
        closed cohort must say it closed it."""
        self._take()
        self.flush(periodic=False)
        self.snapshot(closing=True)

    def snapshot(self, *, closing: bool) -> None:
        """Store the state's image at the current version (a rerun finds it already there).
        Called right after a flush, when the store holds every event up to ``version`` and the
        state is their fold (see the module doc)."""
        if self.sink is not None:
            image = encode_state(self.state)
            self.sink.add_snapshot(self.stream, self.version, image, fmt=FORMAT, closing=closing)
            self.snapshot_at = self.version
            self.snapshot_bytes = len(image)
