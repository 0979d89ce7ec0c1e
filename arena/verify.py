"""``arena verify``: prove a log was not altered and that its projections rebuild exactly.

Two independent checks: the hash chain (any edited, inserted or deleted row breaks a link),
and a checking fold, which replays every event against the state built from the ones before it:
a fill must start from the cash the log implies, a sale or payout must find the position it
names, and a closed cohort must rebuild to the state digest its run recorded at the close.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import IntegrityError
from ledger.events import CohortClosed, OrderFilled, PositionRefunded, PositionSettled
from ledger.projection import Ledger
from ledger.store import EventStore

TOLERANCE = 1e-9


@dataclass(frozen=True)
class VerifyResult:
    events: int
    cohorts: int
    closed: int


def verify_store(store: EventStore) -> VerifyResult:
    """Raise IntegrityError(seq=first bad event) if the log is not what the runs wrote."""
    checked = store.verify_chain()
    ledger = Ledger()
    closed = 0
    for seq, stream, _version, event in store.read_with_seq():
        if event.cohort != stream:
            raise _bad(store, seq, f"claims cohort {event.cohort} in stream {stream}")
        state = ledger.cohorts.get(event.cohort)
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
    return VerifyResult(events=checked, cohorts=len(ledger.cohorts), closed=closed)


def _bad(store: EventStore, seq: int, what: str) -> IntegrityError:
    """Worded like the store's own chain errors: the file, then the event."""
    return IntegrityError(f"{store.path}: event {seq} {what}", seq)
