"""``StreamWriter.commit``: a slow run commits between batches, and its log, snapshots included,
is the one a run that never committed writes; what was committed is in the store at once."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ledger.stream
from ledger.events import Event, Marked
from ledger.stream import MemorySink, StreamWriter

COHORT = "c"


class Queue:
    """The part of a live state a writer reads: its stream's name and its recorded events."""

    def __init__(self) -> None:
        self.cohort = COHORT
        self.recorded: list[Event] = []
        self.made = 0

    def record(self, n: int) -> None:
        for _ in range(n):
            self.made += 1
            self.recorded.append(Marked(cohort=COHORT, ts=self.made, markets=[], prices=[]))

    def collect(self) -> list[Event]:
        out, self.recorded = self.recorded, []
        return out


def written(steps: list[tuple[int, bool]]) -> tuple[MemorySink, list[int]]:
    """Steps of ``(events recorded, commit after)``; the sink and, after each step, how many
    events the sink held."""
    sink, state = MemorySink(), Queue()
    writer = StreamWriter(sink, state)  # type: ignore[arg-type]
    held = []
    for n, commit in steps:
        state.record(n)
        writer.save()
        if commit:
            writer.commit()
        held.append(len(sink.read(COHORT)))
    writer.close()
    return sink, held


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.stream, "FLUSH_EVERY", 5)
    monkeypatch.setattr(ledger.stream, "SNAPSHOT_EVERY", 12)
    monkeypatch.setattr(ledger.stream, "encode_state", lambda state: b"image")


def test_batches_and_snapshots_fall_where_they_did_worked_by_hand() -> None:
    """4, 4, 4, 4 events: without commits, batches end at 8 and 16 (the saves with 5 or more
    waiting) and a snapshot is taken at 16 (the first batch end 12 or more past 0). With a
    commit after every step the store holds each step's events at once, and the events and
    snapshots are the same."""
    plain, held = written([(4, False)] * 4)
    assert held == [0, 8, 8, 16]
    committed, held_now = written([(4, True)] * 4)
    assert held_now == [4, 8, 12, 16]
    assert committed.streams == plain.streams
    assert [s.version for s in plain.images[COHORT]] == [16]
    assert committed.images == plain.images


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.booleans()), max_size=30))
def test_commits_never_change_the_log_or_its_snapshots(steps: list[tuple[int, bool]]) -> None:
    assume(sum(n for n, _ in steps) > 0)  # a cohort's stream is never empty
    plain, _ = written([(n, False) for n, _ in steps])
    committed, held = written(steps)
    assert committed.streams == plain.streams
    assert committed.images == plain.images
    made = 0
    for (n, commit), now in zip(steps, held, strict=True):
        made += n
        if commit:
            assert now == made  # a commit leaves nothing waiting
