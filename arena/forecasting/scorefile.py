"""Reading a file of resolved forecasts for ``arena score``: CSV or JSON Lines, maybe gzipped.

Every row is checked as it is read and the first bad one is named with its 1-based number, so a
user fixes the file rather than guessing why a metric came out odd. A row whose forecast is a
list (a JSON array, or in CSV a cell holding one) is a multi-outcome row: its ``y`` is the index
of the outcome that happened, and it is scored with the multi-class metrics. Optional columns
are used when present: ``market_prob`` (trading), ``p_true`` (the truth, for SCE and the bounded
trader), and forecastbench's time columns (the order of approachability and repair).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from replays.untrusted import bytes_from_env
from strategies.tablefile import Table, TableError, open_table

LABEL_COL = "y"
MARKET_COL = "market_prob"
TRUTH_COL = "p_true"
FORECAST_TIME_COLS = ("market_prob_target_ts", "createdAt")
"""forecastbench's forecast instant: the first of these a file has (else the row order)."""
RESOLVE_TIME_COLS = ("market_event_ts", "endDate", "closedTime")
"""and its resolution instant (else never)."""
RUN_COLS = ("cohort", "agent")
"""The columns that tell one bettor's rows from another's (``arena export``'s predictions):
rows of different cohorts or agents are parallel runs, each with its own bankroll."""
MAX_BYTES_ENV = "ARENA_SCORE_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
"""The most a forecasts file may hold, decompressed: 1 GiB is about 20 M rows of
forecastbench's columns, far past any published set, and a 4 GiB gzip bomb is refused after
1 GiB was inflated rather than read whole."""
_CHUNK = 1 << 20
SUM_TOLERANCE = 0.01
"""How far a multi-outcome forecast may sum from 1 (rounding in a file, not a typo)."""


@dataclass
class MultiRows:
    """The multi-outcome rows: forecast vectors, the index that happened, and the truth."""

    pred: list[list[float]] = field(default_factory=list)
    y: list[int] = field(default_factory=list)
    truth: list[list[float]] | None = None


@dataclass
class Forecasts:
    """The columns of a forecasts file that scoring uses, already checked row by row. The
    binary columns hold the binary rows only; ``forecast_ts``/``resolve_ts`` are unix seconds,
    NaN where a row has none."""

    y: list[float]
    pred: list[float]
    market: list[float] | None
    groups: dict[str, list[str]]
    truth: list[float] | None = None
    forecast_ts: list[float] | None = None
    resolve_ts: list[float] | None = None
    time_cols: tuple[str | None, str | None] = (None, None)
    runs: list[str] | None = None
    """Each binary row's bettor: its ``RUN_COLS`` values as a JSON list (unambiguous)."""
    run_cols: tuple[str, ...] = ()
    multi: MultiRows = field(default_factory=MultiRows)


class _Row:
    """One record and where it came from, for checks that name the file, row and column."""

    def __init__(self, table: Table, number: int, record: dict[str, Any]) -> None:
        self.table, self.line, self.record = table, number, record

    def fail(self, message: str) -> TableError:
        return self.table.problem(self.line, message)

    def field(self, column: str) -> Any:
        value = self.record.get(column)
        if value is None:
            raise self.fail(f"no value for column {column!r}")
        return value

    def number(self, column: str, value: Any) -> float:
        """A finite number from a CSV string or a JSON value."""
        try:
            number = float(value) if isinstance(value, int | float | str) else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or isinstance(value, bool):
            raise self.fail(f"{column} is {value!r}, not a number")
        return number

    def probability(self, column: str, value: Any) -> float:
        number = self.number(column, value)
        if not 0.0 <= number <= 1.0:
            raise self.fail(f"{column} is {value!r}, outside [0, 1]")
        return number

    def vector(self, column: str) -> list[float] | None:
        """The column as a probability vector if it holds a list (JSON array), else None."""
        value = self.field(column)
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise self.fail(f"{column} is {value!r}, not a list of numbers") from None
            except RecursionError:
                raise self.fail(f"{column} is nested too deeply to read") from None
        if not isinstance(value, list):
            return None
        if len(value) < 2:
            raise self.fail(f"{column} has {len(value)} outcome(s), a forecast needs 2 or more")
        probs = [self.probability(column, v) for v in value]
        if abs(sum(probs) - 1.0) > SUM_TOLERANCE:
            raise self.fail(f"{column} sums to {sum(probs):.6g}, not 1")
        return probs

    def label(self) -> float:
        number = self.number(LABEL_COL, self.field(LABEL_COL))
        if number not in (0.0, 1.0):
            raise self.fail(f"{LABEL_COL} is {self.record[LABEL_COL]!r}, expected 0 or 1")
        return number

    def outcome_index(self, outcomes: int) -> int:
        number = self.number(LABEL_COL, self.field(LABEL_COL))
        if number != int(number) or not 0 <= number < outcomes:
            raise self.fail(
                f"{LABEL_COL} is {self.record[LABEL_COL]!r}, expected an outcome index "
                f"0..{outcomes - 1}"
            )
        return int(number)

    def instant(self, column: str | None) -> float:
        """Unix seconds from a number or an ISO 8601 text; NaN when the row has no value."""
        if column is None:
            return math.nan
        value = self.record.get(column)
        if value is None or value == "":
            return math.nan
        try:
            return self.number(column, value)
        except TableError:
            pass
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise self.fail(f"{column} is {value!r}, not a unix time or ISO 8601") from None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _first(columns: list[str], candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if c in columns), None)


def read_forecasts(path: Path, pred_col: str, group_cols: list[str]) -> Forecasts:
    """Read and check every row, failing on the first bad one with its 1-based row number."""
    try:
        _check_size(path, _max_bytes())
        with open_table(path) as table:
            if not table.columns:
                raise TableError(f"{path}: empty file, no forecasts to score")
            _check_unique(table)
            table.require(LABEL_COL, pred_col, *group_cols)
            data = _read_rows(table, pred_col, group_cols)
    except TableError as exc:
        raise click.ClickException(str(exc)) from None
    if not data.y and not data.multi.y:
        raise click.ClickException(f"{path}: no data rows, nothing to score")
    return data


def _max_bytes() -> int:
    limit = bytes_from_env(MAX_BYTES_ENV, DEFAULT_MAX_BYTES)
    if limit is None:
        raw = os.environ.get(MAX_BYTES_ENV)
        raise TableError(f"{MAX_BYTES_ENV}={raw!r} is not a number of bytes")
    return limit


def _check_size(path: Path, limit: int) -> None:
    """Refuse a file that holds, or inflates to, more than ``limit`` bytes, before a row is
    read; a gzip is inflated a chunk at a time and dropped, so a bomb costs the limit, not
    itself. A file that cannot be read is left for the reader to name."""
    too_big = TableError(
        f"{path}: more than {limit:,} bytes of forecasts, the limit ({MAX_BYTES_ENV} raises it)"
    )
    try:
        if path.suffix != ".gz":
            if path.stat().st_size > limit:
                raise too_big
            return
        seen = 0
        with gzip.open(path, "rb") as gz:
            while chunk := gz.read(_CHUNK):
                seen += len(chunk)
                if seen > limit:
                    raise too_big
    except (OSError, EOFError, zlib.error):
        return


def _check_unique(table: Table) -> None:
    """A column named twice is refused: which of the two a reader takes is an accident."""
    twice = [name for name, count in Counter(table.columns).items() if count > 1]
    if twice:
        raise TableError(f"{table.path}: column {twice[0]!r} appears more than once")


def _read_rows(table: Table, pred_col: str, group_cols: list[str]) -> Forecasts:
    columns = table.columns
    has_market, has_truth = MARKET_COL in columns, TRUTH_COL in columns
    made_col = _first(columns, FORECAST_TIME_COLS)
    known_col = _first(columns, RESOLVE_TIME_COLS)
    run_cols = tuple(c for c in RUN_COLS if c in columns)
    data = Forecasts(
        y=[],
        pred=[],
        market=[] if has_market else None,
        groups={col: [] for col in group_cols},
        truth=[] if has_truth else None,
        forecast_ts=[],
        resolve_ts=[],
        time_cols=(made_col, known_col),
        runs=[] if run_cols else None,
        run_cols=run_cols,
        multi=MultiRows(truth=[] if has_truth else None),
    )
    for number, record in table.rows:
        row = _Row(table, number, record)
        vector = row.vector(pred_col)
        if vector is not None:
            _multi_row(row, vector, data.multi)
            continue
        data.y.append(row.label())
        data.pred.append(row.probability(pred_col, row.field(pred_col)))
        if data.market is not None:
            data.market.append(row.probability(MARKET_COL, row.field(MARKET_COL)))
        if data.truth is not None:
            data.truth.append(row.probability(TRUTH_COL, row.field(TRUTH_COL)))
        for col in group_cols:
            data.groups[col].append(str(row.field(col)))
        if data.runs is not None:
            data.runs.append(json.dumps([str(row.field(col)) for col in run_cols]))
        assert data.forecast_ts is not None and data.resolve_ts is not None
        data.forecast_ts.append(row.instant(made_col))
        data.resolve_ts.append(row.instant(known_col))
    return data


def _multi_row(row: _Row, vector: list[float], multi: MultiRows) -> None:
    multi.pred.append(vector)
    multi.y.append(row.outcome_index(len(vector)))
    if multi.truth is not None:
        truth = row.vector(TRUTH_COL)
        if truth is None or len(truth) != len(vector):
            raise row.fail(f"{TRUTH_COL} must be a list of {len(vector)} probabilities here")
        multi.truth.append(truth)
