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
from collections.abc import Callable, Iterator
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

    The chain is checked in a second process while this one folds (for a log big enough to pay
    for starting one), so the two cost the time of the slower, not of both. A broken chain is
    reported before anything the fold found, as it is the more basic fault.
    """
    damage = store.damage()
    if damage is not None:
        raise IntegrityError(f"{store.path}: the SQLite file is damaged: {damage}")
    snapshots = store.snapshots()
    due: dict[int, list[Snapshot]] = defaultdict(list)
    for snapshot in snapshots:
        due[snapshot.seq].append(snapshot)
    last_seq = store.last_seq()
    fold_error: LedgerError | None = None
    with _chain_checker(store, last_seq) as chain:
        try:
            ledger, closed = _checking_fold(store, due, last_seq)
        except LedgerError as exc:
            fold_error = exc
        checked = chain()
    if fold_error is not None:
        raise fold_error
    for snapshot in (s for s in snapshots if s.seq > checked):
        _check_position(store, snapshot, checked)  # past the end: names the cut
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


_positioned: msgspec.json.Decoder[list[tuple[int, int, FoldEvent]]] = msgspec.json.Decoder(
    list[tuple[int, int, FoldEvent]]
)


def _checking_fold(
    store: EventStore, due: dict[int, list[Snapshot]], last_seq: int
) -> tuple[Ledger, int]:
    """Fold every event that changes state, in log order, each checked against the state the
    ones before it built; returns the projections and how many closes matched their digest.

    It reads the log as the fast rebuild does (pages decoded in one call, ``OrderPlaced`` and
    types without a handler left out by SQLite) with each event's seq and stream, and calls
    the fold's handlers directly: the same fold the live run used, with the checks inline.
    """
    keys = store.stream_keys()
    ledger = Ledger()
    cohorts = ledger.cohorts
    handlers = HANDLERS
    closed = 0
    current, stream = -1, ""
    state = CohortState("")
    pages = store.payload_arrays(skip=IGNORED_BY_FOLD, positions=True)
    with cycle_collector_paused():
        for page in read_ahead(pages):
            try:
                rows = _positioned.decode(page)
            except msgspec.MsgspecError as exc:
                raise unreadable(store, None, exc) from None
            for seq, stream_id, event in rows:
                if stream_id != current:
                    current, stream = stream_id, keys.get(stream_id, f"#{stream_id}")
                    state = cohorts.get(stream) or cohorts.setdefault(stream, CohortState(stream))
                if event.cohort != stream:
                    raise _bad(store, seq, f"claims cohort {event.cohort} in stream {stream}")
                if state.closed is not None:
                    raise _bad(store, seq, f"follows the close of cohort {stream}")
                kind = type(event)
                if isinstance(event, OrderFilled):  # the common case inline; _check_trade words it
                    book = state.books.get(event.agent)
                    if (
                        book is None
                        or abs(book.cash - event.cash_before) > TOLERANCE
                        or (
                            event.kind != "buy" and (event.market, event.side) not in book.positions
                        )
                    ):
                        _check_trade(store, seq, state, event)
                elif isinstance(event, PositionSettled | PositionRefunded):
                    _check_trade(store, seq, state, event)
                try:
                    handlers[kind](state, event)
                except (KeyError, ValueError, TypeError) as exc:
                    raise _bad(store, seq, f"does not fit the events before it: {exc}") from None
                if isinstance(event, CohortClosed) and event.state_digest:
                    closed += 1
                    if state.digest() != event.state_digest:
                        raise _bad(
                            store,
                            seq,
                            f"closes cohort {stream}, which rebuilds to a different state than "
                            "the run recorded at its close",
                        )
                if seq in due:
                    _check_snapshots(store, due[seq], state, kind is CohortClosed, last_seq)
    return ledger, closed


def _check_trade(
    store: EventStore,
    seq: int,
    state: CohortState,
    event: OrderFilled | PositionSettled | PositionRefunded,
) -> None:
    """A fill must start from the cash the log implies; a sale or payout must find the
    position it names."""
    book = state.books.get(event.agent)
    if book is None:
        raise _bad(store, seq, f"trades for an unknown agent {event.agent}")
    buy = isinstance(event, OrderFilled) and event.kind == "buy"
    if isinstance(event, OrderFilled) and abs(book.cash - event.cash_before) > TOLERANCE:
        raise _bad(
            store,
            seq,
            f"starts a fill from cash {event.cash_before} but the log implies {book.cash}",
        )
    if not buy and (event.market, event.side) not in book.positions:
        raise _bad(store, seq, "names a position that is not open")


def _check_snapshots(
    store: EventStore, snapshots: list[Snapshot], state: CohortState, closing: bool, last: int
) -> None:
    for snapshot in snapshots:
        _check_position(store, snapshot, last)
        if snapshot.closing != closing:
            kind = "a closing record" if snapshot.closing else "not a closing record"
            raise _bad_snapshot(
                store, snapshot, f"is {kind}, but event {snapshot.seq} says otherwise"
            )
        try:  # through a decode, so both sides hold the log's types (an int volume is 500.0)
            image = encode_state(decode_state(snapshot.state))
        except SnapshotError as exc:
            raise _bad_snapshot(store, snapshot, f"is unreadable: {exc}") from None
        if image != encode_state(state):
            raise _bad_snapshot(store, snapshot, "disagrees with the fold of the log there")


_PARALLEL_FROM = 200_000
"""Events from which the chain is checked in a second process: starting one costs about
0.1-0.2 s, what checking 100-200k links costs."""


@contextmanager
def _chain_checker(store: EventStore, last_seq: int) -> Iterator[Callable[[], int]]:
    """A function that returns how many links the chain check verified (or raises its
    IntegrityError); started in a child process before the fold when the log is big."""
    yield store.verify_chain if last_seq < _PARALLEL_FROM else chain.start(store)


def _check_position(store: EventStore, snapshot: Snapshot, last_seq: int) -> None:
    """What needs no fold: the row is whole and of this arena's format, and its position still
    holds the event and chain hash it was taken at (a cut or re-chained log fails here)."""
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
    if store.event_at(snapshot.seq) != (snapshot.stream, snapshot.version, snapshot.chain_hash):
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
