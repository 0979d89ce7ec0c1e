"""``arena verify``: prove a log was not altered, cut or extended, and that it rebuilds exactly.

The checks, each of which names the first bad sequence number:

* the hash chain: any edited, inserted or deleted row breaks a link;
* a checking fold, which replays every event against the state built from the ones before it:
  a fill must start from the cash the log implies, a sale or payout must find the position it
  names, nothing may follow a cohort's close, and a closed cohort must rebuild to the state
  digest its run recorded at the close;
* every stored snapshot: whole, at a position that still holds the event and chain hash it was
  taken at, and byte for byte the image of this fold at that position. Closing snapshots are
  the per-cohort closing records: a log cut before one, or re-chained under it, fails here;
* the head (``--head``, or the one recorded beside the log): nothing cut off, nothing appended.

Cohorts that never closed are named (an interrupted replay leaves one; so does a cut).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import msgspec

from ledger import chain
from ledger.anchor import format_head, head_problem, read_head
from ledger.errors import IntegrityError, LedgerError
from ledger.events import CohortClosed, OrderFilled, PositionRefunded, PositionSettled
from ledger.projection import HANDLERS, IGNORED_BY_FOLD, CohortState, FoldEvent, Ledger
from ledger.rebuild import cycle_collector_paused, read_ahead, unreadable
from ledger.snapshot import FORMAT, Snapshot, SnapshotError, decode_state, encode_state
from ledger.store import EventStore

TOLERANCE = 1e-9


@dataclass(frozen=True)
class VerifyResult:
    events: int
    cohorts: int
    closed: int
    snapshots: int
    open_cohorts: list[str]
    head: str  # the log's head as SEQ:HASH
    head_source: str | None  # what the head was checked against ("--head", the file), if any
    ledger: Ledger  # the fold, at the end of the log


def write_snapshots(store: EventStore, result: VerifyResult) -> int:
    """Add the snapshots a log lacks, from a verified fold, without touching an event: a
    closing snapshot for every closed cohort without one, and one at the end of every open
    cohort. Returns how many were written (a log written before snapshots gets them all)."""
    have = {(s.stream, s.version) for s in store.snapshots()}
    written = 0
    for name, state in sorted(result.ledger.cohorts.items()):
        version = store.stream_version(name)
        if (name, version) not in have:
            written += store.add_snapshot(
                name, version, encode_state(state), fmt=FORMAT, closing=state.closed is not None
            )
    return written


def verify_store(store: EventStore, head: str | None = None) -> VerifyResult:
    """Raise IntegrityError(seq=first bad event) if the log is not what the runs wrote.

    For a log big enough to pay for starting processes, the chain is checked in child
    processes, one seq range each, and SQLite's check of the file's structure runs on a thread
    of its own (it releases the GIL), while this thread folds: the three cost about the time
    of the slowest, not of all. Faults are reported by kind, the most basic first: a damaged
    file, then a broken chain, then what the fold found.
    """
    snapshots = store.snapshots()
    last_seq = store.last_seq()
    positions = {s.seq: (store.event_at(s.seq), store.type_at(s.seq)) for s in snapshots}
    fold_error: LedgerError | None = None
    with _chain_checker(store, last_seq) as chain, _damage_checker(store, last_seq) as damage:
        try:
            ledger, closed = _checking_fold(store, snapshots, positions, last_seq)
        except LedgerError as exc:
            fold_error = exc
        found = damage()
        if found is not None:
            raise IntegrityError(f"{store.path}: the SQLite file is damaged: {found}")
        checked = chain()
    if fold_error is not None:
        raise fold_error
    streams = set(ledger.cohorts)
    for snapshot in snapshots:
        if snapshot.seq > checked or snapshot.stream not in streams:  # the fold never got there:
            _check_position(store, snapshot, positions[snapshot.seq][0], checked)  # names why
    expected, source = (head, "--head") if head else (read_head(store.path), "head file")
    if expected:
        problem = head_problem(store, expected)
        if problem:
            raise IntegrityError(f"{store.path}: {problem} ({source})", store.head()[0])
    return VerifyResult(
        events=checked,
        cohorts=len(ledger.cohorts),
        closed=closed,
        snapshots=len(snapshots),
        open_cohorts=sorted(n for n, s in ledger.cohorts.items() if s.closed is None),
        head=format_head(*store.head()),
        head_source=source if expected else None,
        ledger=ledger,
    )


_decoder: msgspec.json.Decoder[list[FoldEvent]] = msgspec.json.Decoder(list[FoldEvent])
_positioned: msgspec.json.Decoder[list[tuple[int, int, FoldEvent]]] = msgspec.json.Decoder(
    list[tuple[int, int, FoldEvent]]
)

Position = tuple[tuple[str, int, bytes] | None, str | None]
"""What the log holds at a snapshot's seq: ``EventStore.event_at`` and ``type_at`` there."""


@dataclass(frozen=True)
class _Segment:
    """Events ``after`` < version <= ``through`` of one stream, and the snapshots taken at its
    end (the fold stops there to compare them)."""

    stream: str
    after: int
    through: int | None
    snapshots: list[Snapshot]


class _Misfit(Exception):
    """An event the checking fold refused; the caller finds its seq (it reads without them)."""

    def __init__(self, event: object, what: str) -> None:
        super().__init__(what)
        self.event = event
        self.what = what


def _segments(store: EventStore, snapshots: list[Snapshot]) -> Iterator[_Segment]:
    """Every stream, cut at the versions its snapshots were taken after."""
    at: dict[str, dict[int, list[Snapshot]]] = defaultdict(lambda: defaultdict(list))
    for snapshot in snapshots:
        at[snapshot.stream][snapshot.version].append(snapshot)
    for stream in store.streams():
        after = 0
        for version in sorted(at[stream]):
            yield _Segment(stream, after, version, at[stream][version])
            after = version
        yield _Segment(stream, after, None, [])


def _checking_fold(
    store: EventStore, snapshots: list[Snapshot], positions: dict[int, Position], last_seq: int
) -> tuple[Ledger, int]:
    """Fold every event that changes state, stream by stream, each checked against the state
    the ones before it built; returns the projections and how many closes matched their digest.

    It reads the log as the fast rebuild does (pages decoded in one call, ``OrderPlaced`` and
    types without a handler left out by SQLite, the next page read on a thread), one stream at
    a time in version order, so every event's stream is known without reading it per row; a
    stream stops at each of its snapshots' versions to compare them with the fold there. The
    seq of a refused event is found only then, by reading its segment again with positions.
    A cohort's fold depends on its own stream alone, so the order of streams changes nothing;
    when several streams hold faults, the one with the first seq is reported.
    """
    ledger = Ledger()
    cohorts = ledger.cohorts
    closed = 0
    faults: list[IntegrityError] = []
    broken: set[str] = set()
    segment: _Segment | None = None
    done = 0  # events of the segment folded before this page
    with cycle_collector_paused():
        for page_segment, page in read_ahead(_pages(store, snapshots)):
            if page_segment is not segment:
                segment, done = page_segment, 0
            stream = segment.stream
            if stream in broken:
                continue
            try:
                events = _decoder.decode(page)
            except msgspec.MsgspecError as exc:
                raise unreadable(store, [stream], exc) from None
            state = cohorts.get(stream)
            if state is None:
                if not events and not segment.snapshots:
                    continue  # a stream of events the fold skips only: no cohort state
                state = cohorts[stream] = CohortState(stream)
            try:
                closed += _fold_page(state, events)
                if page is _END:
                    _check_snapshots(store, segment.snapshots, state, positions, last_seq)
            except _Misfit as misfit:
                index = done + next(i for i, e in enumerate(events) if e is misfit.event)
                faults.append(_bad(store, _seq_of(store, segment, index), misfit.what))
                broken.add(stream)
            except IntegrityError as exc:
                faults.append(exc)
                broken.add(stream)
            done += len(events)
    if faults:
        raise min(faults, key=lambda e: e.seq or 0)
    return ledger, closed


_END = b"[]"
"""The page that ends a segment, after its last page of events."""


def _pages(
    store: EventStore, snapshots: list[Snapshot]
) -> Generator[tuple[_Segment, bytes], None, None]:
    """Each segment's pages of folded events, then ``_END``, so the fold knows where to
    compare the segment's snapshots."""
    for segment in _segments(store, snapshots):
        for page in store.payload_arrays(
            segment.stream,
            skip=IGNORED_BY_FOLD,
            after_version=segment.after,
            through_version=segment.through,
        ):
            yield segment, page
        yield segment, _END


def _fold_page(state: CohortState, events: list[FoldEvent]) -> int:
    """Fold one page of one stream with the checks inline; returns how many closes matched
    their recorded digest. Raises _Misfit for the first event that does not fit."""
    handlers = HANDLERS
    stream = state.cohort
    closed = 0
    for event in events:
        if event.cohort != stream:
            raise _Misfit(event, f"claims cohort {event.cohort} in stream {stream}")
        if state.closed is not None:
            raise _Misfit(event, f"follows the close of cohort {stream}")
        if isinstance(event, OrderFilled):  # the common case inline; _check_trade words it
            book = state.books.get(event.agent)
            if (
                book is None
                or abs(book.cash - event.cash_before) > TOLERANCE
                or (event.kind != "buy" and (event.market, event.side) not in book.positions)
            ):
                _check_trade(state, event)
        elif isinstance(event, PositionSettled | PositionRefunded):
            _check_trade(state, event)
        try:
            handlers[type(event)](state, event)
        except (KeyError, ValueError, TypeError) as exc:
            raise _Misfit(event, f"does not fit the events before it: {exc}") from None
        if isinstance(event, CohortClosed) and event.state_digest:
            closed += 1
            if state.digest() != event.state_digest:
                raise _Misfit(
                    event,
                    f"closes cohort {stream}, which rebuilds to a different state than the run "
                    "recorded at its close",
                )
    return closed


def _seq_of(store: EventStore, segment: _Segment, index: int) -> int:
    """The seq of the segment's ``index``-th folded event (on the way to an error only)."""
    seen = 0
    for page in store.payload_arrays(
        segment.stream,
        skip=IGNORED_BY_FOLD,
        after_version=segment.after,
        through_version=segment.through,
        positions=True,
    ):
        rows = _positioned.decode(page)
        if index < seen + len(rows):
            return rows[index - seen][0]
        seen += len(rows)
    raise AssertionError("the refused event is in its segment")


def _check_trade(
    state: CohortState, event: OrderFilled | PositionSettled | PositionRefunded
) -> None:
    """A fill must start from the cash the log implies; a sale or payout must find the
    position it names."""
    book = state.books.get(event.agent)
    if book is None:
        raise _Misfit(event, f"trades for an unknown agent {event.agent}")
    buy = isinstance(event, OrderFilled) and event.kind == "buy"
    if isinstance(event, OrderFilled) and abs(book.cash - event.cash_before) > TOLERANCE:
        raise _Misfit(
            event, f"starts a fill from cash {event.cash_before} but the log implies {book.cash}"
        )
    if not buy and (event.market, event.side) not in book.positions:
        raise _Misfit(event, "names a position that is not open")


def _check_snapshots(
    store: EventStore,
    snapshots: list[Snapshot],
    state: CohortState,
    positions: dict[int, Position],
    last: int,
) -> None:
    if not snapshots:
        return
    image = encode_state(state)
    for snapshot in snapshots:
        at, kind = positions[snapshot.seq]
        _check_position(store, snapshot, at, last)
        if snapshot.closing != (kind == "CohortClosed"):
            what = "a closing record" if snapshot.closing else "not a closing record"
            raise _bad_snapshot(
                store, snapshot, f"is {what}, but event {snapshot.seq} says otherwise"
            )
        if snapshot.state == image:
            continue
        try:  # through a decode, so both sides hold the log's types (an int volume is 500.0)
            same = encode_state(decode_state(snapshot.state)) == image
        except SnapshotError as exc:
            raise _bad_snapshot(store, snapshot, f"is unreadable: {exc}") from None
        if not same:
            raise _bad_snapshot(store, snapshot, "disagrees with the fold of the log there")


_PARALLEL_FROM = 200_000
"""Events from which the chain is checked in child processes and the file's structure on a
thread: starting a process costs about 0.1-0.2 s, what checking 100-200k links costs."""


@contextmanager
def _chain_checker(store: EventStore, last_seq: int) -> Iterator[Callable[[], int]]:
    """A function that returns how many links the chain check verified (or raises its
    IntegrityError); started in child processes before the fold when the log is big."""
    yield store.verify_chain if last_seq < _PARALLEL_FROM else chain.start(store)


@contextmanager
def _damage_checker(store: EventStore, last_seq: int) -> Iterator[Callable[[], str | None]]:
    """A function that returns SQLite's first complaint about the file (``EventStore.damage``)
    or None; for a big log it runs on a thread with a connection of its own, since SQLite
    releases the GIL while it walks the file (0.7 CPU-s for a million events)."""
    if last_seq < _PARALLEL_FROM:
        yield store.damage
        return

    def check() -> str | None:
        with EventStore.open(store.path, readonly=True) as own:
            return own.damage()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-damage") as worker:
        found = worker.submit(check)
        yield found.result


def _check_position(
    store: EventStore, snapshot: Snapshot, at: tuple[str, int, bytes] | None, last_seq: int
) -> None:
    """What needs no fold: the row is whole and of this arena's format, and its position
    (``at``, what the log holds at its seq) still holds the event and chain hash it was taken
    at (a cut or re-chained log fails here)."""
    if not snapshot.intact():
        raise _bad_snapshot(store, snapshot, "is damaged (its hash does not match it)")
    if snapshot.format != FORMAT:
        raise _bad_snapshot(
            store, snapshot, f"has format {snapshot.format}; this arena reads {FORMAT}"
        )
    if snapshot.seq > last_seq:
        raise _bad_snapshot(
            store, snapshot, f"is past the log's end at seq {last_seq}: events were cut"
        )
    if at != (snapshot.stream, snapshot.version, snapshot.chain_hash):
        raise _bad_snapshot(
            store,
            snapshot,
            "no longer matches the event it was taken after: the log was cut or rewritten",
        )


def _bad(store: EventStore, seq: int, what: str) -> IntegrityError:
    """Worded like the store's own chain errors: the file, then the event."""
    return IntegrityError(f"{store.path}: event {seq} {what}", seq)


def _bad_snapshot(store: EventStore, snapshot: Snapshot, what: str) -> IntegrityError:
    return IntegrityError(f"{store.path}: {snapshot.name} {what}", snapshot.seq)
