"""Reading a table of records from CSV or JSON Lines, maybe gzipped: the one reader behind the
``file:`` forecaster (``strategies.forecasters``) and ``arena score``
(``arena.forecasting.scorefile``).

A table's columns are a CSV file's header, or the keys of a JSON Lines file's first object;
its rows are numbered from 1 in data-row order (a CSV header and blank JSON Lines are not
rows), and every problem is one :class:`TableError` line that names the file and, where there
is one, the row, so a user fixes the file rather than guessing. What a cell must hold is the
caller's to check (a probability, a label, a time), with the same ``path: row N:`` prefix
(:meth:`Table.problem`).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

FORMATS = (".csv", ".jsonl")
"""What a table file may be, either one optionally followed by ``.gz``."""


class TableError(ValueError):
    """A table file that cannot be read as one; the message is one line naming the file."""


@dataclass
class Table:
    """An open table: its columns, and its rows as ``(number, record)`` read as iterated."""

    path: Path
    columns: list[str]
    rows: Iterator[tuple[int, dict[str, Any]]]

    def problem(self, row: int, message: str) -> TableError:
        """The error for a bad value in ``row``: ``path: row N: message``."""
        return TableError(f"{self.path}: row {row}: {message}")

    def require(self, *columns: str) -> None:
        """Every one of ``columns`` is in the table, or the first missing one is named."""
        missing = [c for c in columns if c not in self.columns]
        if missing:
            has = ", ".join(self.columns) or "none"
            raise TableError(f"{self.path}: missing column {missing[0]!r} (has: {has})")


def table_format(path: Path) -> str:
    """``.csv`` or ``.jsonl`` (a ``.gz`` after either is read through gzip)."""
    suffix = path.with_suffix("").suffix if path.suffix == ".gz" else path.suffix
    if suffix not in FORMATS:
        raise TableError(f"{path}: unknown format, expected .csv or .jsonl (or .gz)")
    return suffix


@contextmanager
def open_table(path: Path) -> Iterator[Table]:
    """The table in ``path``, open while the block runs; reading it (here or while the block
    iterates its rows) fails as one TableError (``path: cannot read (...)``)."""
    kind = table_format(path)
    try:
        with _open_text(path) as handle:
            columns, rows = _csv(path, handle) if kind == ".csv" else _jsonl(path, handle)
            yield Table(path, columns, rows)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise TableError(f"{path}: cannot read ({exc})") from None


def _open_text(path: Path) -> TextIO:
    """UTF-8, with the byte-order mark Excel's "CSV UTF-8" writes skipped: read as part of the
    first column's name, it made 'missing column 'y' (has: y, pred_prob)', the mark unseen."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


def _csv(path: Path, handle: TextIO) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    """Rows as records of the header's columns. A row with more or fewer fields than the header
    is an error: ``csv.DictReader`` filled the missing ones with None (read as a blank, "no
    forecast") and kept extra ones aside, so a stray comma or an unclosed quote, which swallows
    the rest of the file into one field, went unnoticed."""
    reader = csv.reader(handle)
    columns = next(reader, [])

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        number = 0
        for fields in reader:
            if not fields:
                continue  # a blank line is no row
            number += 1
            if len(fields) != len(columns):
                raise TableError(
                    f"{path}: row {number}: {len(fields)} field(s) where the header has "
                    f"{len(columns)}"
                )
            yield number, dict(zip(columns, fields, strict=True))

    return columns, rows()


def _jsonl(path: Path, handle: TextIO) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    lines = (line for line in handle if line.strip())
    first = next(lines, None)
    if first is None:
        return [], iter(())
    head = _json_object(path, 1, first)

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        yield 1, head
        for number, line in enumerate(lines, start=2):
            yield number, _json_object(path, number, line)

    return list(head), rows()


def _json_object(path: Path, row: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TableError(f"{path}: row {row}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise TableError(f"{path}: row {row}: nested too deeply to read") from None
    if not isinstance(value, dict):
        raise TableError(f"{path}: row {row}: expected a JSON object")
    return value
