"""The on-disk layout of an event log, and the check that a file really is one we can read.

The layout lives apart from the store so that a schema change is one reviewable diff: bump
``SCHEMA_VERSION``, and teach :func:`ensure_schema` to migrate the old version (or keep refusing
it with a message that names both versions, which is what it does today).

Design choices a reader of the file should know:

* ``type`` and ``ts`` are copies of the payload's fields, kept as columns so the ``sqlite3``
  shell can filter on them; the hash chain covers them like every other column.
* UPDATE and DELETE are rejected by triggers, so even the ``sqlite3`` shell cannot edit the log
  without first dropping them (and then ``verify_chain`` notices).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from ledger.errors import LedgerError

SCHEMA_VERSION = 1
APPLICATION = "arena-event-log"

_EVENTS_DDL = """
CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    stream TEXT NOT NULL,
    version INTEGER NOT NULL,
    type TEXT NOT NULL,
    ts INTEGER NOT NULL,
    payload TEXT NOT NULL,
    prev_hash BLOB NOT NULL,
    hash BLOB NOT NULL
)
"""

_APPEND_ONLY_TRIGGERS = """
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"""


def ensure_schema(conn: sqlite3.Connection, path: Path, *, create: bool) -> None:
    """Create the schema in an empty database, or check that an existing one is ours and current.

    Raises LedgerError with the file name and the reason when the file is a foreign SQLite
    database or was written by a schema version this code cannot read.
    """
    db = sqlite_utils.Database(conn)
    if create and not db.table_names():
        _create(db)
    tables = set(db.table_names())
    if not tables:
        raise LedgerError(f"{path}: empty database, not an arena event log")
    if not {"meta", "events"} <= tables:
        raise LedgerError(f"{path}: not an arena event log (no meta/events tables)")
    meta = {row["key"]: row["value"] for row in db.table("meta").rows}
    if meta.get("application") != APPLICATION:
        raise LedgerError(f"{path}: not an arena event log (meta.application is missing)")
    found = int(meta.get("schema_version", 0))
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


def _create(db: sqlite_utils.Database) -> None:
    """Create everything in one IMMEDIATE transaction, so two processes opening the same new
    file cannot both create it (the loser sees the winner's tables and does nothing)."""
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        if not db.table_names():
            db.table("meta").create({"key": str, "value": str}, pk="key")
            db.table("meta").insert_all(
                [
                    {"key": "application", "value": APPLICATION},
                    {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                ]
            )
            db.execute(_EVENTS_DDL)
            db.table("events").create_index(["stream", "version"], unique=True)
            db.executescript(_APPEND_ONLY_TRIGGERS)
    except BaseException:
        db.conn.execute("ROLLBACK")
        raise
    db.conn.execute("COMMIT")
