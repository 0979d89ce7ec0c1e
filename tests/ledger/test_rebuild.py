"""The fast rebuild must give exactly the state a plain event-by-event fold gives."""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from pathlib import Path

import pytest

from arena.bench.rebuild_bench import make_log
from ledger.errors import LedgerError
from ledger.events import CohortOpened, DecisionMade, MarketListed
from ledger.projection import Ledger
from ledger.rebuild import read_ahead, rebuild
from ledger.store import EventStore
from tests.conftest import Arena


@pytest.mark.parametrize("batch", [7, 1_000, 100_000])
def test_rebuild_equals_the_plain_fold(tmp_path: Path, batch: int) -> None:
    db = tmp_path / "log.db"
    with EventStore.open(db) as store:
        made, live = make_log(store, 3_000, seed=3, markets=12)
        # a second cohort, interleaved after the first, with a failed decision in it
        store.append(
            "other",
            [
                CohortOpened(cohort="other", ts=0, start=0, rules="v1", cash=500.0,
                             agents=["x"], decision_cadence="weekly", mark_cadence="daily"),
                MarketListed(cohort="other", ts=0, market="m", question="?",
                             outcomes=["Yes", "No"], volume=1.0),
                DecisionMade(cohort="other", ts=1, agent="x", week=1, action="HOLD", error="boom"),
                DecisionMade(cohort="other", ts=2, agent="x", week=1, action="HOLD"),
            ],
        )  # fmt: skip
    with EventStore.open(db, readonly=True) as store:
        plain = Ledger().apply_all(store.read())
        pages = list(store.payload_arrays(batch=batch))
        fast = rebuild(store, batch=batch)
        other = rebuild(store, ["other"], batch=batch)
    assert made > 3_000
    assert len(pages) == -(-store_last(db) // batch)
    assert fast.snapshot() == plain.snapshot()
    assert fast.cohorts["bench-rebuild"].snapshot() == live.snapshot()
    assert other.snapshot() == {"other": plain.cohorts["other"].snapshot()}
    book = fast.cohorts["other"].books["x"]
    assert (book.n_decisions, book.n_errors) == (2, 1)
    assert fast.cohorts["bench-rebuild"].n_orders == plain.cohorts["bench-rebuild"].n_orders > 0


def store_last(db: Path) -> int:
    with EventStore.open(db, readonly=True) as store:
        return store.last_seq()


def corrupt(db: Path, seq: int, payload: str) -> None:
    """What only a hand in the sqlite3 shell can do: drop the guard and rewrite a payload."""
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload, seq))


@pytest.mark.parametrize(
    "payload",
    ['{"type":"OrderFilled","oops', '{"type":"FromTheFuture","cohort":"bench-rebuild","ts":1}'],
)
def test_an_unreadable_event_is_a_one_line_error_naming_it(
    arena: Arena, tmp_path: Path, payload: str
) -> None:
    db = tmp_path / "log.db"
    with EventStore.open(db) as store:
        make_log(store, 500, seed=1, markets=5)
    corrupt(db, 40, payload)
    with EventStore.open(db, readonly=True) as store:
        with pytest.raises(LedgerError, match=rf"{db}: event 40 is not a readable event \("):
            rebuild(store, batch=16)
        with pytest.raises(LedgerError, match="event 40 is not a readable event"):
            list(store.read())
    result = arena("report", db)
    assert result.exit_code == 1
    # the report checks the links of what it folds before decoding it: the edit is named first
    assert result.output.startswith(f"Error: {db}: event 40 was altered (hash mismatch);")
    assert len(result.output.strip().splitlines()) == 1


def testread_ahead_yields_in_order_and_closes_its_source_when_left_early() -> None:
    closed: list[bool] = []

    def pages() -> Generator[bytes, None, None]:
        try:
            for k in range(5):
                yield bytes([k])
        finally:
            closed.append(True)

    assert list(read_ahead(pages())) == [bytes([k]) for k in range(5)]
    assert closed == [True]
    closed.clear()
    reader = read_ahead(pages())
    assert next(reader) == b"\x00"
    reader.close()  # the consumer stops early: the fetch in flight ends, then the source closes
    assert closed == [True]


def testread_ahead_raises_the_sources_error_in_the_caller() -> None:
    def pages() -> Generator[bytes, None, None]:
        yield b"a"
        raise LedgerError("disk on fire")

    reader = read_ahead(pages())
    assert next(reader) == b"a"
    with pytest.raises(LedgerError, match="disk on fire"):
        next(reader)
