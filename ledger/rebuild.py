"""Rebuilding every projection from the log, fast.

The store hands out each page of the log as one JSON array (joined by SQLite in C), decoded in
one call into ``projection.FoldEvent``: the full events, except that orders placed and
decisions made, which the fold only counts, decode to the few facts it reads and skip the
rest of their JSON. Then every event is folded in log order through the same
``CohortState.apply`` the live run used, so the result equals a plain event-by-event fold
exactly (the tests compare snapshots).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ledger.projection import CohortState, FoldEvent, Ledger
from ledger.store import EventStore

_page_decoder: msgspec.json.Decoder[list[FoldEvent]] = msgspec.json.Decoder(list[FoldEvent])


def rebuild(
    store: EventStore, streams: Iterable[str] | None = None, batch: int = 100_000
) -> Ledger:
    """The projections of every cohort (or of the given cohort streams), folded from the log,
    ``batch`` events a page."""
    ledger = Ledger()
    cohorts = ledger.cohorts
    name = ""
    state: CohortState | None = None
    pages = (
        store.payload_arrays(batch=batch)
        if streams is None
        else (page for stream in streams for page in store.payload_arrays(stream, batch))
    )
    for page in pages:
        for event in _page_decoder.decode(page):
            if event.cohort != name:
                name = event.cohort
                state = cohorts.get(name)
                if state is None:
                    state = cohorts[name] = CohortState(name)
            assert state is not None
            state.apply(event)
    return ledger
