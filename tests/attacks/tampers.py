"""Tampered logs, made the way someone with the file, the ``sqlite3`` shell and this source
could make them: drop the append-only triggers, edit, and recompute every hash the edit
touches (a snapshot's own hash, the chain, ``DB.head``) so that nothing is left broken that a
careless check would notice.

Each tamper takes a copy of a real replay (``tests.conftest.weekly_log``: three weekly
cohorts, each closed with its closing snapshot, and the head beside the log) and changes it
in place. Nothing here is random: the same log gives the same tampered bytes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from ledger.anchor import write_head
from ledger.snapshot import snapshot_hash
from ledger.store import EventStore, link_hash
from tests.conftest import rechain

RICHER = 5_000.0
"""What a forger adds to the favourite's cash: its profit grows by exactly this much."""


def connect(db: Path) -> sqlite3.Connection:
    """The log with its append-only triggers dropped, in autocommit mode."""
    conn = sqlite3.connect(db, isolation_level=None)
    for table in ("events", "streams", "snapshots"):
        for verb in ("update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    return conn


def rewrite_head(db: Path) -> None:
    """``DB.head`` moved to wherever the log now ends, as the forger's last step."""
    with EventStore.open(db) as store:
        write_head(store)


def stream_ids(db: Path) -> list[int]:
    """The stream ids in log order (the first cohort replayed first)."""
    with closing(sqlite3.connect(db)) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM streams ORDER BY id")]


def closing_snapshot(conn: sqlite3.Connection, stream_id: int) -> tuple[int, dict[str, object]]:
    """The id and image (as JSON) of a cohort's closing snapshot."""
    snapshot_id, image = conn.execute(
        "SELECT id, CAST(state AS BLOB) FROM snapshots WHERE stream_id = ? AND closing",
        (stream_id,),
    ).fetchone()
    return snapshot_id, json.loads(image)


def richer(image: dict[str, object]) -> bytes:
    """The image with the favourite's cash raised by ``RICHER``, as compact JSON."""
    books = image["books"]
    assert isinstance(books, list)
    for book in books:
        if book["agent"] == "fav":
            book["cash"] += RICHER
    return json.dumps(image, separators=(",", ":")).encode()


def _store_snapshot(
    conn: sqlite3.Connection, stream_id: int, version: int, image: bytes, *, closing: bool
) -> None:
    seq, chain = conn.execute(
        "SELECT seq, hash FROM events WHERE stream_id = ? AND version = ?", (stream_id, version)
    ).fetchone()
    conn.execute(
        "INSERT INTO snapshots (stream_id, version, seq, chain_hash, closing, format, state, hash)"
        " VALUES (?, ?, ?, ?, ?, 1, CAST(? AS TEXT), ?)",
        (stream_id, version, seq, chain, int(closing), image, snapshot_hash(chain, 1, image)),
    )


def _append(conn: sqlite3.Connection, stream: str, payloads: list[bytes]) -> None:
    """Rows with correctly computed hashes after the log's last, as the store writes them."""
    seq, prev = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    found = conn.execute("SELECT id FROM streams WHERE key = ?", (stream,)).fetchone()
    if found is None:
        found = (conn.execute("INSERT INTO streams (key) VALUES (?)", (stream,)).lastrowid,)
    stream_id = found[0]
    (version,) = conn.execute(
        "SELECT coalesce(max(version), 0) FROM events WHERE stream_id = ?", (stream_id,)
    ).fetchone()
    for payload in payloads:
        seq, version = seq + 1, version + 1
        prev = link_hash(prev, stream, payload)
        conn.execute(
            "INSERT INTO events (seq, stream_id, version, payload, hash) VALUES (?, ?, ?, ?, ?)",
            (seq, stream_id, version, payload.decode(), prev),
        )


# -- the tampers ------------------------------------------------------------------------------


def unflagged_closing_snapshot(db: Path) -> None:
    """The first cohort's closing snapshot made $5,000 richer, marked as not closing (so no
    check of the close digest is due on the flag's word) and its hash recomputed."""
    conn = connect(db)
    first = stream_ids(db)[0]
    snapshot_id, image = closing_snapshot(conn, first)
    forged = richer(image)
    chain = conn.execute("SELECT chain_hash FROM snapshots WHERE id = ?", (snapshot_id,))
    row_hash = snapshot_hash(chain.fetchone()[0], 1, forged)
    conn.execute(
        "UPDATE snapshots SET state = CAST(? AS TEXT), hash = ?, closing = 0 WHERE id = ?",
        (forged, row_hash, snapshot_id),
    )
    conn.close()


def forged_periodic_snapshot(db: Path) -> None:
    """The last cohort's closing snapshot removed, and a periodic one stored one event before
    its close: the state there (the closing image without its close), $5,000 richer, hashed
    as the writer hashes it. A read restores it and folds the close after it."""
    conn = connect(db)
    last = stream_ids(db)[-1]
    snapshot_id, image = closing_snapshot(conn, last)
    conn.execute("DELETE FROM snapshots WHERE id = ?", (snapshot_id,))
    image["closed"] = None
    (version,) = conn.execute(
        "SELECT max(version) FROM events WHERE stream_id = ?", (last,)
    ).fetchone()
    _store_snapshot(conn, last, version - 1, richer(image), closing=False)
    conn.close()


def fill_after_close(db: Path) -> None:
    """A copy of the last cohort's last fill of the favourite appended after its close (a
    buy of the same market again, with a new order id), chained, and ``DB.head`` moved to it."""
    conn = connect(db)
    last = stream_ids(db)[-1]
    key, payload = conn.execute(
        "SELECT streams.key, payload FROM events JOIN streams ON streams.id = stream_id"
        " WHERE stream_id = ? AND payload ->> '$.type' = 'OrderFilled'"
        " AND payload ->> '$.agent' = 'fav' ORDER BY seq DESC LIMIT 1",
        (last,),
    ).fetchone()
    fill = json.loads(payload)
    fill["order_id"] += "-again"
    _append(conn, key, [json.dumps(fill, separators=(",", ":")).encode()])
    conn.close()
    rewrite_head(db)


FORGED_COHORT = "2024-01-28-f0f0f0f0"


def extra_cohort(db: Path) -> None:
    """A whole cohort that no run wrote, appended and chained: the first cohort's events
    under a new cohort id, its close (and its digest) copied as they were."""
    conn = connect(db)
    first = stream_ids(db)[0]
    (key,) = conn.execute("SELECT key FROM streams WHERE id = ?", (first,)).fetchone()
    payloads = [
        row[0].replace(f'"cohort":"{key}"', f'"cohort":"{FORGED_COHORT}"').encode()
        for row in conn.execute(
            "SELECT payload FROM events WHERE stream_id = ? ORDER BY version", (first,)
        )
    ]
    _append(conn, FORGED_COHORT, payloads)
    conn.close()


def extra_cohort_head_moved(db: Path) -> None:
    """``extra_cohort``, and ``DB.head`` moved to its end."""
    extra_cohort(db)
    rewrite_head(db)


ALIEN_STREAM = "2024-01-28-a1a1a1a1"


def fill_in_a_stream_of_its_own(db: Path) -> None:
    """A copy of the first cohort's last fill of the favourite (its cohort unchanged) in a new
    stream after the log's end, chained, ``DB.head`` moved to it: folded by cohort, it lands
    in the first cohort's state, after the snapshot that proved it."""
    conn = connect(db)
    first = stream_ids(db)[0]
    (payload,) = conn.execute(
        "SELECT payload FROM events WHERE stream_id = ? AND payload ->> '$.type' = 'OrderFilled'"
        " AND payload ->> '$.agent' = 'fav' ORDER BY seq DESC LIMIT 1",
        (first,),
    ).fetchone()
    fill = json.loads(payload)
    fill["order_id"] += "-again"
    _append(conn, ALIEN_STREAM, [json.dumps(fill, separators=(",", ":")).encode()])
    conn.close()
    rewrite_head(db)


def _halve_first_fill(conn: sqlite3.Connection) -> None:
    conn.execute(
        "UPDATE events SET payload = json_set(payload, '$.amount', payload ->> '$.amount' / 2,"
        " '$.shares', payload ->> '$.shares' / 2)"
        " WHERE seq = (SELECT min(seq) FROM events WHERE payload ->> '$.type' = 'OrderFilled'"
        " AND payload ->> '$.agent' = 'fav')"
    )


def rechained_halved_fill(db: Path) -> None:
    """The favourite's first fill halved (amount and shares), every hash from there on
    recomputed, and ``DB.head`` moved to the new last hash. The snapshots stay."""
    conn = connect(db)
    conn.execute("BEGIN")
    _halve_first_fill(conn)
    rechain(conn)
    conn.execute("COMMIT")
    conn.close()
    rewrite_head(db)


def rechained_halved_fill_no_snapshots(db: Path) -> None:
    """``rechained_halved_fill`` with the snapshots dropped too: only the closes are left."""
    rechained_halved_fill(db)
    conn = connect(db)
    conn.execute("DROP TABLE snapshots")
    conn.close()


# -- bit flips in an index --------------------------------------------------------------------


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``at``: its value and the offset after it."""
    value = 0
    for k in range(9):
        byte = data[at + k]
        if k == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + k + 1
    raise AssertionError("unreachable")


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def index_entries(db: Path, index: str) -> list[tuple[int, list[tuple[int, int, int]]]]:
    """The cells of the index's root page, which is its only leaf for a log this small:
    ``(file offset of the cell's record body, [(value, file offset, size), ...])`` for each
    integer column (a text column is ``(len, offset, -1)``)."""
    with closing(sqlite3.connect(db)) as conn:
        found = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,))
        (root,) = found.fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    raw = db.read_bytes()
    page = (root - 1) * size
    assert raw[page] == 0x0A, "the index outgrew one leaf page"
    cells = int.from_bytes(raw[page + 3 : page + 5], "big")
    out = []
    for k in range(cells):
        cell = page + int.from_bytes(raw[page + 8 + 2 * k : page + 10 + 2 * k], "big")
        _, record = _varint(raw, cell)
        header_size, at = _varint(raw, record)
        types = []
        while at < record + header_size:
            serial, at = _varint(raw, at)
            types.append(serial)
        body = record + header_size
        columns = []
        for serial in types:
            if serial in _INT_SIZES:
                n = _INT_SIZES[serial]
                columns.append((int.from_bytes(raw[body : body + n], "big", signed=True), body, n))
                body += n
            elif serial in (8, 9):
                columns.append((serial - 8, body, 0))
            else:
                n = (serial - 13) // 2
                columns.append((n, body, -1))
                body += n
        out.append((record, columns))
    return out


def _stretch(db: Path, stream_id: int) -> list[list[tuple[int, int, int]]]:
    """The ``(stream, version)`` index's entries of one stream, in order."""
    entries = index_entries(db, "events_stream_version")
    return [columns for _, columns in entries if columns[0][0] == stream_id]


def flip(db: Path, offset: int, bit: int) -> None:
    raw = bytearray(db.read_bytes())
    raw[offset] ^= 1 << bit
    db.write_bytes(bytes(raw))


def flip_last_version_in_stream_index(db: Path) -> None:
    """One bit of the second cohort's last entry in the ``(stream, version)`` index: the entry
    of its close now claims an earlier version. Every row of the events table is untouched."""
    entries = _stretch(db, stream_ids(db)[1])
    version, offset, size = entries[-1][1]
    bit = next(b for b in range(3, 8) if version >> b & 1)  # a set bit: the version drops
    flip(db, offset + size - 1, bit)


def flip_seq_in_stream_index(db: Path) -> None:
    """One bit of the seq (the row id) of an entry in the middle of the first cohort's
    stretch of the ``(stream, version)`` index: that version now points at a later row of the
    same cohort, which a read by stream meets twice, and the row it named not at all."""
    entries = _stretch(db, stream_ids(db)[0])
    middle = entries[len(entries) // 2]
    seq, offset, size = middle[2]
    flip(db, offset + size - 1, next(b for b in range(1, 4) if not seq >> b & 1))


def flip_key_in_streams_index(db: Path) -> None:
    """One bit of a character of the first cohort's key in the index of stream keys: the log
    seems to hold a cohort more, whose key leads to the first cohort's events."""
    entries = index_entries(db, "sqlite_autoindex_streams_1")
    length, offset, _ = entries[0][1][0]
    flip(db, offset + length - 1, 0)


TAMPERS: dict[str, Callable[[Path], None]] = {
    "unflagged closing snapshot": unflagged_closing_snapshot,
    "forged periodic snapshot": forged_periodic_snapshot,
    "fill after the close, head moved": fill_after_close,
    "extra cohort": extra_cohort,
    "extra cohort, head moved": extra_cohort_head_moved,
    "a cohort's fill in a stream of its own, head moved": fill_in_a_stream_of_its_own,
    "re-chained halved fill": rechained_halved_fill,
    "re-chained halved fill, no snapshots": rechained_halved_fill_no_snapshots,
    "flipped version in the stream index": flip_last_version_in_stream_index,
    "flipped seq in the stream index": flip_seq_in_stream_index,
    "flipped key in the streams index": flip_key_in_streams_index,
}
