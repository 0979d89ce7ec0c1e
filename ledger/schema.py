"""The on-disk layout of an event log, and the check that a file really is one we can read.

The layout lives apart from the store so that a schema change is one reviewable diff: bump
``SCHEMA_VERSION``, and teach :func:`ensure_schema` to migrate the old version (or keep refusing
it with a message that names both versions, which is what it does today).

Design choices a reader of the file should know (version 2; version 1 stored each row's
``prev_hash`` and a text stream key, ``type`` and ``ts`` columns, about 380 bytes an event):

* A row is only what cannot be derived: ``stream_id``, ``version``, the JSON ``payload`` (TEXT,
  so ``json_extract(payload, '$.agent')`` works in the shell) and its chain ``hash``. About 315
  bytes an event instead of 380, and a smaller ``(stream_id, version)`` index.
* ``streams`` maps the integer id to the stream key once, instead of repeating the key in every
  row and index entry.
* ``type`` and ``ts`` are in the payload. SQLite evaluates even VIRTUAL generated columns on
  every INSERT (measured: about 1.5 us an event, more than the rest of the insert), so they live
  in the ``events_view`` view instead, with the stream key:
  ``SELECT type, count(*) FROM events_view GROUP BY type`` in the ``sqlite3`` shell.
* UPDATE and DELETE are rejected by triggers on both tables, so even the ``sqlite3`` shell cannot
  edit the log without first dropping them (and then ``verify_chain`` notices).
* ``snapshots`` (see :mod:`ledger.snapshot`) is created by the first snapshot written, not with
  the log, so a log written before snapshots existed is still schema version 2 and is read as
  it is; ``arena verify --write-snapshots`` adds the table and its rows, never touching an
  event. A row names the stream version it was taken after, that event's global ``seq`` and
  chain ``hash`` (so a snapshot cannot move to another place in the log, and a log cut before
  a snapshot, or re-chained under it, no longer matches it), whether it was taken at the
  cohort's close (the per-cohort closing record), the image's ``format``, the readable JSON
  ``state``, and its own ``hash`` over all of that. It is append-only like the events.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ledger.errors import LedgerError

SCHEMA_VERSION = 2
APPLICATION = "arena-event-log"

_DDL = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE streams (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE)",
    """CREATE TABLE events (
        seq INTEGER PRIMARY KEY,
        stream_id INTEGER NOT NULL REFERENCES streams (id),
        version INTEGER NOT NULL,
        payload TEXT NOT NULL,
        hash BLOB NOT NULL
    )""",
    "CREATE UNIQUE INDEX events_stream_version ON events (stream_id, version)",
    # the model calls alone (ledger.usage): a report finds a log's few, or none, without a scan
    """CREATE INDEX events_model_calls ON events (seq)
        WHERE payload >= '{"type":"ModelCalled",' AND payload < '{"type":"ModelCalled-'""",
    """CREATE VIEW events_view AS
        SELECT seq, streams.key AS stream, version, payload ->> '$.type' AS type,
               payload ->> '$.ts' AS ts, payload, hash
        FROM events JOIN streams ON streams.id = events.stream_id""",
    *(
        f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table}"
        f" BEGIN SELECT RAISE(ABORT, '{table} are append-only'); END"
        for table in ("events", "streams")
        for verb in ("UPDATE", "DELETE")
    ),
)


SNAPSHOT_DDL = (
    """CREATE TABLE IF NOT EXISTS snapshots (
        id INTEGER PRIMARY KEY,
        stream_id INTEGER NOT NULL REFERENCES streams (id),
        version INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        chain_hash BLOB NOT NULL,
        closing INTEGER NOT NULL,
        format INTEGER NOT NULL,
        state TEXT NOT NULL,
        hash BLOB NOT NULL,
        UNIQUE (stream_id, version)
    )""",
    *(
        f"CREATE TRIGGER IF NOT EXISTS snapshots_no_{verb.lower()} BEFORE {verb} ON snapshots"
        " BEGIN SELECT RAISE(ABORT, 'snapshots are append-only'); END"
        for verb in ("UPDATE", "DELETE")
    ),
)
"""The snapshots table, created inside the transaction of the first snapshot written."""


def has_snapshots(conn: sqlite3.Connection) -> bool:
    return "snapshots" in _tables(conn)


def ensure_schema(
    conn: sqlite3.Connection, path: Path, *, create: bool, empty_ok: bool = False
) -> None:
    """Create the schema in an empty database, or check that an existing one is ours and current.

    Raises LedgerError with the file name and the reason when the file is a foreign SQLite
    database or was written by a schema version this code cannot read. ``empty_ok`` lets a
    database with no tables pass (one about to be created), so a writer can check a file it
    found before its pragmas change anything in it (WAL mode is written to the file's header).
    """
    if create and not _tables(conn):
        _create(conn)
    tables = _tables(conn)
    if not tables:
        if empty_ok:
            return
        raise LedgerError(f"{path}: empty database, not an arena event log")
    if not {"meta", "events"} <= tables:
        raise LedgerError(f"{path}: not an arena event log (no meta/events tables)")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("application") != APPLICATION:
        raise LedgerError(f"{path}: not an arena event log (meta.application is missing)")
    version = meta.get("schema_version", "0")
    if not version.isdigit():
        raise LedgerError(f"{path}: not an arena event log (schema version {version!r})")
    found = int(version)
    if found > SCHEMA_VERSION:
        raise LedgerError(
            f"{path}: written by a newer arena (schema version {found}); "
            f"this arena reads up to schema version {SCHEMA_VERSION}"
        )
    if found < SCHEMA_VERSION:
        raise LedgerError(
            f"{path}: schema version {found} is older than the current {SCHEMA_VERSION} "
            "and no migration exists for it"
        )


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _create(conn: sqlite3.Connection) -> None:
    """Create everything in one IMMEDIATE transaction, so two processes opening the same new
    file cannot both create it (the loser sees the winner's tables and does nothing)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _tables(conn):
            for statement in _DDL:
                conn.execute(statement)
            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("application", APPLICATION), ("schema_version", str(SCHEMA_VERSION))],
            )
    except BaseException:
        if conn.in_transaction:  # a full disk has already rolled it back
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
