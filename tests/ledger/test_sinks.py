"""The sink contract (``ledger.stream.EventSink``), held against every sink there is: the log
itself, a sink in memory, and a worker's recording of one cohort. A cohort written into any of
them must come out the same, events and snapshots."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from arena.engines.recorded import RecordedCohort, deliver
from arena.run.runner import CohortRunner
from ledger.errors import ConcurrencyError, LedgerError
from ledger.events import Marked
from ledger.store import EventStore
from ledger.stream import EventSink, MemorySink
from replays.tape import Tape
from tests.conftest import START, hand_config

STREAM = "2024-01-07-sinktest"

Sinks = Callable[[Path], EventSink]
SINKS: dict[str, Sinks] = {
    "the log": lambda folder: EventStore.open(folder / "log.db"),
    "memory": lambda folder: MemorySink(),
    "a recording": lambda folder: RecordedCohort(STREAM),
}


@pytest.fixture(params=list(SINKS))
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventSink]:
    made = SINKS[request.param](tmp_path)
    yield made
    if isinstance(made, EventStore):
        made.close()


def marks(*ts: int) -> list[Marked]:
    return [Marked(cohort=STREAM, ts=START + t, markets=["m"], prices=[[0.5, 0.5]]) for t in ts]


def test_a_new_stream_reads_empty_and_appends_from_version_zero(sink: EventSink) -> None:
    assert list(sink.read(STREAM)) == []
    assert sink.append(STREAM, marks(1, 2), expected_version=0) == 2
    assert sink.append(STREAM, marks(3), expected_version=2) == 3
    assert list(sink.read(STREAM)) == marks(1, 2, 3)


def test_an_append_at_the_wrong_version_appends_nothing(sink: EventSink) -> None:
    sink.append(STREAM, marks(1), expected_version=0)
    for wrong in (0, 2):
        with pytest.raises(ConcurrencyError):
            sink.append(STREAM, marks(2, 3), expected_version=wrong)
    assert list(sink.read(STREAM)) == marks(1)


def test_a_snapshot_is_kept_once_and_only_at_an_event_the_stream_has(sink: EventSink) -> None:
    sink.append(STREAM, marks(1, 2), expected_version=0)
    assert sink.add_snapshot(STREAM, 2, b"{}", fmt=1, closing=False) is True
    assert sink.add_snapshot(STREAM, 2, b"{}", fmt=1, closing=True) is False
    with pytest.raises(LedgerError):
        sink.add_snapshot(STREAM, 3, b"{}", fmt=1, closing=False)


def test_a_cohort_comes_out_of_every_sink_the_same(hand_tape: Tape, tmp_path: Path) -> None:
    """Events and snapshot images of one cohort, written into memory, into a recording
    delivered to a log, and into a log directly: all three the same."""
    config = hand_config({"fav": "favourite", "coin": "random?bets=2"})
    memory = MemorySink()
    run = CohortRunner(hand_tape, config).run(memory)
    recording = RecordedCohort(run.cohort)
    CohortRunner(hand_tape, config).run(recording)
    with (
        EventStore.open(tmp_path / "direct.db") as direct,
        EventStore.open(tmp_path / "delivered.db") as delivered,
    ):
        CohortRunner(hand_tape, config).run(direct)
        deliver(delivered, recording)
        events = memory.read(run.cohort)
        assert len(events) == run.events > 0
        assert recording.read(run.cohort) == events
        assert list(direct.read(run.cohort)) == events == list(delivered.read(run.cohort))
        images = [(i.version, i.state, i.closing) for i in memory.images[run.cohort]]
        assert images and images[-1][2]  # the closing snapshot, at the last event
        assert images[-1][0] == len(events)
        for log in (direct, delivered):
            stored = [(s.version, s.state, s.closing) for s in log.snapshots(run.cohort)]
            assert stored == images
        assert direct.digest() == delivered.digest()
