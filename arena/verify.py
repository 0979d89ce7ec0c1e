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
from dataclasses import dataclass

from ledger.anchor import format_head, head_problem, read_head
from ledger.errors import IntegrityError
from ledger.events import CohortClosed, OrderFilled, PositionRefunded, PositionSettled
from ledger.projection import Ledger
from ledger.snapshot import FORMAT, Snapshot, encode_state
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
    """Raise IntegrityError(seq=first bad event) if the log is not what the runs wrote."""
    checked = store.verify_chain()
    snapshots = store.snapshots()
    due: dict[int, list[Snapshot]] = defaultdict(list)
    for snapshot in snapshots:
        due[snapshot.seq].append(snapshot)
    ledger = Ledger()
    closed = 0
    for seq, stream, _version, event in store.read_with_seq():
        if event.cohort != stream:
            raise _bad(store, seq, f"claims cohort {event.cohort} in stream {stream}")
        state = ledger.cohorts.get(event.cohort)
        if state is not None and state.closed is not None:
            raise _bad(store, seq, f"follows the close of cohort {event.cohort}")
        if isinstance(event, OrderFilled | PositionSettled | PositionRefunded):
            if state is None or event.agent not in state.books:
                raise _bad(store, seq, f"trades for an unknown agent {event.agent}")
            book = state.books[event.agent]
            if isinstance(event, OrderFilled) and abs(book.cash - event.cash_before) > TOLERANCE:
                raise _bad(
                    store,
                    seq,
                    f"starts a fill from cash {event.cash_before} but the log implies {book.cash}",
                )
            if (
                not (isinstance(event, OrderFilled) and event.kind == "buy")
                and (event.market, event.side) not in book.positions
            ):
                raise _bad(store, seq, "names a position that is not open")
        try:
            ledger.apply(event)
        except (KeyError, ValueError, TypeError) as exc:
            raise _bad(store, seq, f"does not fit the events before it: {exc}") from None
        if isinstance(event, CohortClosed) and event.state_digest:
            closed += 1
            if ledger.cohorts[event.cohort].digest() != event.state_digest:
                raise _bad(
                    store,
                    seq,
                    f"closes cohort {event.cohort}, which rebuilds to a different state than "
                    "the run recorded at its close",
                )
        for snapshot in due.get(seq, ()):
            _check_position(store, snapshot, checked)
            if snapshot.closing != isinstance(event, CohortClosed):
                kind = "a closing record" if snapshot.closing else "not a closing record"
                raise _bad_snapshot(store, snapshot, f"is {kind}, but event {seq} says otherwise")
            if encode_state(ledger.cohorts[stream]) != snapshot.state:
                raise _bad_snapshot(store, snapshot, "disagrees with the fold of the log there")
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
