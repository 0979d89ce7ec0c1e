"""A log that proves it is whole: the five attacks that once verified OK, and random bit flips.

Each attack edits the log the way someone with the file and the ``sqlite3`` shell could: drop
the append-only triggers, then cut, append or re-chain. ``verify`` must fail on every one of
them with the layers a user has by default (the closing snapshots in the log, the head file
beside it), and still fail when the attacker also strips those, as long as the user gives the
head the replay printed (``--head``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.verify import verify_store
from ledger.anchor import head_path, read_head
from ledger.errors import IntegrityError, LedgerError
from ledger.store import EventStore, link_hash
from tests.conftest import START, WEEK, Arena, rechain


@pytest.fixture
def pristine(weekly_log: Path) -> Path:
    return weekly_log


@pytest.fixture
def log(pristine: Path, tmp_path: Path) -> Path:
    db = tmp_path / "arena.db"
    shutil.copy(pristine, db)
    shutil.copy(head_path(pristine), head_path(db))
    return db


def _tamper(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    for table in ("events", "streams", "snapshots"):
        for verb in ("update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    for statement in statements:
        conn.execute(statement)
    conn.close()


def _rechain(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")
    rechain(conn)
    conn.execute("COMMIT")
    conn.close()


def _seq(head: str | None) -> str:
    return str(head).split(":")[0]


def _verify(db: Path, head: str | None = None) -> None:
    with EventStore.open(db, readonly=True) as store:
        verify_store(store, head)


def _last_cohort(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT key FROM streams ORDER BY id DESC LIMIT 1").fetchone()[0])


def _strip_anchors(db: Path) -> None:
    """What a careful attacker adds: no snapshots table to contradict the cut, no head file."""
    _tamper(db, "DROP TABLE snapshots")
    head_path(db).unlink()


def test_the_untouched_log_verifies_against_its_recorded_head(log: Path) -> None:
    head = read_head(log)
    assert head is not None
    with EventStore.open(log, readonly=True) as store:
        result = verify_store(store)
        assert result.head == head and result.head_source == "head file"
        assert result.snapshots == 3 and result.closed == 3 and result.open_cohorts == []


ATTACKS = {
    "the last row": "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)",
    "the last 50 rows": "DELETE FROM events WHERE seq > (SELECT max(seq) - 50 FROM events)",
    "the whole last cohort": ("DELETE FROM events WHERE stream_id = (SELECT max(id) FROM streams)"),
}


@pytest.mark.parametrize("cut", list(ATTACKS))
def test_a_cut_tail_fails_on_the_closing_record(log: Path, cut: str) -> None:
    _tamper(log, ATTACKS[cut])
    head_path(log).unlink()  # the closing snapshots alone catch it
    with pytest.raises(IntegrityError, match=r"events were cut|no longer matches"):
        _verify(log)


@pytest.mark.parametrize("cut", list(ATTACKS))
def test_a_cut_tail_fails_on_the_head_file(log: Path, cut: str) -> None:
    _tamper(log, ATTACKS[cut], "DROP TABLE snapshots")
    with pytest.raises(IntegrityError, match=r"cut|no longer holds"):
        _verify(log)


@pytest.mark.parametrize("cut", list(ATTACKS))
def test_a_cut_tail_fails_on_the_printed_head(log: Path, cut: str) -> None:
    head = read_head(log)
    _tamper(log, ATTACKS[cut])
    _strip_anchors(log)
    _verify(log)  # nothing left in or beside the log to tell: the chain alone is whole
    with pytest.raises(IntegrityError, match=r"before the recorded head .*: cut"):
        _verify(log, head)


def _append_forged(db: Path, stream: str, payload: bytes) -> None:
    """A row with a correctly computed hash, as the store would have written it."""
    conn = sqlite3.connect(db, isolation_level=None)
    seq, prev = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    found = conn.execute("SELECT id FROM streams WHERE key = ?", (stream,)).fetchone()
    stream_id = (
        found[0]
        if found
        else conn.execute("INSERT INTO streams (key) VALUES (?)", (stream,)).lastrowid
    )
    version = conn.execute(
        "SELECT coalesce(max(version), 0) + 1 FROM events WHERE stream_id = ?", (stream_id,)
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO events (seq, stream_id, version, payload, hash) VALUES (?, ?, ?, ?, ?)",
        (seq + 1, stream_id, version, payload.decode(), link_hash(prev, stream, payload)),
    )
    conn.close()


def test_a_forged_row_after_a_close_fails_without_any_head(log: Path) -> None:
    cohort = _last_cohort(log)
    _strip_anchors(log)
    payload = json.dumps(
        {"type": "MarketVoided", "cohort": cohort, "ts": START + 9 * WEEK, "market": "m0"},
        separators=(",", ":"),
    ).encode()
    _append_forged(log, cohort, payload)
    with pytest.raises(IntegrityError, match=f"follows the close of cohort {cohort}"):
        _verify(log)


def test_a_forged_row_in_a_new_stream_fails_on_the_head(log: Path) -> None:
    head = read_head(log)
    payload = b'{"type":"MarketVoided","cohort":"forged","ts":0,"market":"m0"}'
    _append_forged(log, "forged", payload)
    with pytest.raises(IntegrityError, match=r"1 event\(s\) were appended after the recorded"):
        _verify(log)
    _strip_anchors(log)
    with EventStore.open(log, readonly=True) as store:
        assert verify_store(store).open_cohorts == ["forged"]  # named, though it verifies
    with pytest.raises(IntegrityError, match="appended after the recorded head"):
        _verify(log, head)


def test_rechaining_after_removing_the_first_cohort_fails(log: Path) -> None:
    head = read_head(log)
    _tamper(log, "DELETE FROM events WHERE stream_id = 1")
    _rechain(log)
    with EventStore.open(log, readonly=True) as store:
        store.verify_chain()  # the forgery is a whole chain on its own
    with pytest.raises(IntegrityError, match="no longer matches the event it was taken after"):
        _verify(log)
    _strip_anchors(log)
    with pytest.raises(IntegrityError, match=f"before the recorded head at seq {_seq(head)}: cut"):
        _verify(log, head)


def test_verify_names_every_cohort_that_never_closed(arena: Arena, log: Path) -> None:
    cohort = _last_cohort(log)
    _tamper(log, "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)")
    _strip_anchors(log)
    result = arena("verify", log)
    assert result.exit_code == 0, result.output
    assert f"never closed: 1 cohort(s): {cohort}" in result.output


def test_the_cli_checks_the_head_it_is_given(arena: Arena, log: Path) -> None:
    head = read_head(log)
    assert head is not None
    ok = arena("verify", log, "--head", head)
    assert ok.exit_code == 0 and "matches the --head" in ok.output
    other = f"{head.split(':')[0]}:{'ab' * 32}"
    bad = arena("verify", log, "--head", other, "--json")
    assert bad.exit_code == 1 and "no longer holds the recorded head" in bad.output
    garbled = arena("verify", log, "--head", "xyz")
    assert garbled.exit_code == 1 and "is not a head" in garbled.output


def _logical(db: Path) -> list[tuple[object, ...]]:
    """Everything the log means, read through the table and through the stream index."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows: list[tuple[object, ...]] = []
        for sql in (
            "SELECT * FROM meta ORDER BY key",
            "SELECT * FROM streams ORDER BY id",
            "SELECT * FROM events ORDER BY seq",
            "SELECT stream_id, version, seq FROM events INDEXED BY events_stream_version"
            " ORDER BY stream_id, version",
            "SELECT * FROM snapshots ORDER BY id",
        ):
            rows += conn.execute(sql).fetchall()
        return rows
    finally:
        conn.close()


def test_a_flip_in_the_stream_index_fails_verify_though_every_hash_holds(log: Path) -> None:
    """The last byte of the (stream, version) index's root page belongs to one of its cells:
    flipped, the index no longer matches the events table, while every event row (and so the
    chain) is untouched. SQLite's own check names it; the chain alone passed it."""
    conn = sqlite3.connect(log)
    (root,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'events_stream_version'"
    ).fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    raw = bytearray(log.read_bytes())
    raw[root * size - 1] ^= 1
    log.write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match="the SQLite file is damaged"):
        _verify(log)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_bit_flip_either_fails_verify_or_changes_nothing(
    pristine: Path, tmp_path: Path, data: st.DataObject
) -> None:
    """A flip in a byte that carries meaning must fail ``verify``; one that lands in free or
    unused space of the file may pass, and then everything the log says is unchanged."""
    db = tmp_path / "flip.db"
    shutil.copy(pristine, db)
    shutil.copy(head_path(pristine), head_path(db))
    raw = bytearray(db.read_bytes())
    offset = data.draw(st.integers(0, len(raw) - 1), label="offset")
    raw[offset] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    db.write_bytes(bytes(raw))
    try:
        _verify(db)
    except LedgerError:
        return
    assert _logical(db) == _logical(pristine)


def test_the_chain_checked_in_a_child_process_names_the_same_seq(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big logs have their chain checked by ``python -m ledger.chain`` beside the fold; the
    answer (and the seq of a broken link) is the one the in-process check gives."""
    monkeypatch.setattr("arena.verify._PARALLEL_FROM", 0)
    with EventStore.open(log, readonly=True) as store:
        assert verify_store(store).events == store.last_seq()
    _tamper(
        log, "UPDATE events SET payload = replace(payload, '\"ts\":', '\"ts\": ') WHERE seq = 9"
    )
    with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_store(store)
    assert caught.value.seq == 9 and "event 9 was altered (hash mismatch)" in str(caught.value)


def test_the_chain_checked_in_several_ranges_names_the_same_seq(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big log's chain is cut into ranges, each checked by a process of its own; a broken
    link in any of them is named as the single pass names it, the others counted whole."""
    import arena.verify
    from ledger import chain

    monkeypatch.setattr(arena.verify, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(chain, "MIN_RANGE", 10)
    with EventStore.open(log, readonly=True) as store:
        last = store.last_seq()
        assert len(chain.ranges(last, 3)) == 3
        start = chain.start(store, 3)
        assert start() == last
    _tamper(log, "DELETE FROM events WHERE seq = 40")
    with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        chain.start(store, 3)()
    assert caught.value.seq == 41 and "event 41 does not link to its predecessor" in str(
        caught.value
    )


def test_faults_in_two_cohorts_are_reported_at_the_first_seq(tmp_path: Path) -> None:
    """``verify`` folds stream by stream (in key order); when two cohorts hold faults, the one
    reported is the first in the log, whichever stream it is in."""
    from ledger.events import CohortOpened, DecisionMade

    def opened(cohort: str) -> CohortOpened:
        return CohortOpened(cohort=cohort, ts=0, start=0, rules="v1", cash=100.0,
                            agents=["x"], decision_cadence="1w", mark_cadence="1d")  # fmt: skip

    def stranger(cohort: str) -> DecisionMade:  # an agent the cohort never opened
        return DecisionMade(cohort=cohort, ts=1, agent="y", week=1, action="HOLD")

    db = tmp_path / "two.db"
    with EventStore.open(db) as store:
        store.append("b", [opened("b")])
        store.append("a", [opened("a")])
        store.append("b", [stranger("b")])  # seq 3
        store.append("a", [stranger("a")])  # seq 4, in the stream folded first
    with EventStore.open(db, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_store(store)
    assert caught.value.seq == 3
    assert "event 3 does not fit the events before it" in str(caught.value)
