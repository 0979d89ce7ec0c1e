"""The event store: round trips, optimistic concurrency, append-only enforcement, the hash chain,
the digest, and clear errors for files that are not (readable) arena logs."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import store as store_module
from ledger.chain import ChainCursor, check_links, checked_payloads, verify_chain
from ledger.errors import ConcurrencyError, IntegrityError, LedgerError
from ledger.events import ENCODER, EVENT_TYPES, AnyEvent, Event, Marked, OrderPlaced
from ledger.schema import SCHEMA_VERSION
from ledger.store import GENESIS, EventStore, link_hash


def marked(ts: int, price: float = 0.5, cohort: str = "c") -> Marked:
    return Marked(cohort=cohort, ts=ts, markets=["m1"], prices=[[price, 1 - price]])


def placed(ts: int, amount: float = 100.0, cohort: str = "c") -> OrderPlaced:
    return OrderPlaced(
        cohort=cohort,
        ts=ts,
        agent="a",
        order_id=f"o{ts}",
        kind="buy",
        market="m1",
        side="YES",
        amount=amount,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "log.db"


def test_append_then_read_back_in_order(db: Path) -> None:
    events = [marked(1), placed(2), marked(3)]
    with EventStore.open(db) as store:
        assert store.append("s1", events) == 3
        assert store.append("s2", [placed(4)]) == 1
        assert store.append("s1", [marked(5)]) == 4
        assert list(store.read()) == [*events, placed(4), marked(5)]
        assert list(store.read("s1")) == [*events, marked(5)]
        assert store.stream_version("s1") == 4
        assert store.stream_version("nope") == 0
        assert store.streams() == ["s1", "s2"]
        assert store.last_seq() == 5


def test_read_with_seq_and_after_seq(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("a", [marked(1), marked(2)])
        store.append("b", [placed(3)])
        store.append("a", [marked(4)])
        rows = list(store.read_with_seq(batch=2))
        assert [(seq, stream, version) for seq, stream, version, _ in rows] == [
            (1, "a", 1),
            (2, "a", 2),
            (3, "b", 1),
            (4, "a", 3),
        ]
        assert rows[3][3] == marked(4)
        assert list(store.read(after_seq=2)) == [placed(3), marked(4)]
        assert list(store.read("a", after_seq=1, batch=1)) == [marked(2), marked(4)]
        assert list(store.read("a", after_seq=4)) == []


def test_columns_are_queryable_from_sql(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("s", [placed(7, amount=42.5)])
    conn = sqlite3.connect(db)
    row = conn.execute(
        "SELECT stream, version, type, ts, json_extract(payload, '$.amount') FROM events_view"
    ).fetchone()
    assert row == ("s", 1, "OrderPlaced", 7, 42.5)
    assert conn.execute("SELECT typeof(payload), payload ->> '$.agent' FROM events").fetchone() == (
        "text",
        "a",
    )


def test_expected_version_guards_the_stream(db: Path) -> None:
    with EventStore.open(db) as store:
        assert store.append("s", [marked(1)], expected_version=0) == 1
        assert store.append("s", [marked(2)], expected_version=1) == 2
        with pytest.raises(ConcurrencyError, match="version 2"):
            store.append("s", [marked(3), marked(4)], expected_version=1)
        assert store.last_seq() == 2
        assert list(store.read("s")) == [marked(1), marked(2)]
        assert store.append("s", [marked(3)], expected_version=2) == 3


def test_empty_append_returns_current_version(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("s", [marked(1)])
        assert store.append("s", []) == 1
        assert store.last_seq() == 1


def test_bad_stream_keys_and_foreign_events_are_rejected(db: Path) -> None:
    class Stray(Event, tag=True):
        pass

    with EventStore.open(db) as store:
        for key in ("", "a\x00b"):
            with pytest.raises(LedgerError, match="invalid stream key"):
                store.append(key, [marked(1)])
        with pytest.raises(LedgerError, match="Stray"):
            store.append("s", [marked(1), Stray(cohort="c", ts=1)])
        assert store.last_seq() == 0


def test_large_append_spans_several_insert_chunks(db: Path) -> None:
    events = [marked(i, price=i / 20_000) for i in range(10_000)]
    with EventStore.open(db) as store:
        assert store.append("s", events) == 10_000
        assert list(store.read(batch=3_000)) == events
        assert verify_chain(store) == 10_000


def test_payload_arrays_page_the_log_and_one_stream_in_order(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("a", [marked(1), placed(2)])
        store.append("b", [placed(3)])
        store.append("a", [marked(4)])
        pages = list(store.payload_arrays(batch=3))
        assert [len(decode_array(page)) for page in pages] == [3, 1]
        assert [e for page in pages for e in decode_array(page)] == list(store.read())
        only_a = [e for page in store.payload_arrays("a", batch=1) for e in decode_array(page)]
        assert only_a == [marked(1), placed(2), marked(4)]
        assert list(store.payload_arrays("nope")) == []


def test_payload_arrays_leave_out_skipped_types_in_sql(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("a", [marked(1), placed(2), marked(3), placed(4)])
        store.append("b", [placed(5)])
        kept = [e for page in store.payload_arrays(batch=2, skip=["OrderPlaced"]) for e in
                decode_array(page)]  # fmt: skip
        assert kept == [marked(1), marked(3)]
        # a page whose events are all skipped yields nothing, not an empty array
        assert list(store.payload_arrays("b", skip=["OrderPlaced"])) == []
        with pytest.raises(LedgerError, match="cannot skip 'Nope'"):
            list(store.payload_arrays(skip=["Nope"]))


def test_every_payload_begins_with_its_type_tag() -> None:
    """What lets ``payload_arrays`` skip a type by comparing text instead of parsing JSON."""
    for name, cls in EVENT_TYPES.items():
        payload = ENCODER.encode(example_event(cls))
        assert payload.startswith(b'{"type":"' + name.encode() + b'",'), name


def example_event(cls: type[Event]) -> Event:
    """One instance of ``cls`` with every required field filled, by type."""
    values: dict[str, Any] = {}
    for field in msgspec.structs.fields(cls):
        if field.required:
            values[field.name] = _EXAMPLES.get(field.type, "x")
    return cls(**values)


_EXAMPLES: dict[Any, Any] = {int: 1, float: 0.5, bool: True, list[str]: ["Yes", "No"],
                             list[list[float]]: [[0.5, 0.5]]}  # fmt: skip


def decode_array(page: bytes) -> list[AnyEvent]:
    return msgspec.json.decode(page, type=list[AnyEvent])


def test_failure_between_chunks_writes_nothing(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first chunk is already inserted by the pipeline's worker when the third fails."""
    calls = 0
    real = store_module._chunk_params

    def failing(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("boom")
        return real(*args)

    events = [marked(i) for i in range(3 * store_module._CHUNK)]
    with EventStore.open(db) as store:
        store.append("s", [marked(0)])
        monkeypatch.setattr(store_module, "_chunk_params", failing)
        with pytest.raises(RuntimeError, match="boom"):
            store.append("s", events)
        monkeypatch.undo()
        assert store.last_seq() == 1
        assert store.append("s", events, expected_version=1) == 1 + len(events)
        assert verify_chain(store) == 1 + len(events)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET version = 0",
        "DELETE FROM events",
        "UPDATE streams SET key = 'x'",
        "DELETE FROM streams",
    ],
)
def test_database_rejects_update_and_delete(db: Path, statement: str) -> None:
    with EventStore.open(db) as store:
        store.append("s", [marked(1)])
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(statement)
    assert conn.execute("SELECT count(*) FROM events_view").fetchone() == (1,)


def _tamper(db: Path, statement: str) -> None:
    conn = sqlite3.connect(db)
    drops = (
        f"DROP TRIGGER {t}_no_{v};" for t in ("events", "streams") for v in ("update", "delete")
    )
    conn.executescript("".join(drops) + statement)
    conn.close()


# streams a (id 1) and b (id 2); a holds seqs 1, 2 and b seqs 3, 4, 5; each edit, and the
# first seq a check must name
ALTERATIONS = [
    ("UPDATE events SET payload = replace(payload, '0.5', '0.6') WHERE seq = 3", 3),
    ("UPDATE events SET payload = json_set(payload, '$.ts', 99) WHERE seq = 2", 2),
    ("UPDATE events SET version = 9 WHERE seq = 1", 1),
    ("UPDATE events SET version = 4 WHERE seq = 4", 4),  # b reads 1, 4, 3
    ("DELETE FROM events WHERE seq = 2", 3),
    ("DELETE FROM events WHERE seq = 1", 2),
    ("UPDATE events SET hash = zeroblob(32) WHERE seq = 5", 5),
    # the last event moved to the end of the other stream: versions still count up (a: 1,
    # 2, 3), so only the hash, which covers the stream key, can tell
    ("UPDATE events SET stream_id = 1, version = 3 WHERE seq = 5", 5),
    ("UPDATE streams SET key = 'c' WHERE id = 2", 3),
    ("UPDATE events SET stream_id = 7 WHERE seq = 4", 4),
    ("UPDATE events SET seq = 9 WHERE seq = 5", 9),
    # without the unique index a stream may count 1, 2, 1: a range that starts after the 2
    # must go on from it, not accept a 1 as its stream's first
    ("DROP INDEX events_stream_version; UPDATE events SET version = 1 WHERE seq = 5", 5),
]


@pytest.mark.parametrize(("statement", "bad_seq"), ALTERATIONS)
def test_verify_chain_finds_the_first_altered_event(db: Path, statement: str, bad_seq: int) -> None:
    with EventStore.open(db) as store:
        store.append("a", [marked(1), marked(2)])
        store.append("b", [marked(3), placed(4), marked(5)])
        assert verify_chain(store) == 5
    _tamper(db, statement)
    with EventStore.open(db, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_chain(store)
    assert caught.value.seq == bad_seq
    assert f"event {bad_seq} " in str(caught.value)


@pytest.mark.parametrize(("statement", "bad_seq"), ALTERATIONS)
@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_the_chain_checked_in_two_ranges_names_the_same_first_event(
    db: Path, statement: str, bad_seq: int, cut: int
) -> None:
    """``verify`` checks a big log's chain in seq ranges, each in a process of its own: every
    range starts from the hash stored before it, and the earliest seq any range names is the
    one a single pass names; an unaltered range passes and counts its rows."""
    with EventStore.open(db) as store:
        store.append("a", [marked(1), marked(2)])
        store.append("b", [marked(3), placed(4), marked(5)])
        assert verify_chain(store, 0, cut) + verify_chain(store, cut, 5) == 5
    _tamper(db, statement)
    named = []
    with EventStore.open(db, readonly=True) as store:
        for after, through in [(0, cut), (cut, store.last_seq())]:
            try:
                verify_chain(store, after, through)
            except IntegrityError as exc:
                named.append(exc.seq)
    assert min(named) == bad_seq


def _pages(store: EventStore, after: int, size: int) -> int:
    """Check the chain from ``after`` to the end with a ChainCursor, ``size`` rows a page;
    returns the rows checked."""
    cursor = ChainCursor(store, after)
    end = store.last_seq()
    for through in [*range(after + size, end, size), end]:
        cursor.page(through)
    return cursor.last - after


@pytest.mark.parametrize(("statement", "bad_seq"), ALTERATIONS)
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_the_chain_checked_in_pages_names_the_same_first_event(
    db: Path, statement: str, bad_seq: int, size: int
) -> None:
    """``verify`` reads the chain a page at a time (pages of one stream checked from SQLite's
    summary of them, the others row by row), in ranges: for every alteration, whatever the
    pages and wherever a range starts, the earliest seq named is the one a single pass names."""
    with EventStore.open(db) as store:
        store.append("a", [marked(1), marked(2)])
        store.append("b", [marked(3), placed(4), marked(5)])
        assert _pages(store, 0, size) == 5
        payloads, streams = ChainCursor(store, 1).page(3)
        assert [json.loads(p)["ts"] for p in payloads] == [2, 3] and streams == ["a", "b"]
        assert ChainCursor(store, 2).page(5)[1] == "b"  # one stream: named once
    _tamper(db, statement)
    for cut in range(5):
        named = []
        with EventStore.open(db, readonly=True) as store:
            for after in (0, cut):
                try:
                    _pages(store, after, size)
                except IntegrityError as exc:
                    named.append(exc.seq)
        assert min(named) == bad_seq, (cut, named)


@pytest.mark.parametrize(
    ("statement", "bad_seq", "what"),
    [
        (None, None, ""),
        ("UPDATE events SET hash = zeroblob(32) WHERE seq = 4", 5, "was altered"),
        ("DELETE FROM events WHERE seq = 4", 5, "does not link to its predecessor"),
        ("UPDATE events SET payload = replace(payload, '0.5', '0.6') WHERE seq = 5", 5, "altered"),
        ("UPDATE events SET payload = replace(payload, '0.5', '0.6') WHERE seq = 2", 2, "altered"),
    ],
)
def test_a_streams_links_are_checked_across_another_streams_run(
    db: Path, statement: str | None, bad_seq: int | None, what: str
) -> None:
    """``checked_payloads`` reads one stream and takes a row's predecessor from the row before
    it while the stream runs on, looking it up only after another stream's run: a's third
    event (seq 5) must still link to b's last (seq 4), and an edit on either side of the seam
    is named where a whole-log check names it."""
    with EventStore.open(db) as store:
        store.append("a", [marked(1), marked(2)])
        store.append("b", [marked(3), marked(4)])
        store.append("a", [marked(5), marked(6)])
        pages = list(checked_payloads(store, "a", 1, 3))
        assert [json.loads(p)["ts"] for page in pages for p in page] == [2, 5]
    if statement is None:
        with EventStore.open(db, readonly=True) as store:
            assert check_links(store, "a") == 4 and check_links(store, "a", 2) == 2
        return
    _tamper(db, statement)
    with EventStore.open(db, readonly=True) as store:
        for after in (0, 1):
            with pytest.raises(IntegrityError, match=what) as caught:
                check_links(store, "a", after)
            assert caught.value.seq == bad_seq


def test_chain_links_rows_with_link_hash(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("s", [marked(1)])
        store.append("t", [marked(2)])
    conn = sqlite3.connect(db)
    (first, body1), (second, body2) = conn.execute(
        "SELECT hash, CAST(payload AS BLOB) FROM events ORDER BY seq"
    ).fetchall()
    assert first == link_hash(GENESIS, "s", body1)
    assert second == link_hash(first, "t", body2)
    # the framing by hand: sha256(previous hash || key || NUL || payload)
    assert second == hashlib.sha256(first + b"t\x00" + body2).digest()


def test_readonly_store_refuses_writes(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("s", [marked(1)])
    with EventStore.open(db, readonly=True) as store:
        assert list(store.read()) == [marked(1)]
        with pytest.raises(LedgerError, match="append failed"):
            store.append("s", [marked(2)])


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_missing_file_is_a_clear_error(db: Path) -> None:
    with pytest.raises(LedgerError, match="no such event log"):
        EventStore.open(db, readonly=True)
    with pytest.raises(LedgerError, match="no such event log"):
        EventStore.open(db, create=False)
    assert not db.exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (os.urandom(4096), "not a SQLite database"),
        (b"", "empty database"),
    ],
)
def test_foreign_files_are_clear_errors(db: Path, content: bytes, reason: str) -> None:
    _write(db, content)
    with pytest.raises(LedgerError, match=reason) as caught:
        EventStore.open(db, create=False)
    assert str(db) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_foreign_sqlite_database_is_rejected(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="not an arena event log"):
        EventStore.open(db)


@pytest.mark.parametrize("kept", [0.1, 0.5, 0.95])
def test_truncated_log_is_a_clear_error(db: Path, kept: float) -> None:
    with EventStore.open(db) as store:
        store.append("s", [marked(i) for i in range(5_000)])
    assert not Path(f"{db}-wal").exists()  # closing checkpointed everything into the file
    data = db.read_bytes()
    _write(db, data[: int(len(data) * kept)])
    with pytest.raises(LedgerError, match=r"truncated|malformed") as caught:
        EventStore.open(db, readonly=True)
    assert str(caught.value).startswith(f"{db}: ")


def _set_schema_version(db: Path, version: int | str) -> None:
    with EventStore.open(db):
        pass
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()


def test_newer_schema_version_names_both_versions(db: Path) -> None:
    _set_schema_version(db, SCHEMA_VERSION + 1)
    with pytest.raises(LedgerError, match=f"version {SCHEMA_VERSION + 1}.*{SCHEMA_VERSION}"):
        EventStore.open(db)


def test_older_schema_version_names_both_versions(db: Path) -> None:
    _set_schema_version(db, SCHEMA_VERSION - 1)
    with pytest.raises(LedgerError, match=f"version {SCHEMA_VERSION - 1}.*{SCHEMA_VERSION}"):
        EventStore.open(db, readonly=True)


@pytest.mark.parametrize("version", ["abc", "", "-1", "2.0", " 2"])
def test_a_schema_version_that_is_no_number_is_a_clear_error(db: Path, version: str) -> None:
    _set_schema_version(db, version)
    with pytest.raises(LedgerError, match=rf"^{db}: not an arena event log \(schema version '"):
        EventStore.open(db, readonly=True)


def test_reopening_keeps_appending_the_same_chain(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("s", [marked(1)])
    with EventStore.open(db) as store:
        assert store.append("s", [marked(2)], expected_version=1) == 2
        assert verify_chain(store) == 2


# -- properties ---------------------------------------------------------------------------------

Appends = list[tuple[str, list[Event]]]
_finite = st.floats(min_value=0, max_value=1, allow_nan=False)
_events = st.one_of(
    st.builds(marked, st.integers(-(2**40), 2**40), _finite),
    st.builds(placed, st.integers(0, 2**31), st.floats(allow_nan=False, allow_infinity=False)),
)
_appends = st.lists(
    st.tuples(st.sampled_from(["a", "b", "ç/流"]), st.lists(_events, max_size=5)), max_size=8
)
_settings = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_settings
@given(appends=_appends)
def test_any_appends_read_back_identically(tmp_path: Path, appends: Appends) -> None:
    path = tmp_path / f"{os.urandom(6).hex()}.db"
    with EventStore.open(path) as store:
        for stream, events in appends:
            store.append(stream, events)
        assert list(store.read()) == [e for _, events in appends for e in events]
        for stream in {stream for stream, _ in appends}:
            expected = [e for s, events in appends if s == stream for e in events]
            assert list(store.read(stream)) == expected
            assert store.stream_version(stream) == len(expected)
        assert verify_chain(store) == store.last_seq()


@_settings
@given(appends=_appends, batch=st.integers(1, 7), skip=st.sets(st.sampled_from(["Marked",
       "OrderPlaced"])))  # fmt: skip
def test_payload_arrays_are_the_log_less_the_skipped_types(
    tmp_path: Path, appends: Appends, batch: int, skip: set[str]
) -> None:
    path = tmp_path / f"{os.urandom(6).hex()}.db"
    with EventStore.open(path) as store:
        for stream, events in appends:
            store.append(stream, events)
        kept = [e for page in store.payload_arrays(batch=batch, skip=skip) for e in
                decode_array(page)]  # fmt: skip
        assert kept == [e for e in store.read() if type(e).__name__ not in skip]
        for stream in {stream for stream, _ in appends}:
            pages = list(store.payload_arrays(stream, batch, skip))
            assert all(decode_array(page) for page in pages)  # no empty pages
            own = [e for page in pages for e in decode_array(page)]
            assert own == [e for e in store.read(stream) if type(e).__name__ not in skip]


@_settings
@given(appends=_appends, data=st.data())
def test_digest_ignores_how_streams_interleave(
    tmp_path: Path, appends: Appends, data: st.DataObject
) -> None:
    """Re-append the same per-stream sequences in another global order: same digest."""
    shuffled = data.draw(st.permutations(appends))
    # a random interleaving that keeps each stream's own order: the shuffle decides which
    # stream goes next, the stream's queue decides which of its appends
    queues = {stream: iter([a for a in appends if a[0] == stream]) for stream, _ in appends}
    reordered = [next(queues[stream]) for stream, _ in shuffled]
    digests = []
    for order in (appends, reordered):
        path = tmp_path / f"{os.urandom(6).hex()}.db"
        with EventStore.open(path) as store:
            for stream, events in order:
                store.append(stream, events)
            digests.append(store.digest())
    assert digests[0] == digests[1]


def test_digest_changes_with_content_and_can_select_streams(db: Path) -> None:
    with EventStore.open(db) as store:
        store.append("a", [marked(1)])
        store.append("b", [marked(2)])
        both, only_a = store.digest(), store.digest(["a"])
        assert store.digest(["b", "a"]) == both
        assert only_a != both
        store.append("a", [marked(3)])
        assert store.digest(["a"]) != only_a


# -- a log in a folder no one may write ----------------------------------------------------------

_READ = """
import sys
from ledger.errors import LedgerError
from ledger.store import EventStore
try:
    with EventStore.open(sys.argv[1], readonly=True) as store:
        print("read", store.last_seq())
    EventStore.open(sys.argv[1])
except LedgerError as exc:
    print("error", exc)
"""


def _read_in_locked_folder(folder: Path, db: Path) -> list[str]:
    """Run the read in a process that file permissions bind: as root, one without the
    capabilities that override them (root reads and writes anything otherwise)."""
    import subprocess
    import sys

    folder.chmod(0o555)
    try:
        command = [sys.executable, "-c", _READ, str(db)]
        if os.geteuid() == 0:
            drop = "--bounding-set=-dac_override,-dac_read_search,-fowner"
            command = ["setpriv", drop, *command]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        return done.stdout.splitlines()
    finally:
        folder.chmod(0o755)


def test_a_log_in_a_read_only_folder_is_read_and_not_written(tmp_path: Path) -> None:
    """A closed log is in WAL mode, whose reader needs a ``-shm`` file SQLite cannot create
    in a folder it may not write: every read once failed with 'attempt to write a readonly
    database'. It is read as the file stands; a writer is told it cannot write."""
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "arena.db"
    with EventStore.open(db) as store:
        store.append("s", [marked(i) for i in range(3)])
    db.chmod(0o444)
    read, wrote = _read_in_locked_folder(folder, db)
    assert read == "read 3"
    assert wrote.startswith(f"error {db}: cannot write to this log (")
    assert sorted(p.name for p in folder.iterdir()) == ["arena.db"]


def test_a_wal_left_in_a_read_only_folder_is_not_silently_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "arena.db"
    with EventStore.open(db) as store:
        store.append("s", [marked(i) for i in range(3)])
        copy = tmp_path / "copy.db"  # the log and its WAL as a writer still holding it has them
        copy.write_bytes(db.read_bytes())
        wal = Path(f"{db}-wal").read_bytes()
    assert wal
    db.unlink()
    copy.rename(db)
    Path(f"{db}-wal").write_bytes(wal)
    [said] = _read_in_locked_folder(folder, db)
    assert said == (
        f"error {db}: its folder is read-only and arena.db-wal holds events not yet in the log; "
        "copy both files to a folder you can write and read the copy"
    )
