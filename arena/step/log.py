"""A finished log as ``arena step`` reads it: nothing more than the screen needs, when it needs it.

Reading a million-event log into memory and indexing it took seconds before the first screen
(measured by ``arena bench step``). Here opening costs one scan of SQLite for the *facts*
(``arena.step.timeline``: every event but the orders, fills, model calls and settlements that follow
a decision or a resolution), in which a decision is read as its agent and week only; the
events themselves are a sequence read a page at a time when a fold or a view asks for them,
each page's chain links and order checked before it is decoded (``ledger.restore.check_stream``,
as ``arena report`` checks the events it folds), and the log's snapshots are the timeline's
bases, restored and checked (``ledger.restore.usable_state``) only when a cut at or after one
is first shown. A page that fails its check stops the read with the seq where it fails.

Opening checks what is cheap to check of the whole log, as ``arena report`` does (the log ends
at its recorded head, the indexes agree with the tables, the cohort's last event links), and
the end of a closed cohort is the state ``ledger.restore.load`` proves there: the one the
cohort's close recorded (restored from the closing snapshot, or folded when there is none to
use). A snapshot taken while the cohort was open is checked where it stands (its position in
the chain, its cohort, not closed before the end), but only a fold from the first event proves
its contents, which ``arena verify`` does: a cut past one is shown from it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Union, overload

import msgspec

from arena.step.timeline import FOLD_CHUNK, TAIL_TYPES, Decided, Fact, LogTimeline, Restore
from ledger.chain import checked_payloads
from ledger.errors import IntegrityError, LedgerError
from ledger.events import EVENT_TYPES, AnyEvent, Event, PromptStored
from ledger.projection import IGNORED_BY_FOLD, CohortState, FoldEvent
from ledger.restore import (
    StreamEnd,
    check_log,
    check_order,
    check_stream,
    load,
    stream_ends,
    usable_state,
)
from ledger.snapshot import Snapshot
from ledger.store import EventStore

PAGES_KEPT = 256
"""Decoded pages kept (of ``FOLD_CHUNK`` events): a quarter of a million-event log, enough
for a view's decision and what followed it and for stepping around one place."""

_pages_decoder = msgspec.json.Decoder(list[AnyEvent])
_fold_decoder = msgspec.json.Decoder(list[FoldEvent])
_UNFOLDED = tuple(f'{{"type":"{name}",'.encode() for name in sorted(IGNORED_BY_FOLD))
"""The leading bytes of the payloads the fold passes by (every payload begins with its tag)."""


class LogEvents(Sequence[Event]):
    """One cohort's events in a store, in order (index ``i`` is its version ``i + 1``), each
    page read, checked and decoded when first asked for and kept while recently used."""

    def __init__(self, store: EventStore, cohort: str, end: StreamEnd | None = None) -> None:
        self._store, self._cohort = store, cohort
        self._length = end.version if end is not None else store.stream_version(cohort)
        self._pages: OrderedDict[int, list[Event]] = OrderedDict()
        self._checked: set[int] = set()
        self.pages_read = 0
        """Pages read from SQLite so far, whole or as a fold reads them (a page read again
        counts again)."""

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, k: int) -> Event: ...
    @overload
    def __getitem__(self, k: slice) -> list[Event]: ...
    def __getitem__(self, k: int | slice) -> Event | list[Event]:
        if isinstance(k, slice):
            start, stop, step = k.indices(self._length)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            out: list[Event] = []
            while start < stop:
                page = self._page(start // FOLD_CHUNK)
                first = start % FOLD_CHUNK
                out += page[first : first + stop - start]
                start += len(page) - first
            return out
        i = range(self._length)[k]  # negative indices, and IndexError past the end
        return self._page(i // FOLD_CHUNK)[i % FOLD_CHUNK]

    def __iter__(self) -> Iterator[Event]:
        for p in range(0, self._length, FOLD_CHUNK):
            yield from self._page(p // FOLD_CHUNK)

    def fold_events(self, low: int, high: int) -> list[FoldEvent]:
        """Events ``low`` to ``high`` (exclusive) as a fold reads them, every link checked, in
        one read of each row: what moving the state on needs, not what a view shows. The
        orders placed and the record-only events are left out, a decision is decoded to the
        facts the fold counts (``ledger.projection.FoldEvent``), and a page already checked
        is not hashed again (SQLite leaves the passed-by types out itself then). Measured on a
        million-event log (``arena bench step``, a cold jump): about 4.5 µs an event against
        7 for reading, checking and decoding the pages whole."""
        pages = range(low // FOLD_CHUNK, (high - 1) // FOLD_CHUNK + 1) if high > low else ()
        self.pages_read += len(pages)
        if all(p in self._checked for p in pages):
            joined = self._store.payload_arrays(
                self._cohort, high - low, skip=IGNORED_BY_FOLD, after_version=low,
                through_version=high,
            )  # fmt: skip
            text = next(joined, b"[]")
        else:
            read = [
                payload
                for page in checked_payloads(self._store, self._cohort, low, high)
                for payload in page
            ]
            if len(read) != high - low:  # an index scan ended early: see check_stream
                raise IntegrityError(
                    f"{self._store.path}: the stream index gives {len(read)} events of "
                    f"{self._cohort} after its event {low} where it holds {high - low} "
                    "(the SQLite file is damaged)"
                )
            check_order(self._store, self._cohort, low, high)
            payloads = [payload for payload in read if not payload.startswith(_UNFOLDED)]
            self._checked.update(
                p
                for p in pages
                if p * FOLD_CHUNK >= low and min((p + 1) * FOLD_CHUNK, self._length) <= high
            )
            text = b"[" + b",".join(payloads) + b"]"
        try:
            return _fold_decoder.decode(text)
        except msgspec.MsgspecError as exc:
            raise LedgerError(
                f"{self._store.path}: an event of {self._cohort} after its event {low} is not "
                f"a readable event ({exc}); run 'arena verify'"
            ) from None

    def _page(self, p: int) -> list[Event]:
        page = self._pages.get(p)
        if page is not None:
            self._pages.move_to_end(p)
            return page
        low, high = p * FOLD_CHUNK, min((p + 1) * FOLD_CHUNK, self._length)
        if p not in self._checked:
            check_stream(self._store, self._cohort, low, through_version=high)
            self._checked.add(p)
        self.pages_read += 1
        [joined] = self._store.payload_arrays(
            self._cohort, FOLD_CHUNK, after_version=low, through_version=high
        )
        try:
            page = self._pages[p] = list(_pages_decoder.decode(joined))
        except msgspec.MsgspecError as exc:
            raise LedgerError(
                f"{self._store.path}: an event of {self._cohort} after its event {low} is not "
                f"a readable event ({exc}); run 'arena verify'"
            ) from None
        if len(self._pages) > PAGES_KEPT:
            self._pages.popitem(last=False)
        return page


_OTHER_TYPES = tuple(t for name, t in EVENT_TYPES.items() if name != Decided.__struct_config__.tag)
_facts_decoder = msgspec.json.Decoder(list[Union[(Decided, *_OTHER_TYPES)]])  # type: ignore[valid-type]
"""Decodes a page of facts, a decision as its ``Decided`` (its agent and week) only."""


def scan_facts(store: EventStore, cohort: str) -> list[Fact]:
    """The cohort's facts in one scan of SQLite, the tail events left out by the query."""
    skip = [t.__name__ for t in TAIL_TYPES if t is not PromptStored]
    rows = store.versioned_payloads(cohort, skip)
    try:
        facts = _facts_decoder.decode(b"[" + b",".join(payload for _, payload in rows) + b"]")
    except msgspec.MsgspecError as exc:
        raise LedgerError(
            f"{store.path}: a fact of {cohort} is not a readable event ({exc}); run 'arena verify'"
        ) from None
    versions = [version for version, _ in rows]
    if not all(isinstance(v, int) for v in versions) or any(b <= a for a, b in pairwise(versions)):
        raise IntegrityError(
            f"{store.path}: the stream index gives the facts of {cohort} out of order (the "
            "SQLite file is damaged); run 'arena verify'"
        )
    return [(version - 1, fact) for version, fact in zip(versions, facts, strict=True)]


def open_timeline(store: EventStore, cohort: str) -> LogTimeline:
    """``cohort`` of ``store`` as a timeline that reads the log as it is stepped through (the
    store must stay open while the timeline is used). Opening checks what is cheap to check of
    the whole log (``ledger.restore.check_log``: the recorded head, the indexes) and the
    cohort's last event; IntegrityError names what failed. The state at the end of a closed
    cohort is restored through ``ledger.restore.load``, which proves it is the state the close
    recorded (from the closing snapshot, or folded when there is none to use) and whose note,
    if it has one, is the timeline's."""
    check_log(store)
    end = stream_ends(store, [cohort]).get(cohort)
    events = LogEvents(store, cohort, end)
    facts = scan_facts(store, cohort)
    if (
        end is not None
        and end.closed is not None
        and (not facts or facts[-1][0] != end.version - 1)
    ):
        raise IntegrityError(  # the close is a fact: a scan that missed it ended early
            f"{store.path}: the stream index gives the facts of {cohort} without its close "
            f"(event {end.seq}): the SQLite file is damaged; run 'arena verify'",
            end.seq,
        )
    timeline = LogTimeline(events, cohort, facts, {}, events.fold_events)
    timeline.snapshots.update(_restorers(store, cohort, end, timeline.notes))
    return timeline


def _restorers(
    store: EventStore, cohort: str, end: StreamEnd | None, notes: list[str]
) -> dict[int, Restore]:
    """A restore for each of the cohort's snapshots, checked where it stands when first
    needed; for a closed cohort, the end is the state ``load`` proves there."""

    def restorer(snapshot: Snapshot) -> Restore:
        def restore() -> CohortState:
            return usable_state(store, snapshot, end)

        return restore

    def restore_end() -> CohortState:
        loaded = load(store, [cohort])
        note = loaded.note()
        if note:
            notes.append(note)
        return loaded.ledger.cohorts[cohort]

    restorers = {s.version: restorer(s) for s in store.snapshots(cohort)}
    if end is not None and end.closed is not None:
        restorers[end.version] = restore_end
    return restorers
