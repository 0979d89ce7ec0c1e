"""Where a trading agent's probabilities come from: the market itself, a stretch of it, a file,
a language model, or a diffusion model trained on the markets that resolved before the cohort.

A forecaster answers one question per decision: P(YES) for every market of the universe, NaN
where it has no opinion. Keeping the source apart from the trading rule lets ``sign`` and
``linear`` trade any forecasts the same way, as forecastbench's ``pm_eval`` scores any
predictions column against the same market column (methodology §2.4).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pydantic

from ledger.metrics import asymmetric_extremize
from strategies.api import (
    MarketsView,
    StrategyError,
    View,
)
from strategies.forecaster_registry import (
    ForecasterSettings,
    RegisteredForecaster,
)
from strategies.tablefile import Table, TableError, open_table

DEFAULT_COLUMN = "pred_prob"
ID_COLUMN = "market_id"
DAY = 86_400
MIN_SPREAD_POINTS = 2


class MarketForecaster(RegisteredForecaster):
    """p := q, the price itself. An edge rule never trades on it, so an agent built on it must
    end with its starting cash: the sanity baseline for the trading machinery."""

    def forecast(self, view: View) -> np.ndarray:
        return np.array(view.markets.yes, dtype=np.float64)


@dataclass(frozen=True)
class ExtremizedForecaster(RegisteredForecaster):
    """K-Fish's asymmetric extremization (methodology §3.2) applied to the market price.

    K-Fish stretches an ensemble's median by how much its members agree. A market has no
    ensemble, so the spread ``s`` is the (population) standard deviation of the market's own
    prices over the last ``window`` seconds: a price that has sat still is treated as a crowd in
    agreement and pushed away from 0.5, a price that has swung is pulled toward it. A fixed
    ``spread`` replaces the measured one. Markets with fewer than two points in the window get
    no forecast rather than the boldest stretch.
    """

    a: float = 0.5
    spread: float | None = None
    window: int = 7 * DAY

    def forecast(self, view: View) -> np.ndarray:
        q = np.asarray(view.markets.yes, dtype=np.float64)
        s = self.spreads(view.markets) if self.spread is None else np.full(q.size, self.spread)
        p = np.full(q.size, np.nan)
        known = np.isfinite(q) & np.isfinite(s)
        if known.any():
            p[known] = asymmetric_extremize(q[known], s[known], self.a)
        return p

    def spreads(self, markets: MarketsView) -> np.ndarray:
        """Std of each open market's outcome-0 price over the window (NaN if too few points)."""
        out = np.full(len(markets), np.nan)
        since = markets.ts - self.window
        for i in np.flatnonzero(markets.open & np.isfinite(markets.yes)):
            _, values = markets.history(markets.ids[i], since=since)  # the window's points only
            column = np.asarray(values, dtype=np.float64)[:, 0]  # none when the window is empty
            if column.size >= MIN_SPREAD_POINTS:
                out[i] = float(column.std())
        return out


class PredictionsForecaster:
    """Fixed predictions keyed by market id, lined up with the universe once per cohort."""

    def __init__(self, predictions: dict[str, float]) -> None:
        self.predictions = predictions
        self._aligned: tuple[tuple[str, ...], np.ndarray] | None = None

    def forecast(self, view: View) -> np.ndarray:
        ids = view.markets.ids
        if self._aligned is None or self._aligned[0] is not ids:
            p = np.array([self.predictions.get(m, np.nan) for m in ids], dtype=np.float64)
            p.setflags(write=False)
            self._aligned = (ids, p)
        return self._aligned[1]


class FileForecaster(PredictionsForecaster, RegisteredForecaster):
    """Predictions from a file keyed by market id, read once when the agent is built.

    A ``.csv`` (with a header) or ``.jsonl`` file with a ``market_id`` column and a probability
    column (``pred_prob`` by default, forecastbench's name). Ids that are not in the universe are
    ignored, so one file can serve many cohorts; a blank probability means "no forecast".
    """

    class Settings(ForecasterSettings):
        column: str = pydantic.Field(default=DEFAULT_COLUMN, description="probability column")

    argument = ":PATH.csv|.jsonl"

    def __init__(self, path: str | Path, column: str = DEFAULT_COLUMN) -> None:
        self.path = Path(path)
        self.column = column
        super().__init__(read_predictions(self.path, column))

    @classmethod
    def from_settings(cls, arg: str, settings: pydantic.BaseModel) -> FileForecaster:
        assert isinstance(settings, cls.Settings)
        return cls(arg, settings.column)


def _probability(raw: Any, table: Table, row: int, column: str) -> float:
    """A probability in [0, 1]; a blank cell (or JSON null) is NaN, no forecast."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return math.nan
    value = math.nan
    if not isinstance(raw, bool):
        with contextlib.suppress(TypeError, ValueError):
            value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise table.problem(row, f"{column} {raw!r} is not a probability in [0, 1]")
    return value


def read_predictions(path: Path, column: str = DEFAULT_COLUMN) -> dict[str, float]:
    """market id -> P(YES) from a ``strategies.tablefile`` table; a missing or malformed file
    is a one-line StrategyError naming the file and the row, because a silently skipped row
    would change what the agent trades."""
    try:
        return _predictions(path, column)
    except TableError as exc:
        raise StrategyError(f"forecaster file {exc}") from None


def _predictions(path: Path, column: str) -> dict[str, float]:
    predictions: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    with open_table(path) as table:
        table.require(ID_COLUMN, column)
        for row, record in table.rows:
            raw_id = record.get(ID_COLUMN)
            market = str(raw_id).strip() if raw_id is not None else ""
            if not market:
                raise table.problem(row, f"empty {ID_COLUMN}")
            if market in first_seen:
                raise table.problem(
                    row, f"market {market} already has a forecast in row {first_seen[market]}"
                )
            if column not in record:
                raise table.problem(row, f"no {column!r}")
            first_seen[market] = row
            predictions[market] = _probability(record[column], table, row, column)
    if not predictions:
        raise TableError(f"{path}: no predictions")
    return predictions
