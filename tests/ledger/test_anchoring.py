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
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.verify.log import verify_store, write_snapshots
from ledger.anchor import head_path, read_head
from ledger.chain import verify_chain
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
        verify_chain(store)  # the forgery is a whole chain on its own
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


def test_a_head_that_cannot_be_recorded_is_one_line_giving_it(arena: Arena, log: Path) -> None:
    """A DB.head that is a folder (or not writable) ended the replay in IsADirectoryError."""
    head = str(read_head(log))
    head_path(log).unlink()
    head_path(log).mkdir()
    said = arena("replay", "--tape", "sample", "--agent", "h=hold", "--db", log)
    assert said.exit_code == 1
    [line] = said.output.strip().splitlines()[-1:]
    assert line.startswith(f"Error: {head_path(log)}: cannot record the head (Is a directory)")
    assert "the log is whole, its head is " in line and line.split()[-1] != head
    assert not head_path(log).with_name(head_path(log).name + ".tmp").exists()
    assert arena("verify", log, "--head", line.split()[-1]).exit_code == 0


def test_a_head_whose_seq_and_hash_disagree_is_named_so(arena: Arena, log: Path) -> None:
    """The log's own last hash under another seq: no event was appended (which it once said,
    as '0 event(s) were appended'); the head and the log disagree on where it ends."""
    seq, row_hash = str(read_head(log)).split(":")
    for other in (int(seq) + 5, int(seq) - 1):
        said = arena("verify", log, "--head", f"{other}:{row_hash}")
        assert said.exit_code == 1
        assert f"the head names seq {other} but its hash is event {seq}'s" in said.output
        assert "appended" not in said.output


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
    _flip_in_the_index(log)
    with pytest.raises(IntegrityError, match="the SQLite file is damaged"):
        _verify(log)


def _flip_in_the_index(log: Path) -> None:
    conn = sqlite3.connect(log)
    (root,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'events_stream_version'"
    ).fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    raw = bytearray(log.read_bytes())
    raw[root * size - 1] ^= 1
    log.write_bytes(bytes(raw))


def test_the_cli_says_a_fault_in_one_line_and_json_names_its_seq(arena: Arena, log: Path) -> None:
    """As text a fault is the CLI edge's one line, naming its seq where it has one (and not
    'seq None' where it has none); ``--json`` answers with the seq as a field."""
    _tamper(
        log, "UPDATE events SET payload = replace(payload, '\"ts\":', '\"ts\": ') WHERE seq = 9"
    )
    text = arena("verify", log)
    assert text.exit_code == 1
    assert text.output.strip().splitlines() == [
        f"Error: {log}: event 9 was altered (hash mismatch)"
    ]
    answer = json.loads(arena("verify", log, "--json").output)
    assert (answer["ok"], answer["first_bad_seq"]) == (False, 9)
    _flip_in_the_index(log)
    damaged = arena("verify", log)
    assert damaged.exit_code == 1 and "the SQLite file is damaged" in damaged.output
    assert "None" not in damaged.output


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


@pytest.fixture
def in_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the small test log big enough to be checked in ranges, and its pages small."""
    import arena.verify.log
    import arena.verify.ranges

    monkeypatch.setattr(arena.verify.log, "PARALLEL_FROM", 0)
    monkeypatch.setattr(arena.verify.log, "MIN_RANGE", 1)
    monkeypatch.setattr(arena.verify.ranges, "PAGE", 7)


def _fill_in_second_cohort(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        (seq,) = conn.execute(
            "SELECT min(seq) FROM events WHERE stream_id = 2"
            " AND payload ->> '$.type' = 'OrderFilled' AND payload ->> '$.kind' = 'buy'"
        ).fetchone()
    return int(seq)


def _cut_after_first_cohort(db: Path) -> str:
    return f"DELETE FROM events WHERE seq = {_last_seq_of(db, 1) + 1}"


def _last_seq_of(db: Path, stream_id: int) -> int:
    with sqlite3.connect(db) as conn:
        (seq,) = conn.execute(
            "SELECT max(seq) FROM events WHERE stream_id = ?", (stream_id,)
        ).fetchone()
    return int(seq)


def test_a_log_checked_in_ranges_gives_what_one_pass_gives(log: Path, in_ranges: None) -> None:
    """Cut at the closes of its first two cohorts (the snapshots no other stream runs across),
    the log is checked in three ranges, two of them by ``python -m arena.verify.ranges``; the
    counts are the single pass's, and every state is held by a snapshot (none to write)."""
    from arena.verify.log import plan
    from arena.verify.ranges import positions_of

    with EventStore.open(log, readonly=True) as store:
        snapshots = store.snapshots()
        last = store.last_seq()
        cuts = [_last_seq_of(log, 1), _last_seq_of(log, 2)]
        positions = positions_of(store, snapshots)
        assert plan(store, snapshots, positions, last, 3) == [
            (0, cuts[0]),
            (*cuts,),
            (cuts[1], last),
        ]
        assert plan(store, snapshots, positions, last, 1) == [(0, last)]
        whole, parted = verify_store(store, parts=1), verify_store(store, parts=3)
    assert parted.events == whole.events == last
    assert (parted.closed, parted.cohorts, parted.snapshots) == (3, 3, 3)
    assert (whole.closed, whole.cohorts, whole.snapshots) == (3, 3, 3)
    assert parted.open_cohorts == whole.open_cohorts == []
    assert parted.unsaved == whole.unsaved == {}


def test_a_state_no_snapshot_holds_comes_back_from_the_child(log: Path, in_ranges: None) -> None:
    """Without the first cohort's closing snapshot the log can be cut only at the second's
    close: the child that checks the first two cohorts sends back the first one's state (and
    only it), which ``--write-snapshots`` then stores, as after a single pass."""
    from arena.verify.log import plan
    from arena.verify.ranges import positions_of

    _tamper(log, "DELETE FROM snapshots WHERE stream_id = 1")
    with EventStore.open(log, readonly=True) as store:
        snapshots, last = store.snapshots(), store.last_seq()
        cut = _last_seq_of(log, 2)
        assert plan(store, snapshots, positions_of(store, snapshots), last, 2) == [
            (0, cut),
            (cut, last),
        ]
    states = []
    for parts in (1, 2):
        with EventStore.open(log, readonly=True) as store:
            result = verify_store(store, parts=parts)
        assert (result.cohorts, result.closed, result.snapshots) == (3, 3, 2)
        assert list(result.unsaved) == [_first_cohort(log)]
        states.append(result.unsaved[_first_cohort(log)].snapshot())
    assert states[0] == states[1]
    with EventStore.open(log) as store:
        assert write_snapshots(store, verify_store(store, parts=2)) == 1
        assert verify_store(store, parts=2).unsaved == {}


def _first_cohort(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT key FROM streams WHERE id = 1").fetchone()[0])


@pytest.mark.parametrize(
    "alteration",
    [
        lambda db: (
            "UPDATE events SET payload = replace(payload, '\"ts\":', '\"ts\": ') WHERE seq = 9",
            9,
            "event 9 was altered (hash mismatch)",
        ),
        lambda db: (
            _cut_after_first_cohort(db),
            _last_seq_of(db, 1) + 2,
            "does not link to its predecessor",
        ),
        lambda db: (
            "UPDATE events SET payload = json_set(payload, '$.amount',"
            f" 2 * (payload ->> '$.amount')) WHERE seq = {_fill_in_second_cohort(db)}",
            _fill_in_second_cohort(db),
            "was altered (hash mismatch)",
        ),
    ],
)
def test_a_fault_found_in_ranges_is_named_as_one_pass_names_it(
    log: Path, in_ranges: None, alteration: Callable[[Path], tuple[str, int, str]]
) -> None:
    """Whichever range holds the fault, the error is the single pass's, word for word."""
    statement, seq, what = alteration(log)
    _tamper(log, statement)
    errors = []
    for parts in (1, 3):
        with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
            verify_store(store, parts=parts)
        errors.append((caught.value.seq, str(caught.value)))
    assert errors[0] == errors[1]
    assert errors[0][0] == seq and what in errors[0][1]


def test_a_forged_fill_rechained_is_named_by_the_range_that_folds_it(
    log: Path, in_ranges: None
) -> None:
    """A doubled fill in the second cohort with the whole chain recomputed: only the fold can
    tell, in the child that checks the second range, and it names the fill as one pass does."""
    seq = _fill_in_second_cohort(log)
    _tamper(
        log,
        "UPDATE events SET payload = json_set(payload, '$.amount', 2 * (payload ->> '$.amount'))"
        f" WHERE seq = {seq}",
    )
    _rechain(log)
    errors = []
    for parts in (1, 3):
        with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
            verify_store(store, parts=parts)
        errors.append((caught.value.seq, str(caught.value)))
    with sqlite3.connect(log) as conn:  # the agent's next fill starts from other cash
        (after,) = conn.execute(
            "SELECT min(seq) FROM events WHERE stream_id = 2 AND seq > ?"
            " AND payload ->> '$.type' = 'OrderFilled' AND payload ->> '$.agent' ="
            " (SELECT payload ->> '$.agent' FROM events WHERE seq = ?)",
            (seq, seq),
        ).fetchone()
    assert errors[0] == errors[1]
    assert errors[0][0] == after and f"event {after} starts a fill from cash" in errors[0][1]


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


@pytest.mark.parametrize("child", ["/nonexistent/python", "/bin/echo"])
def test_a_range_whose_child_cannot_answer_is_checked_here(
    log: Path, in_ranges: None, monkeypatch: pytest.MonkeyPatch, child: str
) -> None:
    """A child that cannot start, or answers with anything but a range's answer, leaves its
    range to this process: slower, never skipped, the same result and the same fault."""
    with EventStore.open(log, readonly=True) as store:
        expected = verify_store(store, parts=1)
    monkeypatch.setattr("arena.verify.log.sys.executable", child)
    with EventStore.open(log, readonly=True) as store:
        got = verify_store(store, parts=3)
    assert (got.events, got.closed, got.cohorts) == (expected.events, expected.closed, 3)
    _tamper(
        log, "UPDATE events SET payload = replace(payload, '\"ts\":', '\"ts\": ') WHERE seq = 9"
    )
    with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_store(store, parts=3)
    assert caught.value.seq == 9


def test_cohorts_written_side_by_side_are_checked_in_one_range(
    tmp_path: Path, in_ranges: None
) -> None:
    """A cut must be a snapshot that no other stream runs across: with two cohorts whose
    events interleave, every snapshot has the other cohort on both sides, so there is none."""
    from arena.verify.log import plan
    from arena.verify.ranges import positions_of
    from ledger.events import Marked
    from ledger.projection import CohortState
    from ledger.snapshot import FORMAT, encode_state

    db = tmp_path / "side.db"
    with EventStore.open(db) as store:
        for k in range(6):
            for cohort in ("a", "b"):
                version = store.append(cohort, [Marked(cohort=cohort, ts=k, markets=[], prices=[])])
                if k:  # each cohort's first event comes before any snapshot
                    image = encode_state(CohortState(cohort))
                    store.add_snapshot(cohort, version, image, fmt=FORMAT, closing=False)
        snapshots = store.snapshots()
        positions = positions_of(store, snapshots)
        assert plan(store, snapshots, positions, store.last_seq(), 4) == [(0, 12)]


def test_a_stream_of_skipped_types_only_is_no_cohort(tmp_path: Path) -> None:
    """Events the fold has no handler for (orders placed) make no cohort state: a stream of
    only those is not counted, nor named as a cohort that never closed."""
    from tests.ledger.test_store import marked, placed

    db = tmp_path / "skipped.db"
    with EventStore.open(db) as store:
        store.append("c", [marked(1)])
        store.append("p", [placed(2, cohort="p"), placed(3, cohort="p")])
        result = verify_store(store)
    assert (result.events, result.cohorts, result.open_cohorts) == (3, 1, ["c"])


@pytest.mark.parametrize("child", [None, "/bin/echo"])
def test_a_log_that_cannot_be_cut_has_its_chain_checked_beside_the_fold(
    log: Path, in_ranges: None, monkeypatch: pytest.MonkeyPatch, child: str | None
) -> None:
    """Without snapshots there is no cut: a child checks the whole chain (``--links``) while
    this process folds without hashing; the answers and the faults are the single pass's, and
    a child that does not answer leaves the chain to this process."""
    if child:
        monkeypatch.setattr("arena.verify.log.sys.executable", child)
    _tamper(log, "DROP TABLE snapshots")
    with EventStore.open(log, readonly=True) as store:
        whole, apart = verify_store(store, parts=1), verify_store(store, parts=2)
    assert (apart.events, apart.closed, apart.cohorts) == (whole.events, 3, 3)
    assert list(apart.unsaved) == list(whole.unsaved) and len(whole.unsaved) == 3
    for name, state in whole.unsaved.items():
        assert apart.unsaved[name].snapshot() == state.snapshot()
    seq = _fill_in_second_cohort(log)
    _tamper(
        log,
        "UPDATE events SET payload = json_set(payload, '$.amount', 2 * (payload ->> '$.amount'))"
        f" WHERE seq = {seq}",
    )
    errors = []
    for parts in (1, 2):
        with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
            verify_store(store, parts=parts)
        errors.append((caught.value.seq, str(caught.value)))
    assert errors[0] == errors[1] and errors[0][0] == seq and "hash mismatch" in errors[0][1]
