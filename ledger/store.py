"""The append-only event log: one SQLite file, many streams, one global hash chain.

Why it is built the way it is:

* **Optimistic concurrency.** ``(stream_id, version)`` is unique and versions start at 1; an
  append that names the version it expects fails with ConcurrencyError instead of interleaving
  with a writer it did not see. Appends from several processes are serialised by
  ``BEGIN IMMEDIATE``, and the last hash is read inside that transaction, so the chain stays one
  line.
* **A global hash chain.** Every row stores ``hash = sha256(previous row's hash || stream key ||
  NUL || payload)`` (``GENESIS`` before the first row; see :func:`link_hash`), so each row
  commits to its predecessor and an edit shows at exactly the edited row. The version is not
  hashed because it is implied: :func:`ledger.chain.verify_chain` checks that every stream counts
  1, 2, 3, ... in log order, and that ``seq`` has no holes. A chain cannot reveal a removed tail
  (or a tail re-hashed after an edit); the head a replay records (``arena verify --head``) and
  the closing snapshots of each cohort do. Any other edit the chain reveals. One sha256 call a
  row is the floor: OpenSSL's per-call set-up costs more than hashing 300 bytes, and a per-row
  hash is what names the first bad row.
* **Speed (300-350k events/s on a busy 2-core machine; ``arena bench``).** A batch is one
  transaction, inserted in chunks by one INSERT ... SELECT over ``json_each`` each: payloads and
  hashes travel as one blob per chunk that SQLite slices, so Python binds five parameters per
  chunk instead of four per row. The chunks are pipelined: a worker thread runs the INSERT of
  chunk k (the sqlite3 module releases the GIL while SQLite works) while the caller's thread
  encodes and hashes chunk k+1. The connection is used by one thread at a time; the
  transaction is still one unit. WAL checkpoints run on their own connection and thread (see
  :class:`_Checkpointer`) instead of inside a COMMIT.
* **Durability trade-off.** WAL with ``synchronous=NORMAL``: a committed append survives a crash
  of the process (the test kills a writer with SIGKILL), but the last transactions before a
  power loss or OS crash may be rolled back. They roll back whole, never half a batch, and a
  replay resumes from the last committed event.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from itertools import accumulate
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import msgspec

from ledger.errors import ConcurrencyError, LedgerError
from ledger.events import ENCODER, EVENT_TYPES, AnyEvent, Event, decode, decode_many
from ledger.schema import SNAPSHOT_DDL, ensure_schema, has_snapshots
from ledger.snapshot import Snapshot, snapshot_hash

GENESIS = bytes(32)
"""The hash before the first event of every log."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 2048
"""Events per INSERT: small enough that the pipeline fills fast, large enough that the per-
statement cost vanishes; its blobs stay far below SQLite's length limit."""
_LOG_TYPES = frozenset(EVENT_TYPES.values())

_INSERT = """
INSERT INTO events (stream_id, version, payload, hash)
SELECT :stream_id, :base + key + 1,
       CAST(substr(:payloads, value >> 32, value & 4294967295) AS TEXT),
       substr(:hashes, key * 32 + 1, 32)
FROM json_each(:index)
"""
_WRITER_PRAGMAS = (
    "PRAGMA page_size = 16384",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    # 4 MiB: a 20,000-event batch (6 MB) spills pages to the WAL from the pipeline's worker
    # while Python works, instead of writing them all inside COMMIT; measured 5-10% faster
    "PRAGMA cache_size = -4096",
    "PRAGMA temp_store = MEMORY",
    "PRAGMA wal_autocheckpoint = 0",  # the _Checkpointer does it, off the COMMIT path
)
_BUSY_TIMEOUT_S = 30.0
_CHECKPOINT_BYTES = 16 << 20
"""Request a WAL checkpoint after this many payload bytes: SQLite's default of 1,000 pages."""
_PAGE = 100_000

_encode = ENCODER.encode

Row = tuple[int, str, int, AnyEvent]
"""``(seq, stream, version, event)`` as :meth:`EventStore.read_with_seq` yields it."""


def link_hash(prev_hash: bytes, stream: str, payload: bytes) -> bytes:
    """The hash a row must carry, given its predecessor's hash (``GENESIS`` for the first).

    The NUL makes the framing unambiguous: ``prev_hash`` is 32 bytes, stream keys may not
    contain NUL, and the payload comes last.
    """
    return hashlib.sha256(prev_hash + stream.encode() + b"\x00" + payload).digest()


class EventStore:
    """An open event log. Use :meth:`open`; it is a context manager that closes the file."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._worker: ThreadPoolExecutor | None = None
        self._checkpointer = _Checkpointer(path)

    @classmethod
    def open(cls, path: str | Path, *, create: bool = True, readonly: bool = False) -> Self:
        """Open (or create) the log at ``path``.

        ``readonly`` opens it for reports and ``arena verify``: it never creates the file, and
        every write raises. Raises LedgerError, naming the file, when it is missing (and not to
        be created), not a SQLite database, not an arena log, or of an unreadable schema version.
        """
        path = Path(path)
        exists = _check_file(path)
        if not exists and (readonly or not create):
            raise LedgerError(f"{path}: no such event log")
        try:
            conn = _connect(path, readonly)
            if readonly and _wal_blocked(conn, path):
                conn.close()
                _check_no_wal_left(path)
                conn = _connect(path, readonly, immutable=True)
        except (sqlite3.Error, ValueError) as exc:  # a damaged schema text, a NUL in the name
            raise LedgerError(f"{path}: cannot open event log ({_said(exc)})") from exc
        try:
            if exists and not readonly:  # refused before the pragmas change a foreign file
                ensure_schema(conn, path, create=False, empty_ok=True)
            if not readonly:
                for pragma in _WRITER_PRAGMAS:
                    conn.execute(pragma)
            ensure_schema(conn, path, create=create and not readonly)
            _check_not_truncated(conn, path)
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # a damaged name or meta value
            conn.close()
            if not readonly and "readonly" in str(exc):
                raise LedgerError(f"{path}: cannot write to this log ({_said(exc)})") from exc
            if _disk_full(exc):
                raise LedgerError(_write_failed(path, "cannot create the log", exc)) from exc
            raise LedgerError(f"{path}: not a readable arena event log ({_said(exc)})") from exc
        except LedgerError:
            conn.close()
            raise
        return cls(conn, path)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown()
        self._checkpointer.close()
        self._conn.close()  # the last connection to close checkpoints and removes the WAL

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> int:
        """Append ``events`` to ``stream`` atomically and return the stream's new last version.

        With ``expected_version`` the append succeeds only if the stream is at exactly that
        version (0 for a new stream); otherwise ConcurrencyError, and nothing is written.
        """
        if not stream or "\x00" in stream:
            raise LedgerError(f"invalid stream key {stream!r}: must be non-empty, without NUL")
        strays = {type(event) for event in events} - _LOG_TYPES
        if strays:
            names = ", ".join(sorted(cls.__name__ for cls in strays))
            raise LedgerError(f"not an event type of the log: {names}")
        chunks = [events[start : start + _CHUNK] for start in range(0, len(events), _CHUNK)]
        payloads = list(map(_encode, chunks[0])) if chunks else []  # before taking the lock
        conn = self._conn
        inserting: Future[Any] | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                stream_id, current = self._head(stream, create=bool(events))
                if expected_version is not None and current != expected_version:
                    raise ConcurrencyError(
                        f"stream {stream!r} is at version {current}, "
                        f"not the expected {expected_version}"
                    )
                prev = self._last_hash()
                framing = stream.encode() + b"\x00"
                base, written = current, 0
                for number, chunk in enumerate(chunks):
                    if number:
                        payloads = list(map(_encode, chunk))
                    params, prev = _chunk_params(stream_id, base, payloads, prev, framing)
                    if inserting is not None:
                        inserting.result()
                    inserting = self._pipeline().submit(conn.execute, _INSERT, params)
                    time.sleep(0)  # hand the GIL to the worker now, not at the next switch
                    base += len(chunk)
                    written += sum(map(len, payloads))
                if inserting is not None:
                    inserting.result()
                conn.execute("COMMIT")
            except BaseException:
                if inserting is not None:
                    wait([inserting])  # the connection is the worker's until its INSERT ends
                _roll_back(conn)
                raise
        except sqlite3.IntegrityError as exc:
            raise ConcurrencyError(f"stream {stream!r}: concurrent append ({_said(exc)})") from exc
        except sqlite3.Error as exc:
            raise LedgerError(_write_failed(self.path, "append failed", exc)) from exc
        self._checkpointer.wrote(written)
        return current + len(events)

    def _pipeline(self) -> ThreadPoolExecutor:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-append")
        return self._worker

    def _head(self, stream: str, *, create: bool) -> tuple[int, int]:
        """``(stream_id, last version)`` inside the write transaction; a stream that gets its
        first events here gets its id here too (and loses it again on rollback)."""
        found = self._fetch("SELECT id FROM streams WHERE key = ?", (stream,))
        if found:
            stream_id: int = found[0][0]
            return stream_id, self._version_of(stream_id)
        if not create:
            return 0, 0
        cursor = self._conn.execute("INSERT INTO streams (key) VALUES (?)", (stream,))
        assert cursor.lastrowid is not None
        return cursor.lastrowid, 0

    # -- reading -------------------------------------------------------------------------------

    def read(
        self, stream: str | None = None, after_seq: int = 0, batch: int = _PAGE
    ) -> Iterator[AnyEvent]:
        """Events in log order (all streams, or one), starting after global seq ``after_seq``.

        A payload that is not a readable event (one this arena does not know, or a broken one)
        raises LedgerError naming its seq."""
        for page in self._pages(stream, after_seq, batch):
            yield from self._decode_page(page)

    def read_with_seq(
        self, stream: str | None = None, after_seq: int = 0, batch: int = _PAGE
    ) -> Iterator[Row]:
        """Like :meth:`read`, with each event's global seq, stream and version."""
        keys = self._stream_keys()
        for page in self._pages(stream, after_seq, batch):
            events = self._decode_page(page)
            for (seq, stream_id, version, _), event in zip(page, events, strict=True):
                yield seq, keys[stream_id], version, event

    def _decode_page(self, page: list[tuple[int, int, int, bytes]]) -> list[AnyEvent]:
        try:
            return decode_many([row[3] for row in page])
        except msgspec.MsgspecError:
            for seq, _, _, payload in page:  # once, on the way to an error: name the row
                try:
                    decode(payload)
                except msgspec.MsgspecError as exc:
                    raise LedgerError(
                        f"{self.path}: event {seq} is not a readable event ({_said(exc)})"
                    ) from None
            raise

    def payload_arrays(
        self,
        stream: str | None = None,
        batch: int = _PAGE,
        skip: Iterable[str] = (),
        after_version: int = 0,
        *,
        through_version: int | None = None,
        positions: bool = False,
    ) -> Generator[bytes, None, None]:
        """The log (or one stream) as JSON arrays of the payloads of up to ``batch`` events each,
        in log order, leaving out events whose type is in ``skip``.

        SQLite joins each page in C, so a rebuild pays one decode call per page instead of a
        Python object per row; the payloads carry their own type, cohort and instant. Skipped
        types cost no copy and no decode: every payload begins ``{"type":"<Type>",`` (the
        encoder writes the tag first), so a type is a range of payload text that SQLite tests
        with a byte comparison, without parsing JSON. A page whose events are all skipped is
        not yielded. With a ``stream``, ``after_version`` starts after that version of it (the
        tail after a snapshot) and ``through_version`` ends at that one (a snapshot's). With
        ``positions`` each element is ``[seq, stream_id, payload]`` instead of the payload,
        for a fold that must name where it is (``arena verify``'s, on the way to an error).
        """
        key: tuple[int, ...] = ()
        low = 0
        if stream is None:
            where, end = "seq > ? AND seq <= ?", self.last_seq()
            order = "seq"
        else:
            found = self._fetch("SELECT id FROM streams WHERE key = ?", (stream,))
            if not found:
                return
            key = (found[0][0],)
            where, end = "stream_id = ? AND version > ? AND version <= ?", self._version_of(key[0])
            if through_version is not None:
                end = min(end, through_version)
            order, low = "version", after_version
        skipping, bounds = _skipping(skip)
        where += skipping
        item = "'[' || seq || ',' || stream_id || ',' || payload || ']'" if positions else "payload"
        sql = (
            f"SELECT CAST(group_concat({item}, ',') AS BLOB) FROM "
            f"(SELECT seq, stream_id, payload FROM events WHERE {where} ORDER BY {order})"
        )  # as a BLOB: bytes without touching the connection's text_factory, which other
        # queries use while this generator is suspended (verify looks up snapshots mid-fold)
        for first in range(low, end, batch):
            (joined,) = self._fetch(sql, (*key, first, min(first + batch, end), *bounds))[0]
            if joined:
                yield b"[" + joined + b"]"

    def read_types(self, types: Iterable[str]) -> Iterator[tuple[str, AnyEvent]]:
        """``(stream, event)`` for every event of the given types, in log order: what a report
        of one kind of event (the model-call transcript, say) reads, without decoding the rest.
        The type is matched on the payload's leading tag, as :meth:`payload_arrays` does."""
        tests, bounds = _type_tests(types, "read")
        if not tests:
            return
        keys = self._stream_keys()
        sql = (
            "SELECT seq, stream_id, version, CAST(payload AS BLOB) FROM events "
            f"WHERE seq > ? AND ({' OR '.join(tests)}) ORDER BY seq LIMIT ?"
        )
        cursor = 0
        while page := self._fetch(sql, (cursor, *bounds, _PAGE)):
            for row, event in zip(page, self._decode_page(page), strict=True):
                yield keys[row[1]], event
            cursor = page[-1][0]

    def versioned_payloads(self, stream: str, skip: Iterable[str] = ()) -> list[tuple[int, bytes]]:
        """``(version, payload)`` of one stream's events in order, leaving out the types in
        ``skip`` (matched as :meth:`payload_arrays` matches them): what an index of a log's
        rarer events reads (``arena step``'s, which skips the fills) without decoding the rest."""
        skipping, bounds = _skipping(skip)
        return self._fetch(
            "SELECT version, CAST(payload AS BLOB) FROM events"
            f" WHERE stream_id = (SELECT id FROM streams WHERE key = ?){skipping} ORDER BY version",
            (stream, *bounds),
        )

    def _pages(
        self, stream: str | None, after_seq: int, batch: int
    ) -> Iterator[list[tuple[int, int, int, bytes]]]:
        """Rows ``(seq, stream_id, version, payload)`` in pages, by keyset pagination so a page
        costs the same at the end of a large log as at the start. One stream is paged by version
        (its index order, which is also its seq order)."""
        select = "SELECT seq, stream_id, version, CAST(payload AS BLOB) FROM events"
        if stream is None:
            cursor = after_seq
            while page := self._fetch(
                f"{select} WHERE seq > ? ORDER BY seq LIMIT ?", (cursor, batch)
            ):
                yield page
                cursor = page[-1][0]
            return
        found = self._fetch("SELECT id FROM streams WHERE key = ?", (stream,))
        if not found:
            return
        stream_id = found[0][0]
        sql = f"{select} WHERE stream_id = ? AND version > ? ORDER BY version LIMIT ?"
        cursor = self._scalar(
            "SELECT coalesce(max(version), 0) FROM events WHERE stream_id = ? AND seq <= ?",
            (stream_id, after_seq),
        )
        while page := self._fetch(sql, (stream_id, cursor, batch)):
            yield page
            following = page[-1][2]
            if not isinstance(following, int) or following <= cursor:
                # a damaged index can hand the same page back for ever: stop, and say so
                raise LedgerError(
                    f"{self.path}: the index of stream {stream!r} does not move on past version "
                    f"{cursor} (the file is damaged: run 'arena verify')"
                )
            cursor = following

    def _stream_keys(self) -> dict[int, str]:
        return dict(self._fetch("SELECT id, key FROM streams"))

    def stream_version(self, stream: str) -> int:
        """The last version of ``stream``; 0 if it has no events."""
        found = self._fetch("SELECT id FROM streams WHERE key = ?", (stream,))
        return self._version_of(found[0][0]) if found else 0

    def streams(self) -> list[str]:
        """Every stream key, sorted."""
        return [row[0] for row in self._fetch("SELECT key FROM streams ORDER BY key")]

    def damage(self) -> str | None:
        """SQLite's first complaint about the file's structure (pages, b-trees, indexes that
        disagree with their table), or None when it finds none. A flipped bit in an index page
        leaves every event's hash intact, so the chain alone cannot see it."""
        try:
            found = self._fetch("PRAGMA integrity_check(1)")
        except sqlite3.DatabaseError as exc:
            return str(exc)
        first = str(found[0][0]) if found else "ok"
        return None if first == "ok" else first

    def last_seq(self) -> int:
        """The global seq of the newest event; 0 for an empty log."""
        return self._scalar("SELECT coalesce(max(seq), 0) FROM events")

    def digest(self, streams: Iterable[str] | None = None) -> str:
        """A sha256 (hex) of the streams' contents, independent of how they interleaved.

        Streams are taken in sorted order and each one's ``(version, payload)`` rows in version
        order (the payload carries ``type`` and ``ts``), so two replays that wrote the same
        events print the same digest even if their appends raced differently.
        """
        sha = hashlib.sha256()
        ids = dict(self._fetch("SELECT key, id FROM streams"))
        sql = (
            "SELECT version, CAST(payload AS BLOB) FROM events"
            f" WHERE stream_id = ? AND version > ? ORDER BY version LIMIT {_PAGE}"
        )
        for stream in sorted(self.streams() if streams is None else streams):
            sha.update(b"%s\x00" % stream.encode())
            version = 0
            while stream in ids and (page := self._fetch(sql, (ids[stream], version))):
                sha.update(b"".join(b"%d\x00%s\n" % row for row in page))
                version = page[-1][0]
        return sha.hexdigest()

    def stream_keys(self) -> dict[int, str]:
        """Every stream's key by its id (``payload_arrays(positions=True)`` names streams so)."""
        return self._stream_keys()

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event: what a replay leaves, to be checked later.
        ``(0, GENESIS)`` for an empty log."""
        rows = self._fetch("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
        return (rows[0][0], bytes(rows[0][1])) if rows else (0, GENESIS)

    def event_at(self, seq: int) -> tuple[str, int, bytes] | None:
        """``(stream, version, hash)`` of the event at global ``seq``, or None if there is none."""
        rows = self._fetch(
            "SELECT streams.key, version, hash FROM events JOIN streams ON streams.id = stream_id"
            " WHERE seq = ?",
            (seq,),
        )
        return (rows[0][0], rows[0][1], bytes(rows[0][2])) if rows else None

    def type_at(self, seq: int) -> str | None:
        """The type of the event at global ``seq``, or None if there is none."""
        rows = self._fetch("SELECT payload ->> '$.type' FROM events WHERE seq = ?", (seq,))
        return str(rows[0][0]) if rows else None

    def seq_of_hash(self, row_hash: bytes) -> int | None:
        """The seq of the event whose chain hash is ``row_hash`` (a full scan: error paths)."""
        rows = self._fetch("SELECT seq FROM events WHERE hash = ?", (row_hash,))
        return rows[0][0] if rows else None

    # -- snapshots -----------------------------------------------------------------------------

    def add_snapshot(
        self, stream: str, version: int, state: bytes, *, fmt: int, closing: bool
    ) -> bool:
        """Store ``state``, the image of ``stream`` after its event ``version``, tied to that
        event's seq and chain hash. False (and nothing written) if that version already has a
        snapshot; LedgerError if the stream has no such event. One transaction: a snapshot is
        stored whole or not at all."""
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in SNAPSHOT_DDL:
                    conn.execute(statement)
                rows = self._fetch(
                    "SELECT events.stream_id, seq, hash FROM events"
                    " JOIN streams ON streams.id = events.stream_id"
                    " WHERE streams.key = ? AND version = ?",
                    (stream, version),
                )
                if not rows:
                    raise LedgerError(f"{self.path}: stream {stream!r} has no version {version}")
                stream_id, seq, chain_hash = rows[0][0], rows[0][1], bytes(rows[0][2])
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO snapshots"
                    " (stream_id, version, seq, chain_hash, closing, format, state, hash)"
                    " VALUES (?, ?, ?, ?, ?, ?, CAST(? AS TEXT), ?)",
                    (stream_id, version, seq, chain_hash, int(closing), fmt, state,
                     snapshot_hash(chain_hash, fmt, state)),
                )  # fmt: skip
                conn.execute("COMMIT")
            except BaseException:
                _roll_back(conn)
                raise
        except sqlite3.Error as exc:
            raise LedgerError(_write_failed(self.path, "cannot store a snapshot", exc)) from exc
        return cursor.rowcount == 1

    def snapshot_bytes(self) -> int:
        """The bytes all stored snapshots take (images, hashes and keys), for ``arena bench``."""
        if not has_snapshots(self._conn):
            return 0
        return self._scalar(
            "SELECT coalesce(sum(length(CAST(state AS BLOB)) + length(hash)"
            " + length(chain_hash) + 32), 0) FROM snapshots"
        )

    def snapshots(self, stream: str | None = None, *, latest: bool = False) -> list[Snapshot]:
        """Stored snapshots in log order (of one stream, or all); ``latest`` keeps only the
        newest of each stream. Empty for a log written before snapshots existed."""
        if not has_snapshots(self._conn):
            return []
        where, params = "", ()  # type: tuple[str, tuple[object, ...]]
        if stream is not None:
            where, params = " WHERE streams.key = ?", (stream,)
        if latest:
            where += (" AND" if where else " WHERE") + (
                " s.version = (SELECT max(version) FROM snapshots t"
                " WHERE t.stream_id = s.stream_id)"
            )
        rows = self._fetch(
            "SELECT s.id, coalesce(streams.key, '#' || s.stream_id), s.version, s.seq,"
            " s.chain_hash, s.closing, s.format, CAST(s.state AS BLOB), s.hash"
            " FROM snapshots s LEFT JOIN streams ON streams.id = s.stream_id"
            f"{where} ORDER BY s.seq, s.id",
            params,
        )
        try:
            return [
                Snapshot(i, key, version, seq, bytes(chain), bool(closing), fmt, bytes(state),
                         bytes(row_hash))
                for i, key, version, seq, chain, closing, fmt, state, row_hash in rows
            ]  # fmt: skip
        except TypeError:  # a NULL where the schema says NOT NULL: the schema text was damaged
            raise LedgerError(
                f"{self.path}: the snapshots table is damaged (a value missing or of the wrong "
                "type)"
            ) from None

    # -- helpers -------------------------------------------------------------------------------

    def _version_of(self, stream_id: int) -> int:
        return self._scalar(
            "SELECT coalesce(max(version), 0) FROM events WHERE stream_id = ?", (stream_id,)
        )

    def _last_hash(self) -> bytes:
        rows = self._fetch("SELECT hash FROM events ORDER BY seq DESC LIMIT 1")
        return bytes(rows[0][0]) if rows else GENESIS

    def _scalar(self, sql: str, params: tuple[object, ...] = ()) -> int:
        value = self._fetch(sql, params)[0][0]
        assert isinstance(value, int)
        return value

    def _fetch(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """Run a query, turning SQLite's errors (a corrupt page, say) into a one-line
        LedgerError that names the file."""
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise LedgerError(f"{self.path}: cannot read event log ({_said(exc)})") from exc


class _Checkpointer:
    """Copies the WAL back into the database file on its own connection and thread.

    SQLite's automatic checkpoint runs inside the COMMIT that crosses the threshold, which made
    it about a quarter of an append's time. A PASSIVE checkpoint on another connection runs
    beside the next appends instead (WAL allows one checkpointer next to the writer). Its
    failures are harmless: the WAL keeps every frame until a later checkpoint or the last
    connection's close copies it.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._thread: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._running: Future[None] | None = None
        self._unsaved = 0

    def wrote(self, nbytes: int) -> None:
        self._unsaved += nbytes
        if self._unsaved < _CHECKPOINT_BYTES or (self._running and not self._running.done()):
            return
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-wal")
        self._unsaved = 0
        self._running = self._thread.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        if self._conn is None:
            self._conn = sqlite3.connect(self._path, isolation_level=None, timeout=0)
        with contextlib.suppress(sqlite3.Error):  # see the class doc
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        if self._thread is not None:
            self._thread.submit(self._disconnect)
            self._thread.shutdown()

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()


def _said(exc: BaseException) -> str:
    """An error's text on one line: SQLite quotes the damaged schema text it failed to parse,
    newlines and all, and an error message is one line."""
    return " ".join(str(exc).split())


def _roll_back(conn: sqlite3.Connection) -> None:
    """End a failed write transaction, if SQLite has not already: on a full disk it rolls the
    transaction back itself, and a ROLLBACK then failed with "cannot rollback - no transaction
    is active", which hid the reason."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


_REFUSED_WRITES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR_WRITE})
"""A full disk is SQLITE_FULL when a write falls short, SQLITE_IOERR_WRITE when it writes
nothing (ENOSPC, or EFBIG past a file size limit)."""


def _disk_full(exc: BaseException) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in _REFUSED_WRITES


def _write_failed(path: Path, what: str, exc: BaseException) -> str:
    """The one line a failed write gives: a full disk (or a file size limit) says so, and that
    the transaction, all or nothing, left the log as it was."""
    if _disk_full(exc):
        return (
            f"{path}: the disk is full or refused a write ({_said(exc)}): nothing of this write "
            "was kept, the log is intact up to its last whole write; free space and run again "
            "to resume"
        )
    return f"{path}: {what} ({_said(exc)})"


def _skipping(skip: Iterable[str]) -> tuple[str, list[str]]:
    """The SQL that leaves out events of the ``skip`` types (appended to a WHERE), and its
    parameters."""
    tests, bounds = _type_tests(skip, "skip")
    return "".join(f" AND NOT {test}" for test in tests), bounds


def _chunk_params(
    stream_id: int, base: int, payloads: list[bytes], prev: bytes, framing: bytes
) -> tuple[dict[str, object], bytes]:
    """The INSERT's parameters for one chunk whose first event gets version ``base + 1``, and
    the chunk's last hash.

    ``index`` packs each payload's 1-based offset in ``payloads`` (high 32 bits) with its
    length (low 32 bits); ``hashes`` is the rows' hashes, 32 bytes each.
    """
    sha256 = hashlib.sha256
    hashes: list[bytes] = []
    append = hashes.append
    for payload in payloads:
        prev = sha256(prev + framing + payload).digest()
        append(prev)
    lengths = list(map(len, payloads))
    offsets = accumulate(lengths[:-1], initial=1)
    index = [offset << 32 | size for offset, size in zip(offsets, lengths, strict=True)]
    params: dict[str, object] = {
        "stream_id": stream_id,
        "base": base,
        "payloads": b"".join(payloads),
        "hashes": b"".join(hashes),
        "index": _encode(index),
    }
    return params, prev


def _type_tests(names: Iterable[str], verb: str) -> tuple[list[str], list[str]]:
    """SQL tests that a payload is of each type named, and their parameters. Every payload
    begins ``{"type":"<Type>",`` (the encoder writes the tag first), so a type is a range of
    payload text that SQLite tests with a byte comparison, without parsing JSON."""
    tests: list[str] = []
    bounds: list[str] = []
    for name in sorted(set(names)):
        if name not in EVENT_TYPES:
            raise LedgerError(f"cannot {verb} {name!r}: not an event type of the log")
        tests.append("(payload >= ? AND payload < ?)")
        bounds += [f'{{"type":"{name}",', f'{{"type":"{name}-']  # '-' sorts right after ','
    return tests, bounds


def _connect(path: Path, readonly: bool, *, immutable: bool = False) -> sqlite3.Connection:
    target = str(path)
    if readonly:
        target = path.resolve().as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    return sqlite3.connect(
        target,
        uri=readonly,
        isolation_level=None,
        timeout=_BUSY_TIMEOUT_S,
        check_same_thread=False,  # the append pipeline's worker; see the module doc
    )


def _wal_blocked(conn: sqlite3.Connection, path: Path) -> bool:
    """Whether a read-only open must read the file as immutable: a log in WAL mode (every log
    a writer left) needs its ``-shm`` file, which SQLite cannot create in a folder it may not
    write (a read-only mount, a shared results folder), so even a report failed with 'attempt
    to write a readonly database'. No writer can append in such a folder either, so the file
    as it stands is the whole log (see :func:`_check_no_wal_left`)."""
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return False
    except sqlite3.OperationalError:
        if os.access(path.parent, os.W_OK):
            raise
        return True


def _check_no_wal_left(path: Path) -> None:
    """An immutable read leaves a WAL's pages out without a word: refuse, saying what to do."""
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise LedgerError(
            f"{path}: its folder is read-only and {wal.name} holds events not yet in the log; "
            "copy both files to a folder you can write and read the copy"
        )


def _check_file(path: Path) -> bool:
    """Whether ``path`` exists; raise if it exists but is plainly not a SQLite database."""
    try:
        if not path.exists():
            return False
        if path.is_dir():
            raise LedgerError(f"{path}: is a directory, not an event log")
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except (OSError, ValueError) as exc:  # a name too long, a folder we may not read
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise LedgerError(f"{path}: cannot use as an event log ({reason})") from None
    if header and header != _SQLITE_MAGIC:
        raise LedgerError(f"{path}: not an arena event log (not a SQLite database)")
    return True


def _check_not_truncated(conn: sqlite3.Connection, path: Path) -> None:
    """SQLite only notices a truncated file when it reads a missing page; check the size now so
    the user hears about it at open, not halfway through a report."""
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return  # pages may legitimately live in the WAL until the next checkpoint
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    if path.stat().st_size < page_count * page_size:
        raise LedgerError(f"{path}: truncated event log (shorter than its header says)")
