"""A run for a notebook: ``arena.open_run("arena.db")`` and its tables, without SQL.

    >>> import arena
    >>> run = arena.open_run("arena.db")
    >>> run.fills.to_numpy()["amount"].sum()      # numpy; .to_arrow(), .to_pandas() too

The tables are those of ``arena export`` (see :mod:`arena.reports.tables`), read once, checked, when
the run is opened; ``report`` is what ``arena report --json`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.reports.model import report_data
from arena.reports.tables import Columns, RunTables, read_tables
from ledger.store import EventStore


@dataclass(frozen=True)
class Run:
    """A run's tables. ``note`` is the one line a read had to say (an unusable snapshot, a
    head that moved), or None."""

    path: Path
    cohorts: list[str]
    note: str | None
    _tables: RunTables

    def _table(self, name: str) -> Columns:
        return self._tables.tables[name]

    @property
    def fills(self) -> Columns:
        return self._table("fills")

    @property
    def decisions(self) -> Columns:
        return self._table("decisions")

    @property
    def positions(self) -> Columns:
        return self._table("positions")

    @property
    def brier(self) -> Columns:
        return self._table("brier")

    @property
    def beliefs(self) -> Columns:
        return self._table("beliefs")

    @property
    def predictions(self) -> Columns:
        return self._table("predictions")

    def report(self) -> dict[str, Any]:
        """Per-cohort standings and the leaderboard, as ``arena report --json`` gives them."""
        return report_data(self._tables.loaded.ledger)


def open_run(path: str | Path, cohorts: list[str] | None = None) -> Run:
    """Open the log at ``path`` (read-only) and read the tables of its cohorts (or of the
    given ones). Raises ``ledger.errors.LedgerError`` (IntegrityError naming the seq) if the
    log is not readable or its links do not hold."""
    path = Path(path)
    with EventStore.open(path, readonly=True) as store:
        tables = read_tables(store, cohorts)
    names = sorted(tables.loaded.ledger.cohorts)
    return Run(path, names, tables.loaded.note(), tables)
