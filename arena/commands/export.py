"""``arena export DB --to DIR``: a run's tables as CSV (and Parquet), predictions, SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import click

from arena.reports.export import SQLITE_NAME, write_csv, write_parquet, write_sqlite
from arena.reports.tables import read_tables
from ledger.errors import IntegrityError
from ledger.store import EventStore


@click.command()
@click.argument("db", type=click.Path(path_type=Path))
@click.option(
    "--to",
    "folder",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write into (created if missing; files of an earlier export are replaced).",
)
@click.option("--cohort", "cohorts", multiple=True, help="Only these cohorts (repeatable).")
@click.option("--parquet", is_flag=True, help="Parquet files too (needs 'arena[parquet]').")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def export(db: Path, folder: Path, cohorts: tuple[str, ...], parquet: bool, as_json: bool) -> None:
    """Write a run's fills, positions, decisions, Brier rows and stated beliefs as CSV (and
    Parquet), a predictions file for 'arena score', and SQLite tables.

    Files: fills, decisions, positions, brier, beliefs and predictions (.csv, and .parquet with
    --parquet), and tables.db with the same tables for Datasette or any SQL tool.
    predictions.csv is the shape 'arena score' reads (y, pred_prob, market_prob).

    \b
    Examples:
      arena export arena.db --to out/
      arena score out/predictions.csv --group-cols agent
      arena export arena.db --to out/ --parquet --cohort 2024-09-01-1a2b3c4d
    """
    tables_db = folder / SQLITE_NAME
    if tables_db.exists() and db.exists() and tables_db.samefile(db):  # it was overwritten
        raise click.ClickException(f"{db} is the log; export it to another folder than {folder}")
    try:
        with EventStore.open(db, readonly=True) as store:
            run = read_tables(store, cohorts or None)
        if not run.loaded.ledger.cohorts:  # a replay stopped before its first step
            raise click.ClickException(f"{db} holds no cohorts: nothing to export")
        folder.mkdir(parents=True, exist_ok=True)
        written = write_csv(run.tables, folder)
        if parquet:
            written += write_parquet(run.tables, folder)
        written.append(write_sqlite(run.tables, folder / SQLITE_NAME))
    except IntegrityError as exc:
        raise click.ClickException(f"{exc}; nothing exported (run 'arena verify {db}')") from None
    except OSError as exc:
        detail = exc.strerror or str(exc)
        raise click.ClickException(f"{folder}: cannot write the export: {detail}") from None
    except sqlite3.Error as exc:  # tables.db on a full disk: "database or disk is full"
        raise click.ClickException(f"{folder}: cannot write the export: {exc}") from None
    note = run.loaded.note()
    if note:
        click.echo(f"note: {note}", err=True)
    rows = {name: len(table) for name, table in run.tables.items()}
    if as_json:
        click.echo(json.dumps({"files": [str(p) for p in written], "rows": rows}, indent=2))
        return
    counts = ", ".join(f"{n:,} {name}" for name, n in rows.items())
    click.echo(f"wrote {len(written)} files to {folder}: {counts}")
