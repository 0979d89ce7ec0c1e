"""Snapshots: a restored state is the folded one, and a bad snapshot never changes a figure.

Each bad snapshot (edited, cut mid-write, of another format, stale) must be named by ``verify``
with its sequence number. One that cannot be read (edited without its hash, cut mid-write, of
another format) ``report`` passes over: it folds the log instead, says so in one line, and
prints exactly the figures a report without snapshots prints. One whose hash holds over a state
the chain contradicts was forged: ``report`` refuses it in one line (``tests/attacks`` holds
the other forgeries).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.reports.model import report_data
from arena.run.runner import CohortRunner
from arena.verify.log import verify_store
from ledger.errors import IntegrityError
from ledger.events import EVENT_TYPES, CohortClosed
from ledger.projection import HANDLERS, IGNORED_BY_FOLD, Book, CohortState
from ledger.rebuild import rebuild
from ledger.restore import load
from ledger.snapshot import (
    FORMAT,
    BookImage,
    StateImage,
    decode_state,
    encode_state,
    snapshot_hash,
)
from ledger.store import EventStore
from replays.tape import Tape
from tests.conftest import Arena, hand_config


@pytest.fixture
def log(weekly_log: Path, tmp_path: Path) -> Path:
    db = tmp_path / "arena.db"
    shutil.copy(weekly_log, db)
    return db


def _full_fold_report(db: Path) -> dict[str, object]:
    with EventStore.open(db, readonly=True) as store:
        return report_data(rebuild(store))


def _insert_snapshot(
    db: Path, seq: int, state: bytes, *, fmt: int = FORMAT, whole: bool = True
) -> int:
    """A snapshot row at ``seq`` as a writer would store it; ``whole=False`` keeps the hash of
    the full image but only half the image, as a write cut short would. Returns its id."""
    conn = sqlite3.connect(db, isolation_level=None)
    stream_id, version, chain = conn.execute(
        "SELECT stream_id, version, hash FROM events WHERE seq = ?", (seq,)
    ).fetchone()
    row_hash = snapshot_hash(chain, fmt, state)
    stored = state if whole else state[: len(state) // 2]
    cursor = conn.execute(
        "INSERT INTO snapshots (stream_id, version, seq, chain_hash, closing, format, state, hash)"
        " VALUES (?, ?, ?, ?, 0, ?, CAST(? AS TEXT), ?)",
        (stream_id, version, seq, chain, fmt, stored, row_hash),
    )
    conn.close()
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _closing(db: Path) -> list[tuple[int, int, bytes]]:
    """``(snapshot id, seq, image)`` of the closing snapshots."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT id, seq, CAST(state AS BLOB) FROM snapshots WHERE closing ORDER BY seq"
        )
        return [(i, s, bytes(b)) for i, s, b in rows]


def test_a_report_from_snapshots_equals_the_full_fold(arena: Arena, log: Path) -> None:
    with EventStore.open(log, readonly=True) as store:
        loaded = load(store)
        assert loaded.restored == store.streams() and loaded.checked == 0
        assert report_data(loaded.ledger) == report_data(rebuild(store))
        for name, state in loaded.ledger.cohorts.items():
            assert state.closed is not None
            assert state.digest() == state.closed.state_digest, name
    result = arena("report", log, "--json")
    assert result.exit_code == 0 and result.stderr == ""


def test_an_image_round_trips_exactly(log: Path) -> None:
    with EventStore.open(log, readonly=True) as store:
        for name, state in rebuild(store).cohorts.items():
            image = encode_state(state)
            restored = decode_state(image)
            assert encode_state(restored) == image, name
            assert restored.snapshot() == state.snapshot()
            # every attribute of the state, so a field added to CohortState and not to the
            # image fails here (the memo of outcome lookups is rebuilt on demand)
            expected = {k: v for k, v in vars(state).items() if k != "_sides"}
            assert {k: v for k, v in vars(restored).items() if k != "_sides"} == expected
            assert json.loads(image)["format"] == FORMAT  # readable JSON, versioned


def _bad_snapshot_is_named_and_skipped(
    arena: Arena, db: Path, snapshot_id: int, seq: int, why: str
) -> None:
    with EventStore.open(db, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_store(store)
    assert f"snapshot {snapshot_id} (cohort" in str(caught.value)
    assert f"seq {seq})" in str(caught.value) and why in str(caught.value)
    assert caught.value.seq == seq
    result = arena("report", db, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == _full_fold_report(db)
    notes = result.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith("note: snapshot ")
    assert "folded the log instead" in notes[0]


def _richer(image: bytes) -> bytes:
    """The image with $1,000 more in the first agent's cash: what a forger would want."""
    data = json.loads(image)
    data["books"][0]["cash"] += 1000.0
    return json.dumps(data, separators=(",", ":")).encode()


def test_an_edited_snapshot(arena: Arena, log: Path) -> None:
    snapshot_id, seq, image = _closing(log)[1]
    forged = _richer(image)
    conn = sqlite3.connect(log, isolation_level=None)
    conn.execute("DROP TRIGGER snapshots_no_update")
    conn.execute("UPDATE snapshots SET state = ? WHERE id = ?", (forged.decode(), snapshot_id))
    conn.close()
    _bad_snapshot_is_named_and_skipped(arena, log, snapshot_id, seq, "is damaged")


def test_an_edited_snapshot_with_its_hash_recomputed_is_refused_on_the_close_digest(
    arena: Arena, log: Path
) -> None:
    snapshot_id, seq, image = _closing(log)[0]
    forged = _richer(image)
    conn = sqlite3.connect(log, isolation_level=None)
    chain = conn.execute("SELECT chain_hash FROM snapshots WHERE id = ?", (snapshot_id,))
    row_hash = snapshot_hash(chain.fetchone()[0], FORMAT, forged)
    conn.execute("DROP TRIGGER snapshots_no_update")
    conn.execute(
        "UPDATE snapshots SET state = ?, hash = ? WHERE id = ?",
        (forged.decode(), row_hash, snapshot_id),
    )
    conn.close()
    with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_store(store)
    assert f"snapshot {snapshot_id} (cohort" in str(caught.value)
    assert "disagrees with the fold" in str(caught.value) and caught.value.seq == seq
    result = arena("report", log, "--json")
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert f"snapshot {snapshot_id} (cohort " in line
    assert f"seq {seq}) is not the state its close (event {seq}) recorded" in line


def _without_last_close(db: Path) -> tuple[int, bytes]:
    """Remove the last cohort's closing snapshot, so the next one stored is its newest; the
    seq and image it had."""
    snapshot_id, seq, image = _closing(db)[-1]
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER snapshots_no_delete")
    conn.execute("DELETE FROM snapshots WHERE id = ?", (snapshot_id,))
    conn.close()
    return seq, image


def test_a_snapshot_cut_mid_write(arena: Arena, log: Path) -> None:
    seq, image = _without_last_close(log)
    new = _insert_snapshot(log, seq - 1, image, whole=False)
    _bad_snapshot_is_named_and_skipped(arena, log, new, seq - 1, "is damaged")


def test_a_snapshot_of_another_format(arena: Arena, log: Path) -> None:
    seq, image = _without_last_close(log)
    future = image.replace(b'{"format":1,', b'{"format":2,', 1)
    new = _insert_snapshot(log, seq - 1, future, fmt=2)
    _bad_snapshot_is_named_and_skipped(arena, log, new, seq - 1, "has format 2; this arena reads 1")


def test_a_stale_snapshot(arena: Arena, log: Path) -> None:
    """The state of the close stored as if taken one event earlier: whole, readable, wrong."""
    _, seq, image = _closing(log)[2]
    new = _insert_snapshot(log, seq - 1, image)
    with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_store(store)
    assert f"snapshot {new} (cohort" in str(caught.value) and "disagrees with the fold" in str(
        caught.value
    )
    # report uses the closing snapshot (the newest), which is good: nothing to fall back from
    assert json.loads(arena("report", log, "--json").stdout) == _full_fold_report(log)


def test_a_snapshot_of_a_stream_the_log_does_not_hold(log: Path) -> None:
    """A copy of a closing snapshot moved to a stream id no stream has: whole (its hash covers
    its place in the chain, not its stream), but taken after no event of it. ``verify`` folds
    stream by stream, so it must still reach this one and name it."""
    snapshot_id, seq, _ = _closing(log)[0]
    conn = sqlite3.connect(log, isolation_level=None)
    cursor = conn.execute(
        "INSERT INTO snapshots (stream_id, version, seq, chain_hash, closing, format, state, hash)"
        " SELECT 99, version, seq, chain_hash, closing, format, state, hash FROM snapshots"
        " WHERE id = ?",
        (snapshot_id,),
    )
    conn.close()
    with EventStore.open(log, readonly=True) as store, pytest.raises(IntegrityError) as caught:
        verify_store(store)
    assert caught.value.seq == seq
    assert f"snapshot {cursor.lastrowid} (cohort #99, seq {seq}) no longer matches" in str(
        caught.value
    )


def test_an_old_log_without_snapshots_reads_and_gets_them_from_verify(
    arena: Arena, log: Path
) -> None:
    with sqlite3.connect(log) as conn:
        before = conn.execute("SELECT seq, payload, hash FROM events ORDER BY seq").fetchall()
        conn.execute("DROP TABLE snapshots")
    expected = _full_fold_report(log)
    with EventStore.open(log, readonly=True) as store:
        loaded = load(store)
        assert loaded.restored == [] and loaded.checked == store.last_seq()
        assert verify_store(store).snapshots == 0
    assert json.loads(arena("report", log, "--json").stdout) == expected
    written = arena("verify", log, "--write-snapshots", "--json")
    assert json.loads(written.stdout)["snapshots_written"] == 3
    with sqlite3.connect(log) as conn:
        assert conn.execute("SELECT seq, payload, hash FROM events ORDER BY seq").fetchall() == (
            before
        )
    with EventStore.open(log, readonly=True) as store:
        assert verify_store(store).snapshots == 3
        assert load(store).restored == store.streams()
    assert json.loads(arena("report", log, "--json").stdout) == expected
    again = arena("verify", log, "--write-snapshots", "--json")
    assert json.loads(again.stdout)["snapshots_written"] == 0


@settings(max_examples=8, deadline=None)
@given(every=st.integers(20, 120), per_event=st.sampled_from([10**9, 100]))
def test_periodic_snapshots_of_a_long_cohort_match_its_fold(
    tmp_path_factory: pytest.TempPathFactory, synthetic_tape: Tape, every: int, per_event: int
) -> None:
    """With a snapshot every few events (or, at 100 bytes an event, spaced by their images'
    4–11 KB too), each one checks out against the fold at its place, and a read restored from
    any of them (as if the cohort were still open) folds the same state."""
    db = tmp_path_factory.mktemp("periodic") / "arena.db"
    config = hand_config({"fav": "favourite", "coin": "random?bets=3"}, universe=6,
                         decision_cadence="daily", mark_cadence="daily")  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ledger.stream.FLUSH_EVERY", every)
        patch.setattr("ledger.stream.SNAPSHOT_EVERY", every)
        patch.setattr("ledger.stream.SNAPSHOT_BYTES_PER_EVENT", per_event)
        with EventStore.open(db) as store:
            CohortRunner(synthetic_tape, config).run(store)
    with EventStore.open(db, readonly=True) as store:
        snapshots = store.snapshots()
        assert len(snapshots) >= 3 and [s.closing for s in snapshots][-1]
        assert verify_store(store).snapshots == len(snapshots)
        (name,) = store.streams()
        full = rebuild(store).cohorts[name]
        for snapshot in snapshots:
            restored = decode_state(snapshot.state)
            assert restored.closed is None or snapshot.closing
            resumed = rebuild(store, [name], start={name: (restored, snapshot.version)})
            assert resumed.cohorts[name].snapshot() == full.snapshot()


def test_a_cohort_open_past_its_snapshot_folds_the_tail(
    tmp_path: Path, synthetic_tape: Tape
) -> None:
    """A cohort cut off before its close (an interrupted run), with a snapshot 12 events
    before its end: a read restores it and folds (and link-checks) only the 11 after it."""
    whole, db = tmp_path / "whole.db", tmp_path / "open.db"
    config = hand_config({"fav": "favourite"}, universe=6)
    with EventStore.open(whole) as store:
        cohort = CohortRunner(synthetic_tape, config).run(store).cohort
        events = list(store.read(cohort))
    assert isinstance(events[-1], CohortClosed)
    cut = len(events) - 12
    with EventStore.open(db) as store:
        store.append(cohort, events[:cut])
        state = rebuild(store).cohorts[cohort]
        store.add_snapshot(cohort, cut, encode_state(state), fmt=FORMAT, closing=False)
        store.append(cohort, events[cut:-1], expected_version=cut)
        loaded = load(store)
        assert loaded.restored == [cohort] and loaded.checked == 11
        expected = rebuild(store).cohorts[cohort].snapshot()
        assert loaded.ledger.cohorts[cohort].snapshot() == expected
        assert verify_store(store).open_cohorts == [cohort]


def test_the_fold_reads_only_types_it_has_a_handler_for() -> None:
    """A type the fold has no handler for (the model transcript, say) is left out by SQLite and
    ignored by ``apply``, so a new record-only event type cannot break a fold."""
    handled = {t.__name__ for t in HANDLERS if t in EVENT_TYPES.values()}
    assert {"OrderPlaced", "ModelCalled", "PromptStored"} <= IGNORED_BY_FOLD
    assert IGNORED_BY_FOLD.isdisjoint(handled)
    assert IGNORED_BY_FOLD | handled == set(EVENT_TYPES)


def test_the_image_has_a_field_for_everything_the_state_keeps() -> None:
    """A field added to ``CohortState`` or ``Book`` (as ``stopped`` was) must be added to the
    image too, or a restored report would silently lose it."""
    # a memo rebuilt on demand, and the queue of recorded events on their way to the store
    kept = set(vars(CohortState("c"))) - {"_sides", "pending"}
    assert kept == set(StateImage.__struct_fields__) - {"format"}
    counts = {"n_bets", "n_sells", "n_rejected", "n_decisions", "n_errors"}
    # ``buys`` is written as ``pending_buys``; ``by_market`` is ``positions`` by market, derived
    kept_in_book = set(Book.__struct_fields__) - counts - {"buys", "by_market"}
    assert kept_in_book | {"counts", "pending_buys"} == set(BookImage.__struct_fields__)
