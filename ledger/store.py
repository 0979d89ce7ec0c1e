"""The append-only event log: one SQLite file, many streams, one global hash chain.

Why it is built the way it is:

* **Optimistic concurrency.** ``(stream, version)`` is unique and versions start at 1; an append
  that names the version it expects fails with ConcurrencyError instead of interleaving with a
  writer it did not see. Appends from several processes are serialised by ``BEGIN IMMEDIATE``,
  and the last hash is read inside that transaction, so the chain stays one line.
* **A global hash chain.** Every row stores ``prev_hash`` and ``hash = sha256(prev_hash ||
  stream || version || type || ts || payload)`` (see :func:`link_hash` for the framing).
  sha256 rather than blake2b because OpenSSL's sha256 is the faster of the two on short inputs
  here (about 1 us a row). A chain cannot reveal a removed tail; any other edit it reveals.
* **Speed.** A batch is one transaction and, in chunks, one INSERT ... SELECT over
  ``json_each``: payloads, hashes, types and timestamps each travel as one blob that SQLite
  slices, so Python binds seven parameters per chunk instead of seven per row.
* **Durability trade-off.** WAL with ``synchronous=NORMAL``: a committed append survives a crash
  of the process (the test kills a writer with SIGKILL), but the last transactions before a
  power loss or OS crash may be rolled back. They roll back whole, never half a batch, and a
  replay resumes from the last committed event.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, count
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import msgspec

from ledger.errors import ConcurrencyError, IntegrityError, LedgerError
from ledger.events import EVENT_TYPES, AnyEvent, Event, decode_many, encode
from ledger.schema import ensure_schema

GENESIS = bytes(32)
"""The ``prev_hash`` of the first event of every log."""

_HASH_LEN = 32
_LINK = b"%s%s\x00%d\x00%s\x00%d\x00%s"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 4096
"""Events per INSERT statement: keeps each bound blob far below SQLite's length limit."""

_TYPE_KEYS: dict[type[Event], bytes] = {cls: name.encode() for name, cls in EVENT_TYPES.items()}
_TYPE_WIDTH = 32
_TS_WIDTH = 20  # fits any int64, sign included
_TYPE_FIELD = b"%%-%ds" % _TYPE_WIDTH
_TS_FIELD = b"%%0%dd" % _TS_WIDTH
assert max(map(len, _TYPE_KEYS.values())) <= _TYPE_WIDTH

_INSERT = f"""
INSERT INTO events (stream, version, type, ts, payload, prev_hash, hash)
SELECT :stream, :base + key + 1,
       rtrim(CAST(substr(:types, key * {_TYPE_WIDTH} + 1, {_TYPE_WIDTH}) AS TEXT)),
       CAST(CAST(substr(:ts, key * {_TS_WIDTH} + 1, {_TS_WIDTH}) AS TEXT) AS INTEGER),
       CAST(substr(:payloads, value >> 32, value & 4294967295) AS TEXT),
       substr(:chain, key * 32 + 1, 32),
       substr(:chain, key * 32 + 33, 32)
FROM json_each(:index)
"""
_WRITER_PRAGMAS = (
    "PRAGMA page_size = 16384",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA cache_size = -65536",
    "PRAGMA temp_store = MEMORY",
)
_BUSY_TIMEOUT_S = 30.0

_index_encoder = msgspec.json.Encoder()

Row = tuple[int, str, int, AnyEvent]
"""``(seq, stream, version, event)`` as :meth:`EventStore.read_with_seq` yields it."""


def link_hash(
    prev_hash: bytes, stream: str, version: int, event_type: str, ts: int, payload: bytes
) -> bytes:
    """The hash a row must carry, given its predecessor's hash (``GENESIS`` for the first).

    NUL separators make the framing unambiguous: stream keys may not contain NUL, versions,
    type names and timestamps cannot, and the payload comes last.
    """
    fields = (prev_hash, stream.encode(), version, event_type.encode(), ts, payload)
    return hashlib.sha256(_LINK % fields).digest()


class EventStore:
    """An open event log. Use :meth:`open`; it is a context manager that closes the file."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

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
            if readonly:
                conn = sqlite3.connect(
                    path.resolve().as_uri() + "?mode=ro",
                    uri=True,
                    isolation_level=None,
                    timeout=_BUSY_TIMEOUT_S,
                )
            else:
                conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise LedgerError(f"{path}: cannot open event log ({exc})") from exc
        try:
            if not readonly:
                for pragma in _WRITER_PRAGMAS:
                    conn.execute(pragma)
            ensure_schema(conn, path, create=create and not readonly)
            _check_not_truncated(conn, path)
        except sqlite3.Error as exc:
            conn.close()
            raise LedgerError(f"{path}: not a readable arena event log ({exc})") from exc
        except LedgerError:
            conn.close()
            raise
        return cls(conn, path)

    def close(self) -> None:
        self._conn.close()

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
        payloads = list(map(encode, events))  # before the write lock: it is the slow part
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = self._version(stream)
                if expected_version is not None and current != expected_version:
                    raise ConcurrencyError(
                        f"stream {stream!r} is at version {current}, "
                        f"not the expected {expected_version}"
                    )
                prev = self._last_hash()
                for start in range(0, len(payloads), _CHUNK):
                    end = start + _CHUNK
                    prev = self._insert(
                        stream, current + start, events[start:end], payloads[start:end], prev
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.IntegrityError as exc:
            raise ConcurrencyError(f"stream {stream!r}: concurrent append ({exc})") from exc
        except sqlite3.Error as exc:
            raise LedgerError(f"{self.path}: append failed ({exc})") from exc
        return current + len(payloads)

    def _insert(
        self, stream: str, base: int, events: Sequence[Event], payloads: list[bytes], prev: bytes
    ) -> bytes:
        """Insert one chunk whose first event gets version ``base + 1``; return its last hash.

        SQLite slices every per-row value out of a few blobs: ``index`` packs each payload's
        1-based offset (high 32 bits) with its length (low 32 bits); ``ts`` and ``types`` are
        fixed-width columns of text; ``chain`` is ``prev || hash_1 || ... || hash_n``.
        """
        try:
            types = [_TYPE_KEYS[type(event)] for event in events]
        except KeyError as exc:
            raise LedgerError(f"not an event type of the log: {exc.args[0].__name__}") from None
        stamps = [event.ts for event in events]
        sha256 = hashlib.sha256
        link = _LINK
        stream_key = stream.encode()
        chain = [prev]
        append = chain.append
        for version, kind, ts, payload in zip(
            count(base + 1), types, stamps, payloads, strict=False
        ):
            prev = sha256(link % (prev, stream_key, version, kind, ts, payload)).digest()
            append(prev)
        n = len(payloads)
        lengths = list(map(len, payloads))
        offsets = accumulate(lengths[:-1], initial=1)
        index = [offset << 32 | size for offset, size in zip(offsets, lengths, strict=True)]
        self._conn.execute(
            _INSERT,
            {
                "stream": stream,
                "base": base,
                "types": (_TYPE_FIELD * n) % tuple(types),
                "ts": (_TS_FIELD * n) % tuple(stamps),
                "payloads": b"".join(payloads),
                "chain": b"".join(chain),
                "index": _index_encoder.encode(index),
            },
        )
        return prev

    # -- reading -------------------------------------------------------------------------------

    def read(
        self, stream: str | None = None, after_seq: int = 0, batch: int = 100_000
    ) -> Iterator[AnyEvent]:
        """Events in log order (all streams, or one), starting after global seq ``after_seq``."""
        for page in self._pages(stream, after_seq, batch):
            yield from decode_many([row[3] for row in page])

    def read_with_seq(
        self, stream: str | None = None, after_seq: int = 0, batch: int = 100_000
    ) -> Iterator[Row]:
        """Like :meth:`read`, with each event's global seq, stream and version."""
        for page in self._pages(stream, after_seq, batch):
            events = decode_many([row[3] for row in page])
            for (seq, key, version, _), event in zip(page, events, strict=True):
                yield seq, key, version, event

    def _pages(
        self, stream: str | None, after_seq: int, batch: int
    ) -> Iterator[list[tuple[int, str, int, bytes]]]:
        """Rows ``(seq, stream, version, payload)`` in pages, by keyset pagination so a page
        costs the same at the end of a large log as at the start. One stream is paged by
        version (its index order, which is also its seq order)."""
        if stream is None:
            sql = (
                "SELECT seq, stream, version, CAST(payload AS BLOB) FROM events"
                " WHERE seq > ? ORDER BY seq LIMIT ?"
            )
            cursor = after_seq
            while page := self._fetch(sql, (cursor, batch)):
                yield page
                cursor = page[-1][0]
            return
        sql = (
            "SELECT seq, stream, version, CAST(payload AS BLOB) FROM events"
            " WHERE stream = ? AND version > ? ORDER BY version LIMIT ?"
        )
        cursor = self._scalar(
            "SELECT coalesce(max(version), 0) FROM events WHERE stream = ? AND seq <= ?",
            (stream, after_seq),
        )
        while page := self._fetch(sql, (stream, cursor, batch)):
            yield page
            cursor = page[-1][2]

    def stream_version(self, stream: str) -> int:
        """The last version of ``stream``; 0 if it has no events."""
        return self._version(stream)

    def streams(self) -> list[str]:
        """Every stream key, sorted."""
        return [row[0] for row in self._fetch("SELECT DISTINCT stream FROM events ORDER BY 1")]

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
        sql = (
            "SELECT version, CAST(payload AS BLOB) FROM events"
            " WHERE stream = ? AND version > ? ORDER BY version LIMIT 100000"
        )
        for stream in sorted(self.streams() if streams is None else streams):
            sha.update(b"%s\x00" % stream.encode())
            version = 0
            while page := self._fetch(sql, (stream, version)):
                sha.update(b"".join(b"%d\x00%s\n" % row for row in page))
                version = page[-1][0]
        return sha.hexdigest()

    def verify_chain(self) -> int:
        """Recompute every link of the hash chain; return how many rows were checked.

        Raises IntegrityError carrying the first bad seq when a row's ``prev_hash`` is not its
        predecessor's hash or its ``hash`` does not match its contents.
        """
        sql = (
            "SELECT seq, stream, version, type, ts, CAST(payload AS BLOB), prev_hash, hash"
            " FROM events WHERE seq > ? ORDER BY seq LIMIT 100000"
        )
        prev = GENESIS
        checked = 0
        cursor = 0
        while page := self._fetch(sql, (cursor,)):
            for seq, stream, version, kind, ts, payload, prev_hash, row_hash in page:
                if prev_hash != prev:
                    raise IntegrityError(
                        f"{self.path}: event {seq} does not link to its predecessor", seq=seq
                    )
                prev = link_hash(prev, stream, version, kind, ts, payload)
                if row_hash != prev:
                    raise IntegrityError(
                        f"{self.path}: event {seq} was altered (hash mismatch)", seq=seq
                    )
            checked += len(page)
            cursor = page[-1][0]
        return checked

    # -- helpers -------------------------------------------------------------------------------

    def _version(self, stream: str) -> int:
        return self._scalar(
            "SELECT coalesce(max(version), 0) FROM events WHERE stream = ?", (stream,)
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
            raise LedgerError(f"{self.path}: cannot read event log ({exc})") from exc


def _check_file(path: Path) -> bool:
    """Whether ``path`` exists; raise if it exists but is plainly not a SQLite database."""
    if not path.exists():
        return False
    if path.is_dir():
        raise LedgerError(f"{path}: is a directory, not an event log")
    with path.open("rb") as handle:
        header = handle.read(len(_SQLITE_MAGIC))
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
