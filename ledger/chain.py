"""The hash chain read by ranges: its links checked over a range of seqs, over a range of one
stream's versions, or a page at a time, and the range queries ``arena verify`` plans its ranges
and pages with.

These are functions over an :class:`~ledger.store.EventStore`, not methods of it: the store
writes the log and reads its events for everyone; what reads the chain itself, by seq ranges,
links and pages (``arena verify``, the step reader, ``ledger.restore``), is here. They query the
store's connection through its private helpers (``_fetch``, ``_scalar``), as its methods do: the
two modules are one package's.

:func:`verify_chain` recomputes every link of a seq range, row by row. :func:`checked_payloads`
(and :func:`check_links`) check one stream's versions, a page at a time, each row against its
stored predecessor.

``arena verify`` must hash every row and fold every event; reading the log once for both saves
a second pass over 300 MB per million events. :class:`ChainCursor` walks a seq range in pages:
each page is read as ``(payload, hash)`` pairs only, its links are checked, and its payloads are
returned for the caller to fold. A link is checked from its stored predecessor, so ranges need
nothing from each other and ``verify`` checks them in parallel processes.

Where the time goes, per million rows: SQLite reading them (0.9 CPU-s) and one sha256 call a row
(0.87 CPU-s: OpenSSL's per-call set-up, whatever the row's length). What this module adds is
kept out of Python's per-row bytecode: a page of one stream, the common case, is recognised by
SQLite without handing Python a row (:func:`range_shape`: one stream, ``version - seq``
constant, no hole in ``seq``), so its versions need no check per row, and its messages are
hashed in a list comprehension and compared with the stored hashes as one list. Any other page
(several streams in it, or anything wrong) is checked row by row by :func:`verify_chain`, which
also words every fault the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from hashlib import sha256

from ledger.errors import IntegrityError
from ledger.store import _PAGE, GENESIS, EventStore, _skipping


def verify_chain(store: EventStore, after: int = 0, through: int | None = None) -> int:
    """Recompute every link of the hash chain (or of the events with ``after`` < seq <=
    ``through``); return how many rows were checked.

    Raises IntegrityError carrying the first bad seq: the first row whose hash does not
    match its contents and its predecessor's hash, that follows a hole in ``seq``, whose
    stream is unknown, or that is not the next version of its stream.

    A range starts from the stored hash at ``after`` and, for each stream, from its highest
    version at or before ``after``; so the ranges of a log, each checked on its own
    (``verify`` checks them in parallel processes), prove what one pass over the whole log
    proves, and the earliest seq any of them names is the one it names (the earlier ranges
    prove the rows before ``after`` count 1, 2, 3, ..., so their highest version is the
    last; a hole is named by the row after it, in whichever range that is).
    """
    framings = {stream_id: key.encode() + b"\x00" for stream_id, key in store.stream_keys().items()}
    through = store.last_seq() if through is None else through
    sql = (
        "SELECT seq, stream_id, version, CAST(payload AS BLOB), hash"
        f" FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT {_PAGE}"
    )
    versions: dict[int, int] = {}
    sha256 = hashlib.sha256
    prev = hash_at(store, after) if after else GENESIS
    last = after
    while page := store._fetch(sql, (last, through)):
        for seq, stream_id, version, payload, row_hash in page:
            if seq != last + 1 or prev is None:
                raise _broken(store, seq, "does not link to its predecessor")
            framing = framings.get(stream_id)
            if framing is None:
                raise _broken(store, seq, f"names an unknown stream id {stream_id}")
            if after and stream_id not in versions:
                versions[stream_id] = version_before(store, stream_id, after)
            if version != versions.get(stream_id, 0) + 1:
                raise _broken(store, seq, f"breaks its stream's version order ({version})")
            prev = sha256(prev + framing + payload).digest()
            if row_hash != prev:
                raise _broken(store, seq, "was altered (hash mismatch)")
            versions[stream_id] = version
            last = seq
    return last - after


def hash_at(store: EventStore, seq: int) -> bytes | None:
    """The stored chain hash of the event at ``seq``, or None if there is none."""
    rows = store._fetch("SELECT hash FROM events WHERE seq = ?", (seq,))
    return bytes(rows[0][0]) if rows else None


def version_before(store: EventStore, stream_id: int, seq: int) -> int:
    """The stream's highest version at or before ``seq`` (0 if none): where a range that
    starts after ``seq`` must go on from (one covering-index scan per stream and range)."""
    return store._scalar(
        "SELECT coalesce(max(version), 0) FROM events WHERE stream_id = ? AND seq <= ?",
        (stream_id, seq),
    )


def link_rows(store: EventStore, after: int, through: int) -> list[tuple[bytes, bytes]]:
    """``(payload, hash)`` of every event with ``after`` < seq <= ``through``, in seq order:
    what a chain check hashes, and the payloads a fold then decodes (see
    :class:`ChainCursor`). Only these two columns, as bytes: three integers more per row
    cost half as much again to read."""
    return store._fetch(
        "SELECT CAST(payload AS BLOB), hash FROM events WHERE seq > ? AND seq <= ? ORDER BY seq",
        (after, through),
    )


def range_shape(
    store: EventStore, after: int, through: int
) -> tuple[int, int, int, int, int] | None:
    """``(rows, lowest stream id, highest, lowest version - seq, highest)`` of the events
    with ``after`` < seq <= ``through``, or None if there are none. SQLite computes it
    without handing a row to Python: a range of one stream whose ``version - seq`` is
    constant counts 1, 2, 3, ... in log order (:class:`ChainCursor`'s fast path)."""
    rows, *rest = store._fetch(
        "SELECT count(*), min(stream_id), max(stream_id), min(version - seq),"
        " max(version - seq) FROM events WHERE seq > ? AND seq <= ?",
        (after, through),
    )[0]
    return (rows, *rest) if rows else None


def stream_ids_between(
    store: EventStore,
    after: int,
    through: int,
    skip: Iterable[str] = (),
    *,
    column: str = "stream_id",
) -> list[int]:
    """The stream id (or with ``column="seq"`` the seq) of every event with ``after`` < seq
    <= ``through`` whose type is not in ``skip``, in seq order."""
    skipping, bounds = _skipping(skip)
    assert column in ("stream_id", "seq")
    return [
        row[0]
        for row in store._fetch(
            f"SELECT {column} FROM events WHERE seq > ? AND seq <= ?{skipping} ORDER BY seq",
            (after, through, *bounds),
        )
    ]


def folded_between(
    store: EventStore, after: int, through: int, skip: Iterable[str]
) -> tuple[bytes, int | None, int | None]:
    """The payloads of the events with ``after`` < seq <= ``through`` whose type is not in
    ``skip``, as one JSON array joined by SQLite (see :meth:`EventStore.payload_arrays`), and the
    lowest and highest stream id among them: a fold's page when another process checks
    the chain."""
    skipping, bounds = _skipping(skip)
    joined, low, high = store._fetch(
        "SELECT CAST(group_concat(payload, ',') AS BLOB), min(stream_id), max(stream_id)"
        f" FROM (SELECT payload, stream_id FROM events WHERE seq > ? AND seq <= ?{skipping}"
        " ORDER BY seq)",
        (after, through, *bounds),
    )[0]
    return b"[" + (joined or b"") + b"]", low, high


def stream_spans(store: EventStore) -> dict[int, tuple[int, int]]:
    """Every stream's first and last seq, by stream id, as its index gives them (two
    lookups a stream, the seqs of its first and last version): where ``arena verify`` may
    cut the log so that no stream but one runs across the cut, and where its pages end so
    that each holds one stream. A plan, not a proof: what the index says is checked by
    SQLite's integrity check and the chain."""
    rows = store._fetch(
        "SELECT s.id,"
        " (SELECT seq FROM events WHERE stream_id = s.id ORDER BY version LIMIT 1),"
        " (SELECT seq FROM events WHERE stream_id = s.id ORDER BY version DESC LIMIT 1)"
        " FROM streams s"
    )
    return {sid: (first, last) for sid, first, last in rows if first is not None}


def check_links(
    store: EventStore, stream: str, after_version: int = 0, through_version: int | None = None
) -> int:
    """Check the chain links of one stream's events after ``after_version`` (through
    ``through_version``: a reader that folds a page at a time checks that page); return
    how many were checked. See :func:`checked_payloads`."""
    return sum(map(len, checked_payloads(store, stream, after_version, through_version)))


def checked_payloads(
    store: EventStore, stream: str, after_version: int = 0, through_version: int | None = None
) -> Iterator[list[bytes]]:
    """The payloads of one stream's events after ``after_version`` (through
    ``through_version``), a page at a time, each page's chain links checked before it is
    handed out: a reader that folds the events reads each row once, not once to check and
    again to fold.

    Each row must hash from its stored predecessor (the row before it in the global log,
    whichever stream that is) and follow its stream's previous version, so an edited
    payload, a deleted or inserted row is caught at the row, without reading the other
    streams. While the stream's rows follow each other in the log (a cohort is appended in
    one run) the predecessor is the row just checked; only a row after another stream's
    run looks its predecessor up. A consistent re-hash of everything from the edit onwards
    is what this cannot see; ``verify`` with a recorded head or the closing snapshots does.
    Raises IntegrityError naming the first bad seq.
    """
    found = store._fetch("SELECT id FROM streams WHERE key = ?", (stream,))
    if not found:
        return
    stream_id = found[0][0]
    framing = stream.encode() + b"\x00"
    sql = (
        "SELECT seq, version, CAST(payload AS BLOB), hash FROM events"
        f" WHERE stream_id = ? AND version > ? AND version <= ? ORDER BY version LIMIT {_PAGE}"
    )
    sha256 = hashlib.sha256
    version, last_seq, prev = after_version, -1, GENESIS
    last = store._version_of(stream_id) if through_version is None else through_version
    while page := store._fetch(sql, (stream_id, version, last)):
        for seq, row_version, payload, row_hash in page:
            if row_version != version + 1:
                raise _broken(store, seq, f"breaks its stream's version order ({row_version})")
            if seq <= last_seq:
                raise _broken(store, seq, "comes again in its stream's index (the file is damaged)")
            if seq != last_seq + 1:
                found_prev = GENESIS if seq == 1 else hash_at(store, seq - 1)
                if found_prev is None:
                    raise _broken(store, seq, "does not link to its predecessor")
                prev = found_prev
            if sha256(prev + framing + payload).digest() != row_hash:
                raise _broken(store, seq, "was altered (hash mismatch)")
            version, last_seq, prev = row_version, seq, row_hash
        yield [row[2] for row in page]
    if version != last and last_seq >= 0:
        raise _broken(store, last_seq, f"ends its stream at version {version}, not {last}")


class ChainCursor:
    """The links of the log after ``after``, checked page by page in seq order.

    Each :meth:`page` goes on from where the last one ended; IntegrityError names the first bad
    seq as :func:`verify_chain` names it, so checking a log in ranges and pages names the seq
    that one pass over it names.
    """

    def __init__(self, store: EventStore, after: int = 0) -> None:
        self._store = store
        self.keys = store.stream_keys()
        self._framings = {sid: key.encode() + b"\x00" for sid, key in self.keys.items()}
        self.start = after
        self.last = after
        self._prev = hash_at(store, after) if after else GENESIS
        self._versions: dict[int, int] = {}  # stream id -> version of its last row seen

    def page(self, through: int) -> tuple[list[bytes], str | list[str]]:
        """The payloads of the events after the last page through ``through``, every link
        checked, and their stream: one key for a page of one stream, else a key per row."""
        store, after = self._store, self.last
        rows = link_rows(store, after, through)
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
            verify_chain(store, after, through)
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
        return payloads, [self.keys[sid] for sid in stream_ids_between(store, after, through)]

    def _one_stream(self, after: int, through: int) -> int | None:
        """The stream id of the page if SQLite's summary of it proves it the next run of one
        known stream with no hole (versions ``seq + lag``, going on from the stream's last)."""
        shape = range_shape(self._store, after, through)
        if shape is None:
            return None
        rows, low, high, lag, lead = shape
        if rows != through - after or low != high or lag != lead or low not in self._framings:
            return None
        if low not in self._versions:
            self._versions[low] = version_before(self._store, low, after)
        return low if after + 1 + lag == self._versions[low] + 1 else None

    def version_before_start(self, stream: str) -> int:
        """The stream's last version before this cursor's range (0 if it starts in it)."""
        for sid, key in self.keys.items():
            if key == stream:
                return version_before(self._store, sid, self.start)
        return 0


def _broken(store: EventStore, seq: int, what: str) -> IntegrityError:
    return IntegrityError(f"{store.path}: event {seq} {what}", seq=seq)
