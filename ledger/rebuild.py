"""Rebuilding every projection from the log, fast.

Four things make it fast, and none changes the result:

* The store hands out each page of the log as one JSON array (joined by SQLite in C), decoded in
  one call into ``projection.FoldEvent``: full events, except decisions, which the fold only
  counts and which decode to the two facts it reads, skipping the rest of their JSON.
* ``OrderPlaced`` is left out in SQLite: it changes no projection (an order counts when it is
  decided, by its fill or rejection), so it is neither copied nor decoded. That is nearly half
  of a trading log.
* A thread reads the next page while this one folds: the sqlite3 module releases the GIL while
  SQLite works, so on two cores the reading costs almost no wall time.
* The cycle collector is paused while folding (see :func:`cycle_collector_paused`).
* The loop calls the fold's handlers itself (``projection.HANDLERS``), without the frame of
  ``CohortState.apply`` around each: 10-20 % of a fold.

Two things are checked on the way, at no cost to the loop (each test sits where the loop
already branches): a cohort closes once, and, folded stream by stream, a stream holds only its
own cohort's events (one of another cohort would be folded into that cohort's state). Either is
an IntegrityError. The close's own check, of the digest it records, is ``ledger.restore``'s,
which also finds any other event after a close: a stream must end with its close.

Every event is then folded in log order by the same handlers ``CohortState.apply`` calls when
the run is live, so the result equals a plain event-by-event fold exactly (the tests compare
snapshots). A fold may start from a restored snapshot of a cohort (``start``) and read only the
events after it.
"""

from __future__ import annotations

import gc
from collections.abc import Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TypeVar

import msgspec

from ledger.errors import IntegrityError, LedgerError
from ledger.events import CohortClosed
from ledger.projection import HANDLERS, IGNORED_BY_FOLD, CohortState, FoldEvent, Ledger
from ledger.store import EventStore

T = TypeVar("T")

_page_decoder: msgspec.json.Decoder[list[FoldEvent]] = msgspec.json.Decoder(list[FoldEvent])


def rebuild(
    store: EventStore,
    streams: Iterable[str] | None = None,
    batch: int = 100_000,
    *,
    start: Mapping[str, tuple[CohortState, int]] | None = None,
) -> Ledger:
    """The projections of every cohort (or of the given cohort streams), folded from the log,
    ``batch`` events a page. ``start`` maps a stream to a state restored from a snapshot and
    the stream version it was taken after: that stream's fold goes on from there."""
    streams = None if streams is None else list(streams)  # iterated again to name a bad event
    start = start or {}
    ledger = Ledger()
    cohorts = ledger.cohorts
    for stream, (restored, _) in start.items():
        cohorts[stream] = restored
    name = ""
    state: CohortState | None = None
    pages: Generator[tuple[str | None, bytes], None, None] = (
        ((None, page) for page in store.payload_arrays(batch=batch, skip=IGNORED_BY_FOLD))
        if streams is None and not start
        else (
            (stream, page)
            for stream in (store.streams() if streams is None else streams)
            for page in store.payload_arrays(
                stream, batch, skip=IGNORED_BY_FOLD, after_version=start.get(stream, (None, 0))[1]
            )
        )
    )
    handlers = HANDLERS | {CohortClosed: _close_once}
    with cycle_collector_paused():
        for own, page in read_ahead(pages):
            try:
                events = _page_decoder.decode(page)
            except msgspec.MsgspecError as exc:
                raise unreadable(store, streams, exc) from None
            try:
                for event in events:
                    if event.cohort != name:  # a new stream's first event, or one not its own
                        if own is not None and event.cohort != own:
                            raise _NotItsOwn(own, event.cohort)
                        name = event.cohort
                        state = cohorts.get(name)
                        if state is None:
                            state = cohorts[name] = CohortState(name)
                    handlers[type(event)](state, event)
            except _ClosedTwice as twice:
                raise closed_twice(store, twice.cohort) from None
            except _NotItsOwn as alien:
                raise IntegrityError(
                    f"{store.path}: stream {alien.stream} holds an event of cohort "
                    f"{alien.cohort}; run 'arena verify'"
                ) from None
    return ledger


class _ClosedTwice(Exception):
    def __init__(self, cohort: str) -> None:
        self.cohort = cohort


class _NotItsOwn(Exception):
    def __init__(self, stream: str, cohort: str) -> None:
        self.stream, self.cohort = stream, cohort


def _close_once(state: CohortState, event: CohortClosed) -> None:
    if state.closed is not None:
        raise _ClosedTwice(state.cohort)
    HANDLERS[CohortClosed](state, event)


def closed_twice(store: EventStore, cohort: str) -> IntegrityError:
    """The error for a cohort that closes again: the seq of its second close (a search of the
    log, but only on the way to an error)."""
    seqs = [
        seq
        for seq, stream, _, event in store.read_with_seq(cohort)
        if stream == cohort and isinstance(event, CohortClosed)
    ]
    seq = seqs[1] if len(seqs) > 1 else None
    where = f"event {seq}" if seq is not None else "an event"
    return IntegrityError(f"{store.path}: {where} closes cohort {cohort} after its close", seq)


def unreadable(
    store: EventStore, streams: Iterable[str] | None, exc: msgspec.MsgspecError
) -> LedgerError:
    """The error for a page that did not decode: reading the log event by event names the
    first unreadable one (slow, but only on the way to an error)."""
    try:
        for stream in [None] if streams is None else streams:
            for _ in store.read(stream):
                pass
    except LedgerError as named:
        return named
    return LedgerError(f"{store.path}: the log holds an unreadable event ({exc})")


def read_ahead(pages: Generator[T, None, None]) -> Iterator[T]:
    """``pages``, with the next one fetched on a worker thread while the caller folds this one.

    One fetch is in flight at a time, so the store's connection is still used by one thread at
    a time. If the caller stops early, the fetch in flight finishes before ``pages`` is closed.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-read-ahead") as worker:
        ahead: Future[T | None] = worker.submit(next, pages, None)
        try:
            while (page := ahead.result()) is not None:
                ahead = worker.submit(next, pages, None)
                yield page
        finally:
            wait([ahead])
            pages.close()


@contextmanager
def cycle_collector_paused(keep: bool = False) -> Iterator[None]:
    """The fold allocates a few objects per event that outlive their page; each burst of
    allocations would set off the cycle collector, which walks every live container again (a
    tenth of a rebuild). Nothing a fold makes can form a cycle, so it runs after, not during.

    ``keep``: what the fold made is kept for long (``arena step``'s checkpoints and restored
    snapshots), so it is moved out of the collector's generations (``gc.freeze``) instead of
    being walked by the full collection its allocations would set off next: 75 ms after a
    jump on a million-event log, for nothing."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
        gc.enable()
