"""Model usage is read through the log's index of model calls (``events_model_calls``), so a
report of a log with few calls, or none, costs what it reads, not a scan of every event; a log
written before the index gives the same figures by a scan."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger.events import Marked, ModelCall, ModelCalled
from ledger.restore import checked_usage
from ledger.store import EventStore
from ledger.usage import ModelUsage, model_usage


def call(cohort: str, agent: str, n: int, **fields: object) -> ModelCalled:
    return ModelCalled(
        cohort=cohort, ts=n, agent=agent, week=1, n=n,
        call=ModelCall(model="m", question="decision", request=f"r{n}", **fields),  # type: ignore[arg-type]
    )  # fmt: skip


def write_log(path: Path, others: int) -> None:
    """Two cohorts' model calls among ``others`` marks: ann asks once, the server fails, she
    asks again and is answered (100 tokens in, 20 out, $0.01, 500 ms); ben's question is a
    re-ask, answered in 300 ms (50 in, 5 out, no cost reported)."""
    marks = [Marked(cohort="c1", ts=i, markets=["m"], prices=[[0.5, 0.5]]) for i in range(others)]
    with EventStore.open(path) as store:
        store.append("c1", marks[: others // 2])
        store.append("c1", [call("c1", "ann", 1, status=503, error="HTTP 503")])
        store.append("c1", marks[others // 2 :])
        store.append(
            "c1",
            [call("c1", "ann", 2, attempt=2, tokens_in=100, tokens_out=20, cost=0.01,
                  latency_ms=500.0)],
        )  # fmt: skip
        store.append("c2", [call("c2", "ben", 1, reask=1, tokens_in=50, tokens_out=5,
                                 latency_ms=300.0)])  # fmt: skip


EXPECTED = {
    "c1": {"ann": dict(calls=2, questions=1, reasks=0, failures=1, rejected=0, tokens_in=100,
                       tokens_out=20, cost=0.01, latency_median_ms=500.0,
                       latency_p95_ms=500.0)},
    "c2": {"ben": dict(calls=1, questions=1, reasks=1, failures=0, rejected=0, tokens_in=50,
                       tokens_out=5, cost=None, latency_median_ms=300.0,
                       latency_p95_ms=300.0)},
}  # fmt: skip


def figures(usage: dict[str, dict[str, ModelUsage]]) -> dict[str, dict[str, dict[str, object]]]:
    return {c: {a: u.as_dict() for a, u in agents.items()} for c, agents in usage.items()}


def steps_to_read_usage(path: Path) -> int:
    """SQLite's virtual-machine steps ``checked_usage`` takes: what it reads, counted."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    with EventStore.open(path, readonly=True) as store:
        store._conn.set_progress_handler(count, 1)
        assert figures(checked_usage(store)) == EXPECTED
        assert figures(model_usage(store)) == EXPECTED
    return steps


def drop_the_index(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX events_model_calls")


def test_usage_by_hand_with_and_without_the_index(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    write_log(path, 40)
    with EventStore.open(path, readonly=True) as store:
        assert figures(checked_usage(store)) == EXPECTED
        assert figures(checked_usage(store, ["c2"])) == {"c2": EXPECTED["c2"]}
    drop_the_index(path)  # a log written before the index: the same figures, by a scan
    with EventStore.open(path, readonly=True) as store:
        assert figures(checked_usage(store)) == EXPECTED
        assert figures(model_usage(store, ["c1"])) == {"c1": EXPECTED["c1"]}


@pytest.mark.parametrize("indexed", [True, False])
def test_reading_usage_costs_the_calls_not_the_log(tmp_path: Path, indexed: bool) -> None:
    """With the index, 50 times the other events cost not one step more; without it the
    read grows with them (which is what the index is for)."""
    small, big = tmp_path / "small.db", tmp_path / "big.db"
    write_log(small, 100)
    write_log(big, 5_000)
    if not indexed:
        drop_the_index(small)
        drop_the_index(big)
    few, many = steps_to_read_usage(small), steps_to_read_usage(big)
    assert (many == few) if indexed else (many > 10 * few)
