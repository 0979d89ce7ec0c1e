"""``arena step`` on a finished log read lazily (``arena.step.log``): the same stops and the same
state at every cut as the log read whole, from the log's snapshots where it has them, and a
damaged page or snapshot said in one line, never shown as if it were whole."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.bench.rebuild_bench import make_log
from arena.step.app import StepApp
from arena.step.log import LogEvents, open_timeline
from arena.step.timeline import LogTimeline
from ledger.errors import IntegrityError
from ledger.events import CohortClosed, Event
from ledger.projection import CohortState
from ledger.snapshot import FORMAT, encode_state
from ledger.store import EventStore
from tests.arena.step.test_frames import one_line_error
from tests.conftest import Arena

COHORT = "bench-rebuild"
SNAPSHOT_EVERY = 2_000


def fold(events: list[Event]) -> bytes:
    state = CohortState(COHORT)
    for e in events:
        state.apply(e)
    return encode_state(state)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Event]]:
    """A closed cohort of about 7,000 events with a snapshot every 2,000 and a closing one,
    as a replay leaves it; and its events read whole."""
    db = tmp_path_factory.mktemp("step-log") / "run.db"
    with EventStore.open(db) as store:
        _, live = make_log(store, 7_000, markets=20, agents=("x", "y", "z"))
        closed = CohortClosed(cohort=COHORT, ts=10**9, reason="t", state_digest=live.digest())
        live.apply(closed)
        version = store.append(COHORT, [closed], expected_version=store.stream_version(COHORT))
        events = list(store.read(stream=COHORT))
        for at in range(SNAPSHOT_EVERY, len(events), SNAPSHOT_EVERY):
            image = fold(events[:at])
            store.add_snapshot(COHORT, at, image, fmt=FORMAT, closing=False)
        store.add_snapshot(COHORT, version, encode_state(live), fmt=FORMAT, closing=True)
        assert len(store.snapshots()) == 4
    return db, events


def test_the_scan_finds_the_stops_marks_and_decisions_of_the_whole_read(
    logged: tuple[Path, list[Event]],
) -> None:
    db, events = logged
    whole = LogTimeline(list(events), COHORT)
    with EventStore.open(db, readonly=True) as store:
        lazy = open_timeline(store, COHORT)
        assert lazy.stops == whole.stops
        assert lazy.decisions == whole.decisions and lazy.decision_end == whole.decision_end
        assert lazy.marks == whole.marks and lazy.by_volume == whole.by_volume
        assert len(lazy.events) == len(events)
        assert lazy.events[1234] == events[1234] and lazy.events[-1] == events[-1]
        assert lazy.events[995:2010] == events[995:2010]  # across two pages
        assert lazy.events[10:3:-2] == events[10:3:-2]


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_the_state_at_any_cut_in_any_order_is_the_fold_of_the_log_cut_there(
    logged: tuple[Path, list[Event]], data: st.DataObject
) -> None:
    db, events = logged
    cuts = data.draw(st.lists(st.integers(0, len(events)), min_size=1, max_size=6))
    with EventStore.open(db, readonly=True) as store:
        line = open_timeline(store, COHORT)
        for i, cut in enumerate(cuts):
            if i % 3 == 2:  # a far move folded in slices between keys gets to the same state
                budget = data.draw(st.integers(1, 3_000))
                while not line.fold_towards(cut, budget):
                    assert line.distance(cut) > 0
                assert line.distance(cut) == 0
            assert encode_state(line.state_at(cut)) == fold(events[:cut]), cut
            if i % 2:
                line.warm(700)  # a warm-up between keys never moves what a view reads
        assert line.notes == []


def test_the_end_of_a_closed_log_is_its_closing_snapshot_not_a_fold(
    logged: tuple[Path, list[Event]],
) -> None:
    db, events = logged
    with EventStore.open(db, readonly=True) as store:
        line = open_timeline(store, COHORT)
        assert encode_state(line.state_at(len(events))) == fold(events)
        assert isinstance(line.events, LogEvents)
        assert line.events.pages_read == 0  # nothing decoded: restored whole
        # a cut just after the second snapshot folds from it: one page, not three
        line.state_at(2 * SNAPSHOT_EVERY + 500)
        assert line.events.pages_read == 1


def test_the_warm_up_lays_a_checkpoint_every_5000_events_and_then_stops(
    logged: tuple[Path, list[Event]],
) -> None:
    db, events = logged
    with EventStore.open(db, readonly=True) as store:
        line = open_timeline(store, COHORT)
        line.state_at(6_500)  # restores the snapshot at 6,000
        # first the snapshots not restored yet, one a call, the newest (the closing) first:
        # then the end of the log is a copy away
        left = sorted(line.snapshots, reverse=True)
        assert len(left) == 3 and left[0] == len(events)
        for at in left:
            assert line.warm(1_000) and at not in line.snapshots
        read = line.events.pages_read if isinstance(line.events, LogEvents) else -1
        assert encode_state(line.state_at(len(events))) == fold(events)
        slices = 0
        while line.warm(1_000):
            slices += 1
        # the only missing checkpoint is 5,000 (snapshots lie at about 2,000 and 4,000):
        # folded from the snapshot below it, in slices of at most 1,000 events
        assert 1 <= slices <= 2
        assert isinstance(line.events, LogEvents) and line.events.pages_read - read <= 2
        assert encode_state(line.state_at(5_000)) == fold(events[:5_000])


RESPACE = """UPDATE events SET payload = replace(payload, '"ts":', '"ts": ')"""
"""An edit that keeps the payload a readable event of the same facts, so only the chain can
tell."""


def _tamper(db: Path, sql: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    for table in ("events", "snapshots"):
        for verb in ("update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    conn.execute(sql)
    conn.close()


def _copy(logged: tuple[Path, list[Event]], tmp_path: Path) -> Path:
    db = tmp_path / "run.db"
    db.write_bytes(logged[0].read_bytes())
    return db


def test_an_altered_event_stops_the_fold_that_reaches_it_with_its_seq(
    logged: tuple[Path, list[Event]], tmp_path: Path, arena: Arena
) -> None:
    db = _copy(logged, tmp_path)
    _tamper(db, f"{RESPACE} WHERE seq = 3500")
    with EventStore.open(db, readonly=True) as store:
        line = open_timeline(store, COHORT)
        line.state_at(3_000)  # before the page it is in: nothing wrong is read
        with pytest.raises(IntegrityError, match="event 3500 was altered"):
            line.state_at(3_600)
    assert "event 3500 was altered" in one_line_error(arena("step", db, "--json"))


def test_an_altered_event_the_fold_passes_by_still_stops_it(
    logged: tuple[Path, list[Event]], tmp_path: Path
) -> None:
    """The fold leaves out the orders placed (they change no state) but reads and hashes
    every row: an edited ``OrderPlaced`` between a snapshot and the cut is named, whether the
    cut is reached by a jump or by the warm-up."""
    db = _copy(logged, tmp_path)
    seq = (
        sqlite3.connect(db)
        .execute("SELECT min(seq) FROM events_view WHERE type = 'OrderPlaced' AND seq > 4500")
        .fetchone()[0]
    )
    _tamper(db, f"{RESPACE} WHERE seq = {seq}")
    with EventStore.open(db, readonly=True) as store:
        line = open_timeline(store, COHORT)
        with pytest.raises(IntegrityError, match=f"event {seq} was altered"):
            line.state_at(seq + 10)
        warmed = open_timeline(store, COHORT)
        with pytest.raises(IntegrityError, match=f"event {seq} was altered"):
            while warmed.warm(1_000):
                pass


def test_a_far_jump_folds_between_keys_and_draws_when_it_arrives(
    logged: tuple[Path, list[Event]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the warm-up, a jump farther than ``FOLD_AT_ONCE`` events does not freeze the
    screen: the view stays, the header counts the events to go while the fold moves a slice
    at a time, and the view drawn on arrival is the log's at that cut. A near move pressed
    meanwhile replaces it."""
    from arena.step import app as step_app
    from arena.step.view import build_view

    monkeypatch.setattr(step_app, "FOLD_AT_ONCE", 1_000)
    monkeypatch.setattr(step_app, "FOLD_SLICE", 400)
    monkeypatch.setattr(step_app, "WARM_EVERY", 60.0)  # the slices run when the test says
    db, events = logged
    end = len(events)
    with EventStore.open(db, readonly=True) as store:
        line = open_timeline(store, COHORT)
        line.snapshots.clear()  # no base but the empty state: the end is 7,000 events away

        async def run() -> None:
            app = StepApp(line, ["x", "y", "z"], "x")
            async with app.run_test(size=(100, 30)) as pilot:
                await pilot.pause()
                start = app.cut
                await pilot.press("e")
                assert app.cut == start and app.pending == (end, True)
                # on the header's second line, in place of the cohort's: 80 columns show it
                moving = str(app.query_one("#header").render()).splitlines()[1]
                assert moving.startswith(f"to event {end:,}: folding, 7,0")
                app.fold_pending()
                left = line.distance(end)
                assert app.cut == start and 0 < left <= end - 400
                assert f"folding, {left:,} events to go" in str(app.query_one("#header").render())
                await pilot.press("d")  # near: drawn at once, the far move dropped
                assert app.pending is None and app.cut == line.next_stop(start, "decision")
                await pilot.press("e")
                while app.pending is not None:
                    app.fold_pending()
                assert app.cut == end and app.history[-1] == line.next_stop(start, "decision")
                assert str(app.query_one("#header").render()).splitlines()[1].startswith("cohort")
                fresh = open_timeline(store, COHORT)
                fresh.snapshots.clear()
                assert app.view.standings == build_view(fresh, end, "x").standings

        asyncio.run(run())


def test_an_unusable_snapshot_is_passed_over_with_a_note(
    logged: tuple[Path, list[Event]], tmp_path: Path
) -> None:
    db = _copy(logged, tmp_path)
    _tamper(db, "UPDATE snapshots SET state = replace(state, '\"cash\":', '\"cash\": ')")
    with EventStore.open(db, readonly=True) as store:
        line = open_timeline(store, COHORT)
        cut = len(logged[1])
        assert encode_state(line.state_at(cut)) == fold(logged[1])
        assert line.notes and "unusable" in line.notes[0]


def test_a_log_that_is_not_an_arena_log_is_one_line(arena: Arena, tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    assert "not an arena event log" in one_line_error(arena("step", db))
