"""Checking the hash chain a page at a time, and handing each checked page's payloads on.

``arena verify`` must hash every row and fold every event; reading the log once for both saves
a second pass over 300 MB per million events. :class:`ChainCursor` walks a seq range in pages:
each page is read as ``(payload, hash)`` pairs only, its links are checked, and its payloads are
returned for the caller to fold. A link is checked from its stored predecessor, so ranges need
nothing from each other and ``verify`` checks them in parallel processes.

Where the time goes, per million rows: SQLite reading them (0.9 CPU-s) and one sha256 call a row
(0.87 CPU-s: OpenSSL's per-call set-up, whatever the row's length). What this module adds is
kept out of Python's per-row bytecode: a page of one stream, the common case, is recognised by
SQLite without handing Python a row (:meth:`EventStore.range_shape`: one stream, ``version -
seq`` constant, no hole in ``seq``), so its versions need no check per row, and its messages
are hashed in a list comprehension and compared with the stored hashes as one list. Any other
page (several streams in it, or anything wrong) is checked row by row by
:meth:`EventStore.verify_chain`, which also words every fault the same way.
"""

from __future__ import annotations

from hashlib import sha256

from ledger.store import GENESIS, EventStore


class ChainCursor:
    """The links of the log after ``after``, checked page by page in seq order.

    Each :meth:`page` goes on from where the last one ended; IntegrityError names the first bad
    seq as :meth:`EventStore.verify_chain` names it, so checking a log in ranges and pages
    names the seq that one pass over it names.
    """

    def __init__(self, store: EventStore, after: int = 0) -> None:
        self._store = store
        self.keys = store.stream_keys()
        self._framings = {sid: key.encode() + b"\x00" for sid, key in self.keys.items()}
        self.start = after
        self.last = after
        self._prev = store.hash_at(after) if after else GENESIS
        self._versions: dict[int, int] = {}  # stream id -> version of its last row seen

    def page(self, through: int) -> tuple[list[bytes], str | list[str]]:
        """The payloads of the events after the last page through ``through``, every link
        checked, and their stream: one key for a page of one stream, else a key per row."""
        store, after = self._store, self.last
        rows = store.link_rows(after, through)
        payloads = [row[0] for row in rows]
        hashes = [row[1] for row in rows]
        prev = self._prev
        stream = None if prev is None else self._one_stream(after, through)
        if stream is not None and prev is not None:
            framing = self._framings[stream]
            computed = [
                sha256(link + framing + payload).digest()
                for link, payload in zip([prev, *hashes[:-1]], payloads, strict=True)
            ]
            if computed != hashes:
                stream = None
        if stream is None:  # several streams, or a fault: the exact check, row by row
            store.verify_chain(after, through)
            self._versions.clear()  # read again where next needed
        else:
            self._versions[stream] += len(rows)
        # rows missing at the page's end: the next link cannot be checked from the last row
        # read (the page after names the row after the hole, as verify_chain does)
        if len(rows) != through - after:
            self._prev = None
        elif rows:  # an empty page (an empty log's only one) leaves the link where it was
            self._prev = hashes[-1]
        self.last = through
        if stream is not None:
            return payloads, self.keys[stream]
        return payloads, [self.keys[sid] for sid in store.stream_ids_between(after, through)]

    def _one_stream(self, after: int, through: int) -> int | None:
        """The stream id of the page if SQLite's summary of it proves it the next run of one
        known stream with no hole (versions ``seq + lag``, going on from the stream's last)."""
        shape = self._store.range_shape(after, through)
        if shape is None:
            return None
        rows, low, high, lag, lead = shape
        if rows != through - after or low != high or lag != lead or low not in self._framings:
            return None
        if low not in self._versions:
            self._versions[low] = self._store.version_before(low, after)
        return low if after + 1 + lag == self._versions[low] + 1 else None

    def version_before_start(self, stream: str) -> int:
        """The stream's last version before this cursor's range (0 if it starts in it)."""
        for sid, key in self.keys.items():
            if key == stream:
                return self._store.version_before(sid, self.start)
        return 0
