"""Writing a run's tables where other tools read them: CSV, Parquet, and SQLite tables.

CSV needs nothing; Parquet needs pyarrow (the ``parquet`` extra), asked for with a one-line
error when it is missing; SQLite goes through ``sqlite-utils`` into its own file, never the
log (the log is append-only and holds only events and snapshots), so Datasette or any SQL tool
can browse the tables: ``datasette DIR/tables.db``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import sqlite_utils

from arena.reports.tables import Columns, cells, optional

SQLITE_NAME = "tables.db"


def write_csv(tables: dict[str, Columns], folder: Path) -> list[Path]:
    written = []
    for name, table in tables.items():
        path = folder / f"{name}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(table.names)
            out.writerows(cells(row) for row in table.rows)
        written.append(path)
    return written


def write_parquet(tables: dict[str, Columns], folder: Path) -> list[Path]:
    """One Parquet file a table; LedgerError naming the extra if pyarrow is missing."""
    parquet = optional("pyarrow.parquet", "parquet")
    written = []
    for name, table in tables.items():
        path = folder / f"{name}.parquet"
        parquet.write_table(table.to_arrow(), path)
        written.append(path)
    return written


def write_sqlite(tables: dict[str, Columns], path: Path) -> Path:
    """Each table as a SQLite table of the same name (replacing an earlier export's), typed
    from its values, indexed by cohort and agent where it has them."""
    db = sqlite_utils.Database(path, recreate=True)
    for name, table in tables.items():
        db[name].create(table.types)  # type: ignore[union-attr]
        db[name].insert_all(table.dicts())  # type: ignore[union-attr]
        for column in ("cohort", "agent"):
            if column in table.names:
                db[name].create_index([column])  # type: ignore[union-attr]
    db.close()
    return path
