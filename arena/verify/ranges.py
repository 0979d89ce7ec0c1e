"""One seq range of ``arena verify``: its chain and its checking fold, in one read of the log.

``python -m arena.verify.ranges DB AFTER THROUGH`` checks events ``AFTER`` < seq <= ``THROUGH``
in a process of its own and prints the answer as msgpack (:class:`RangeAnswer`); ``arena
verify`` checks one range itself and the others so, a core each (see :mod:`arena.verify.log`).

The range is read a page at a time by :class:`ledger.chain.ChainCursor`, which checks each
page's links and hands its payloads on; those the fold has a handler for are decoded in one call
and folded in log order, each against the state the ones before it built (:func:`_fold_page`).
Pages end at every snapshot's seq, so the fold there is compared with the snapshot, and
before every stream's first event, so that cohorts written one after another (a replay's or a
sweep's) give pages of one stream, whose links are checked without a Python step per row.

A range that starts after the first event starts from the snapshot taken there: ``verify`` cuts
the log only at a snapshot that no other stream runs across, and the range before compares its
own fold with that snapshot. So when every range passes, the fold from the first event to the
last passes, snapshot by snapshot, as one pass would; when one fails, its fault is the one a
single pass finds first, or one at a later seq of another range (the earliest is reported).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from functools import partial
from itertools import compress, groupby, islice
from typing import cast

import msgspec

from ledger.chain import ChainCursor, folded_between, link_rows, stream_ids_between, stream_spans
from ledger.errors import IntegrityError, LedgerError
from ledger.events import CohortClosed, OrderFilled, PositionRefunded, PositionSettled
from ledger.projection import HANDLERS, IGNORED_BY_FOLD, CohortState, FoldEvent
from ledger.rebuild import cycle_collector_paused, read_ahead
from ledger.snapshot import FORMAT, Snapshot, SnapshotError, decode_state, encode_state
from ledger.store import EventStore

PAGE = 100_000
"""Events a page: one read, one chain comparison and one decode call each."""
TOLERANCE = 1e-9

_page_decoder: msgspec.json.Decoder[list[FoldEvent]] = msgspec.json.Decoder(list[FoldEvent])
_SKIPPED = tuple(f'{{"type":"{t}",'.encode() for t in sorted(IGNORED_BY_FOLD))
"""Whether a payload is of a type the fold has no handler for (``OrderPlaced``, nearly half of a
trading log): the encoder writes the tag first, as ``EventStore.payload_arrays`` relies on too.
Those are neither joined nor decoded."""

Position = tuple[tuple[str, int, bytes] | None, str | None]
"""What the log holds at a snapshot's seq: ``EventStore.event_at`` and ``type_at`` there."""


class Fault(msgspec.Struct, frozen=True):
    """A fault a range found, as it crosses a process boundary: an IntegrityError (with its
    seq) or another LedgerError (an unreadable event)."""

    message: str
    seq: int | None
    integrity: bool

    @classmethod
    def of(cls, exc: LedgerError) -> Fault:
        if isinstance(exc, IntegrityError):
            return cls(str(exc), exc.seq, True)
        return cls(str(exc), None, False)

    def error(self) -> LedgerError:
        return (
            IntegrityError(self.message, self.seq) if self.integrity else LedgerError(self.message)
        )


@dataclass
class RangeResult:
    """What a range found: links checked, closes that matched their recorded digest, the
    chain's fault (the range stops there), the fold's earliest fault, and the states it ends
    with; ``saved`` names those equal to a stored snapshot of their last event (compared
    there), so a child need not send them back."""

    checked: int = 0
    closed: int = 0
    chain_fault: Fault | None = None
    fold_fault: Fault | None = None
    states: dict[str, CohortState] = field(default_factory=dict)
    saved: set[str] = field(default_factory=set)

    def outcome(self, continued: str | None = None) -> Outcome:
        """What the range tells ``verify``; ``continued``, the stream the next range goes on
        with, is left out (that range ends with it)."""
        ends = {n: s.closed is not None for n, s in self.states.items() if n != continued}
        unsaved = {n: self.states[n] for n in ends if n not in self.saved}
        return Outcome(self.checked, self.closed, self.chain_fault, self.fold_fault, ends, unsaved)


@dataclass(frozen=True)
class Outcome:
    """A range's answer to ``verify``: links checked, closes that matched, its faults, every
    cohort it ends with and whether it closed, and the states no stored snapshot holds."""

    checked: int
    closed: int
    chain_fault: Fault | None
    fold_fault: Fault | None
    ends: dict[str, bool]
    unsaved: dict[str, CohortState]


class RangeAnswer(msgspec.Struct, frozen=True):
    """A :class:`RangeResult` as a child process prints it: every cohort it ends with and
    whether it closed, and as snapshot images only the states no stored snapshot holds (a
    sweep's log holds thousands of closed cohorts; their states are not sent). The stream the
    next range goes on with is left out: that range ends with it."""

    checked: int
    closed: int
    chain_fault: Fault | None
    fold_fault: Fault | None
    ends: dict[str, bool]
    unsaved: dict[str, bytes]

    @classmethod
    def of(cls, outcome: Outcome) -> RangeAnswer:
        unsaved = {n: encode_state(s) for n, s in outcome.unsaved.items()}
        return cls(
            outcome.checked, outcome.closed, outcome.chain_fault, outcome.fold_fault,
            outcome.ends, unsaved,
        )  # fmt: skip

    def outcome(self) -> Outcome:
        unsaved = {n: decode_state(image) for n, image in self.unsaved.items()}
        return Outcome(
            self.checked, self.closed, self.chain_fault, self.fold_fault, self.ends, unsaved
        )


class _Misfit(Exception):
    """An event the checking fold refused."""


def positions_of(store: EventStore, snapshots: Iterable[Snapshot]) -> dict[int, Position]:
    """What the log holds at each snapshot's seq."""
    return {s.seq: (store.event_at(s.seq), store.type_at(s.seq)) for s in snapshots}


def check_range(
    store: EventStore,
    after: int,
    through: int,
    snapshots: list[Snapshot],
    positions: dict[int, Position],
    last_seq: int,
    *,
    links: bool = True,
) -> RangeResult:
    """Check the chain and fold events ``after`` < seq <= ``through``, comparing every snapshot
    taken in the range; a range after the first event starts from the snapshot at ``after``.
    Without ``links`` the chain is left to another process (:func:`check_links`)."""
    result = RangeResult()
    states, saved = result.states, result.saved
    at: dict[int, list[Snapshot]] = {}
    for snapshot in snapshots:
        if after < snapshot.seq <= through:
            at.setdefault(snapshot.seq, []).append(snapshot)
        elif after and snapshot.seq == after:
            try:
                states[snapshot.stream] = decode_state(snapshot.state)
                saved.add(snapshot.stream)
            except SnapshotError as exc:
                bad = _bad_snapshot(store, snapshot, f"is unreadable: {exc}")
                result.fold_fault = Fault.of(bad)
                return result
    cursor = ChainCursor(store, after)
    starts = {first - 1 for first, _ in stream_spans(store).values()}  # a page per cohort
    pages = {*range(after + PAGE, through, PAGE), *at, through}
    cuts = sorted(pages | {seq for seq in starts if after < seq < through})
    broken: set[str] = set()
    faults: list[LedgerError] = []
    try:
        with cycle_collector_paused():
            source = _checked(cursor, after, cuts) if links else _unchecked(store, after, cuts)
            for page in read_ahead(source):
                result.checked = page.through - after if links else 0
                try:
                    events = _page_decoder.decode(page.events)
                except msgspec.MsgspecError:
                    raise _unreadable(store, page.after, page.through) from None
                closed, misfits = _fold_page(states, events, page.streams, broken, cursor)
                if events:
                    streams = page.streams
                    saved.difference_update([streams] if isinstance(streams, str) else streams)
                result.closed += closed
                if misfits:
                    seqs = page.seqs()
                    faults += [_bad(store, seqs[index], what) for index, what in misfits]
                for snapshot in at.get(page.through, []):
                    if snapshot.stream in broken:
                        continue
                    state = states.setdefault(snapshot.stream, CohortState(snapshot.stream))
                    try:
                        check_snapshot(store, snapshot, state, positions[snapshot.seq], last_seq)
                        saved.add(snapshot.stream)
                    except IntegrityError as exc:
                        faults.append(exc)
                        broken.add(snapshot.stream)
    except IntegrityError as exc:  # only the chain raises here: the range stops
        result.chain_fault = Fault.of(exc)
        return result
    except LedgerError as exc:  # an unreadable event: nothing after it can be folded
        faults.append(exc)
    if faults:
        result.fold_fault = Fault.of(min(faults, key=_seq))
    return result


@dataclass(frozen=True)
class _Page:
    """Events ``after`` < seq <= ``through`` for the fold: those of types it has a handler for,
    as one JSON array, the stream of each (one key for a page of one stream), and their seqs,
    read only on the way to an error."""

    after: int
    through: int
    events: bytes
    streams: str | list[str]
    seqs: Callable[[], list[int]]


def _checked(cursor: ChainCursor, after: int, cuts: list[int]) -> Generator[_Page, None, None]:
    """Each page with its links checked (the cursor's read), its folded payloads joined here."""
    lo = after
    for hi in cuts:
        payloads, streams = cursor.page(hi)
        folded = [not payload.startswith(_SKIPPED) for payload in payloads]
        events = b"[" + b",".join(compress(payloads, folded)) + b"]"
        if not isinstance(streams, str):
            streams = list(compress(streams, folded))
        seqs = partial(_kept, range(lo + 1, hi + 1), folded)
        yield _Page(lo, hi, events, streams, seqs)
        lo = hi


def _unchecked(store: EventStore, after: int, cuts: list[int]) -> Generator[_Page, None, None]:
    """Each page as SQLite joins its folded payloads, the types the fold skips left out there,
    for a fold whose chain another process checks."""
    keys = store.stream_keys()
    lo = after
    for hi in cuts:
        events, low, high = folded_between(store, lo, hi, IGNORED_BY_FOLD)
        streams: str | list[str]
        if low is not None and low == high:
            streams = keys.get(low, f"#{low}")
        else:
            ids = stream_ids_between(store, lo, hi, IGNORED_BY_FOLD)
            streams = [keys.get(sid, f"#{sid}") for sid in ids]
        seqs = partial(stream_ids_between, store, lo, hi, IGNORED_BY_FOLD, column="seq")
        yield _Page(lo, hi, events, streams, seqs)
        lo = hi


def _kept(seqs: range, folded: list[bool]) -> list[int]:
    return list(compress(seqs, folded))


def _fold_page(
    states: dict[str, CohortState],
    events: list[FoldEvent],
    streams: str | list[str],
    broken: set[str],
    cursor: ChainCursor,
) -> tuple[int, list[tuple[int, str]]]:
    """Fold one page, run by run of one stream; returns how many closes matched their
    recorded digest and ``(index, what)`` for each event refused. A stream with a refused event
    is broken: the rest of it is not folded (its state no longer means anything)."""
    if isinstance(streams, str):
        runs = [(streams, len(events))] if events else []  # skipped types only: no state
    else:
        runs = [(stream, len(list(run))) for stream, run in groupby(streams)]
    closed = 0
    misfits: list[tuple[int, str]] = []
    start = 0
    for stream, n in runs:
        end, first = start + n, start
        start = end
        if stream in broken:
            continue
        state = states.get(stream)
        if state is None:
            state = states[stream] = CohortState(stream)
            if cursor.version_before_start(stream):  # a cut the plan should not make
                misfits.append((first, f"continues cohort {stream} across a cut"))
                broken.add(stream)
                continue
        matched, misfit = _fold_run(state, islice(events, first, end), first)
        closed += matched
        if misfit is not None:
            misfits.append(misfit)
            broken.add(stream)
    return closed, misfits


def _fold_run(
    state: CohortState, events: Iterable[FoldEvent], first: int
) -> tuple[int, tuple[int, str] | None]:
    """Fold events of one stream (the first at page index ``first``) with the checks inline,
    up to the first it refuses; returns the closes that matched their digest and the refusal."""
    handlers = HANDLERS
    stream = state.cohort
    ended = state.closed is not None
    closed = 0
    for index, event in enumerate(events, first):
        try:
            if event.cohort != stream:
                raise _Misfit(f"claims cohort {event.cohort} in stream {stream}")
            if ended:
                raise _Misfit(f"follows the close of cohort {stream}")
            kind = type(event)  # compared by identity: isinstance costs a fifth of the loop
            if kind is OrderFilled:  # the common case inline; _check_trade words it
                fill = cast(OrderFilled, event)
                book = state.books.get(fill.agent)
                if (
                    book is None
                    or abs(book.cash - fill.cash_before) > TOLERANCE
                    or (fill.kind != "buy" and (fill.market, fill.side) not in book.positions)
                ):
                    _check_trade(state, fill)
            elif kind is PositionSettled or kind is PositionRefunded:
                _check_trade(state, cast(PositionSettled | PositionRefunded, event))
            try:
                handlers[kind](state, event)
            except (KeyError, ValueError, TypeError) as exc:
                raise _Misfit(f"does not fit the events before it: {exc}") from None
            if kind is CohortClosed:
                ended = True
                digest = cast(CohortClosed, event).state_digest
                if digest:
                    closed += 1
                    if state.digest() != digest:
                        raise _Misfit(
                            f"closes cohort {stream}, which rebuilds to a different state "
                            "than the run recorded at its close"
                        )
        except _Misfit as misfit:
            return closed, (index, str(misfit))
    return closed, None


def _check_trade(
    state: CohortState, event: OrderFilled | PositionSettled | PositionRefunded
) -> None:
    """A fill must start from the cash the log implies; a sale or payout must find the
    position it names."""
    book = state.books.get(event.agent)
    if book is None:
        raise _Misfit(f"trades for an unknown agent {event.agent}")
    buy = isinstance(event, OrderFilled) and event.kind == "buy"
    if isinstance(event, OrderFilled) and abs(book.cash - event.cash_before) > TOLERANCE:
        raise _Misfit(
            f"starts a fill from cash {event.cash_before} but the log implies {book.cash}"
        )
    if not buy and (event.market, event.side) not in book.positions:
        raise _Misfit("names a position that is not open")


def check_snapshot(
    store: EventStore, snapshot: Snapshot, state: CohortState, position: Position, last: int
) -> None:
    """The snapshot is whole, where it says, and byte for byte the image of ``state``, the
    fold at its position."""
    at, kind = position
    check_position(store, snapshot, at, last)
    if snapshot.closing != (kind == "CohortClosed"):
        what = "a closing record" if snapshot.closing else "not a closing record"
        raise _bad_snapshot(store, snapshot, f"is {what}, but event {snapshot.seq} says otherwise")
    image = encode_state(state)
    if snapshot.state == image:
        return
    try:  # through a decode, so both sides hold the log's types (an int volume is 500.0)
        same = encode_state(decode_state(snapshot.state)) == image
    except SnapshotError as exc:
        raise _bad_snapshot(store, snapshot, f"is unreadable: {exc}") from None
    if not same:
        raise _bad_snapshot(store, snapshot, "disagrees with the fold of the log there")


def check_position(
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


def _unreadable(store: EventStore, after: int, through: int) -> LedgerError:
    """The error for a page that did not decode, naming its first unreadable event (read
    again, row by row: on the way to an error only)."""
    for seq, (payload, _) in enumerate(link_rows(store, after, through), after + 1):
        if payload.startswith(_SKIPPED):
            continue
        try:
            _page_decoder.decode(b"[" + payload + b"]")
        except msgspec.MsgspecError as exc:
            return LedgerError(f"{store.path}: event {seq} is not a readable event ({exc})")
    return LedgerError(f"{store.path}: the log holds an unreadable event")


def _seq(error: LedgerError) -> int:
    return (error.seq or 0) if isinstance(error, IntegrityError) else 0


def _bad(store: EventStore, seq: int, what: str) -> IntegrityError:
    """Worded like the store's own chain errors: the file, then the event."""
    return IntegrityError(f"{store.path}: event {seq} {what}", seq)


def _bad_snapshot(store: EventStore, snapshot: Snapshot, what: str) -> IntegrityError:
    return IntegrityError(f"{store.path}: {snapshot.name} {what}", snapshot.seq)


def check_links(store: EventStore, after: int, through: int) -> Outcome:
    """Only the chain of events ``after`` < seq <= ``through``: what a child checks beside a
    fold that cannot be cut (see ``arena.verify.log``)."""
    cursor = ChainCursor(store, after)
    try:
        for through_page in sorted({*range(after + PAGE, through, PAGE), through}):
            cursor.page(through_page)
    except IntegrityError as exc:
        return Outcome(cursor.last - after, 0, Fault.of(exc), None, {}, {})
    return Outcome(through - after, 0, None, None, {}, {})


def main(argv: list[str]) -> None:
    """The child process: check one range (or with ``--links`` only its chain) and print its
    :class:`RangeAnswer` as msgpack. Its own faults come back in the answer; anything else
    ends it, and ``verify`` checks the range itself instead."""
    path, after, through = argv[0], int(argv[1]), int(argv[2])
    with EventStore.open(path, readonly=True) as store:
        if argv[3:] == ["--links"]:
            outcome = check_links(store, after, through)
        else:
            snapshots = store.snapshots()
            mine = [s for s in snapshots if after <= s.seq <= through]
            result = check_range(
                store, after, through, snapshots, positions_of(store, mine), store.last_seq()
            )
            outcome = result.outcome(next((s.stream for s in snapshots if s.seq == through), None))
    sys.stdout.buffer.write(msgspec.msgpack.encode(RangeAnswer.of(outcome)))


if __name__ == "__main__":
    main(sys.argv[1:])
