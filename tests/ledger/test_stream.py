"""Writing a live state's stream (``ledger.stream.StreamWriter``): batches, the stored prefix
compared as it is reached, divergence named by version, snapshots at intervals."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

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
