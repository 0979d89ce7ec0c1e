"""Writing a run's tables where other tools read them: CSV, Parquet, and SQLite tables.

CSV needs nothing; Parquet needs pyarrow (the ``parquet`` extra), asked for with a one-line
error when it is missing; SQLite goes through ``sqlite-utils`` into its own file, never the
log (the log is append-only and holds only events and snapshots), so Datasette or any SQL tool
can browse the tables: ``datasette DIR/tables.db``.

Every file is written whole or not at all: beside its name, then moved over it (on a full
disk the partial file is removed, and a file of an earlier export stays as it was).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlite_utils

from arena.reports.tables import Columns, cells, optional

SQLITE_NAME = "tables.db"


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A path to write ``path``'s new contents to, moved over ``path`` when the block ends
    and removed (with any journal SQLite left beside it) if it raises."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        yield partial
        partial.replace(path)
    except BaseException:
        for leftover in (partial, partial.with_name(partial.name + "-journal")):
            leftover.unlink(missing_ok=True)
        raise


def write_csv(tables: dict[str, Columns], folder: Path) -> list[Path]:
    written = []
    for name, table in tables.items():
        path = folder / f"{name}.csv"
        with replacing(path) as partial, partial.open("w", newline="", encoding="utf-8") as fh:
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
        with replacing(path) as partial:
            parquet.write_table(table.to_arrow(), partial)
        written.append(path)
    return written


def write_sqlite(tables: dict[str, Columns], path: Path) -> Path:
    """Each table as a SQLite table of the same name (replacing an earlier export's), typed
    from its values, indexed by cohort and agent where it has them."""
    with replacing(path) as partial:
        db = sqlite_utils.Database(partial, recreate=True)
        try:
            for name, table in tables.items():
                db[name].create(table.types)  # type: ignore[union-attr]
                db[name].insert_all(table.dicts())  # type: ignore[union-attr]
                for column in ("cohort", "agent"):
                    if column in table.names:
                        db[name].create_index([column])  # type: ignore[union-attr]
        finally:
            db.close()
    return path
