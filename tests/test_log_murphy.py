"""The Murphy decomposition computed in SQL over the event log equals numpy over the fold."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from arena.cohort import CohortConfig
from arena.runner import CohortRunner
from ledger.errors import LedgerError
from ledger.metrics import murphy
from ledger.metrics_sql import log_murphy_sql
from ledger.projection import Ledger
from ledger.store import EventStore
from replays.samples import sample_path
from replays.tapefile import load_tape


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("murphy") / "log.db"
    config = CohortConfig(
        start=datetime(2024, 9, 1, tzinfo=UTC),
        agents={"fav": "favourite", "coin": "random?bets=4", "dog": "contrarian"},
        universe=40,
    )
    with EventStore.open(db) as store:
        CohortRunner(load_tape(sample_path()), config).run(store)
    return db


@pytest.mark.parametrize("agent", [None, "fav", "coin", "dog"])
@pytest.mark.parametrize(("bins", "right_closed"), [(10, False), (20, True), (7, False)])
def test_sql_over_the_log_equals_numpy_over_the_fold(
    log: Path, agent: str | None, bins: int, right_closed: bool
) -> None:
    with EventStore.open(log, readonly=True) as store:
        state = next(iter(Ledger().apply_all(store.read()).cohorts.values()))
    rows = [r for name, b in state.books.items() if agent in (None, name) for r in b.brier_rows]
    assert len(rows) > 5  # the sample resolves every market, so every buy is scored
    expected = murphy(
        np.array([r.confidence for r in rows]),
        np.array([r.won for r in rows]),
        bins,
        right_closed=right_closed,
    )
    with sqlite3.connect(log) as conn:
        got = log_murphy_sql(conn, agent=agent, bins=bins, right_closed=right_closed)
    for field in ("reliability", "resolution", "uncertainty", "brier"):
        assert getattr(got, field) == pytest.approx(getattr(expected, field), abs=1e-12)


def test_an_agent_without_resolved_bets_is_a_clear_error(log: Path) -> None:
    with sqlite3.connect(log) as conn, pytest.raises(LedgerError, match="no rows to score"):
        log_murphy_sql(conn, agent="nobody")
