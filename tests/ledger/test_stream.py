"""Writing a live state's stream (``ledger.stream.StreamWriter``): batches, the stored prefix
compared as it is reached, divergence named by version, snapshots at intervals."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.stream
from ledger.errors import LedgerError
from ledger.events import CohortOpened, Event, Marked
from ledger.projection import CohortState
from ledger.snapshot import decode_state
from ledger.store import EventStore
from ledger.stream import MemorySink, StreamWriter


def opened() -> CohortOpened:
    return CohortOpened(
        cohort="c", ts=0, start=0, rules="v1", cash=100.0, agents=["a"],
        decision_cadence="daily", mark_cadence="daily",
    )  # fmt: skip


def mark(ts: int, price: float = 0.5) -> Marked:
    return Marked(cohort="c", ts=ts, markets=["m"], prices=[[price, 1.0 - price]])


class Sink(MemorySink):
    """Stream "c" in memory, telling how far its stored events were read and what was appended."""

    def __init__(self, stored: Sequence[Event] = ()) -> None:
        super().__init__()
        self.streams["c"] = list(stored)
        self.read_up_to = 0
        self.appends: list[tuple[int, int]] = []

    @property
    def events(self) -> list[Event]:
        return self.streams["c"]

    def read(self, stream: str) -> Iterator[Event]:  # type: ignore[override]  # lazily, counted
        for k, event in enumerate(super().read(stream)):
            self.read_up_to = k + 1
            yield event

    def append(
        self, stream: str, events: Sequence[Event], expected_version: int | None = None
    ) -> int:
        self.appends.append((expected_version or 0, len(events)))
        return super().append(stream, events, expected_version)


def recorded(state: CohortState, *events: Event) -> None:
    for event in events:
        state.record(event)


def test_saved_events_wait_for_a_batch_then_append_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.stream, "FLUSH_EVERY", 3)
    sink, state = Sink(), CohortState("c")
    writer = StreamWriter(sink, state)
    recorded(state, opened(), mark(1))
    writer.save()
    assert (writer.version, sink.appends, state.pending) == (2, [], [])
    recorded(state, mark(2))
    writer.save()  # three waiting: one append from version 0
    assert sink.appends == [(0, 3)] and writer.appended == 3
    recorded(state, mark(3))
    writer.save()
    writer.flush()
    assert sink.appends == [(0, 3), (3, 1)] and writer.version == 4


def test_a_rerun_appends_only_past_the_stored_prefix_reading_it_as_it_goes() -> None:
    stored = [opened(), mark(1), mark(2)]
    sink, state = Sink(stored), CohortState("c")
    writer = StreamWriter(sink, state)
    recorded(state, opened(), mark(1))
    writer.save()
    assert sink.read_up_to == 2 and writer.version == 2 and writer.pending == []
    recorded(state, mark(2), mark(3), mark(4))
    writer.save()
    writer.flush()
    assert sink.appends == [(3, 2)] and writer.appended == 2 and writer.version == 5
    assert sink.events == [*stored, mark(3), mark(4)]


def test_a_stored_event_that_differs_is_named_by_its_version() -> None:
    sink, state = Sink([opened(), mark(1), mark(2)]), CohortState("c")
    writer = StreamWriter(sink, state)
    recorded(state, opened(), mark(1), mark(2, price=0.6))
    with pytest.raises(LedgerError, match=r"cohort c: the stored log diverges .* at version 3;"):
        writer.save()
    assert sink.appends == []


def test_snapshots_follow_the_flush_after_each_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger.stream, "FLUSH_EVERY", 2)
    monkeypatch.setattr(ledger.stream, "SNAPSHOT_EVERY", 4)
    monkeypatch.setattr(ledger.stream, "SNAPSHOT_BYTES_PER_EVENT", 10**9)  # images too small
    with EventStore.open(tmp_path / "log.db") as store:
        state = CohortState("c")
        writer = StreamWriter(store, state)
        state.record(opened())
        for ts in range(1, 10):
            state.record(mark(ts, price=ts / 10))
            writer.save()  # flushes at versions 2, 4, 6, 8, 10
        writer.snapshot(closing=True)
        taken = store.snapshots("c")
    # due at the first flush 4 or more events after the last: versions 4 and 8, then the close
    assert [(s.version, s.closing) for s in taken] == [(4, False), (8, False), (10, True)]
    assert decode_state(taken[0].state).marks == {"m": [0.3, 0.7]}  # the fold up to version 4


def test_a_big_image_spaces_the_next_snapshot_by_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """FLUSH_EVERY 2, SNAPSHOT_EVERY 4, 10 bytes an event, images of 10 × version bytes (so
    the spacing after version v is max(4, v)). Flushes at 2, 4, 6, …: snapshots at 4 (4 past
    0), 8 (4 past 4), 16 (8 past 8), 32, then the close at 40: 600 + 400 bytes. With a fixed
    spacing of 4 the 40 events would hold 9 periodic snapshots and the close: 1,800 + 400."""
    monkeypatch.setattr(ledger.stream, "FLUSH_EVERY", 2)
    monkeypatch.setattr(ledger.stream, "SNAPSHOT_EVERY", 4)
    monkeypatch.setattr(ledger.stream, "SNAPSHOT_BYTES_PER_EVENT", 10)
    sink, state = MemorySink(), CohortState("c")
    writer = StreamWriter(sink, state)
    monkeypatch.setattr(ledger.stream, "encode_state", lambda _: b"x" * 10 * writer.version)
    state.record(opened())
    for ts in range(1, 40):
        state.record(mark(ts))
        writer.save()
    writer.close()
    taken = [(s.version, s.closing, len(s.state)) for s in sink.images["c"]]
    assert taken == [(4, False, 40), (8, False, 80), (16, False, 160), (32, False, 320),
                     (40, True, 400)]  # fmt: skip


def _written_with_growing_images(steps: list[tuple[int, bool]]) -> MemorySink:
    """Steps of ``(marks recorded, commit after)`` written with images of 10 × version bytes."""
    sink, state = MemorySink(), CohortState("c")
    writer = StreamWriter(sink, state)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ledger.stream, "encode_state", lambda _: b"x" * 10 * writer.version)
        state.record(opened())
        ts = 0
        for n, commit in steps:
            for _ in range(n):
                ts += 1
                state.record(mark(ts))
            writer.save()
            if commit:
                writer.commit()
        writer.close()
    return sink


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=40))
def test_spacing_by_size_keeps_snapshots_where_a_run_without_commits_puts_them(
    steps: list[tuple[int, bool]],
) -> None:
    """The spacing is a function of the images, which a commit does not change: a run that
    commits anywhere writes the same events and the same snapshots, at the same versions."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ledger.stream, "FLUSH_EVERY", 3)
        patch.setattr(ledger.stream, "SNAPSHOT_EVERY", 5)
        patch.setattr(ledger.stream, "SNAPSHOT_BYTES_PER_EVENT", 20)
        plain = _written_with_growing_images([(n, False) for n, _ in steps])
        committed = _written_with_growing_images(steps)
    assert committed.streams == plain.streams
    assert committed.images == plain.images
    periodic = [i.version for i in plain.images["c"] if not i.closing]
    gaps = [b - a for a, b in zip([0, *periodic], periodic, strict=False)]
    floors = [max(5, 10 * a // 20) for a in [0, *periodic]]
    assert all(gap >= floor for gap, floor in zip(gaps, floors, strict=False))


def test_the_closing_snapshot_takes_the_place_of_a_periodic_one_due_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger.stream, "FLUSH_EVERY", 4)
    monkeypatch.setattr(ledger.stream, "SNAPSHOT_EVERY", 3)
    with EventStore.open(tmp_path / "log.db") as store:
        state = CohortState("c")
        writer = StreamWriter(store, state)
        for event in (opened(), mark(1), mark(2), mark(3)):
            state.record(event)
        writer.close()  # 4 events, a full batch, and a periodic snapshot due at version 4 too
        taken = store.snapshots("c")
    assert [(s.version, s.closing) for s in taken] == [(4, True)]


def test_a_replay_only_in_memory_writes_and_snapshots_nothing() -> None:
    state = CohortState("c")
    writer = StreamWriter(None, state)
    state.record(opened())
    writer.close()
    assert writer.snapshot_at == 0 and writer.appended == 0 and writer.version == 1
