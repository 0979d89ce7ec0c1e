"""``arena score``: forecastbench's ``pm_eval`` for a file of resolved forecasts.

Scores are computed in float64 throughout. forecastbench casts the forecast and the market price
to float32 before the trading metrics (origins §2.10); we do not, because a CSV written with six
decimals should be scored as written, and the float32 cast moves P/L by about 1e-7 at most.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import click
import numpy as np
from rich.table import Table
from rich.text import Text

from arena.console import make_console
from ledger.metrics import (
    BinStats,
    MetricInputError,
    TradingMode,
    brier,
    brier_skill_score,
    ece_from_bins,
    group_calibration_bias,
    kelly_bankroll,
    log_loss,
    murphy,
    realized_trading_pnl,
    reliability,
)

LABEL_COL = "y"
MARKET_COL = "market_prob"
DIAGRAM_WIDTH = 24


@dataclass(frozen=True)
class Forecasts:
    """The columns of a forecasts file that scoring uses, already checked row by row."""

    y: list[float]
    pred: list[float]
    market: list[float] | None
    groups: dict[str, list[str]]


def _open_text(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def _file_format(path: Path) -> str:
    suffix = path.with_suffix("").suffix if path.suffix == ".gz" else path.suffix
    if suffix not in (".csv", ".jsonl"):
        raise click.ClickException(f"{path}: unknown format, expected .csv or .jsonl (or .gz)")
    return suffix


def _records(path: Path, fh: TextIO) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """Column names and the data rows of a CSV or JSON Lines file (blank JSONL lines skipped)."""
    if _file_format(path) == ".csv":
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), iter(reader)
    lines = (line for line in fh if line.strip())
    first = next(lines, None)
    if first is None:
        return [], iter(())
    head = _json_object(path, 1, first)

    def rows() -> Iterator[dict[str, Any]]:
        yield head
        for number, line in enumerate(lines, start=2):
            yield _json_object(path, number, line)

    return list(head), rows()


def _json_object(path: Path, row: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"{path}: row {row}: not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise click.ClickException(f"{path}: row {row}: expected a JSON object")
    return value


def _number(path: Path, row: int, column: str, value: Any) -> float:
    """A finite number from a CSV string or a JSON value; anything else names the row."""
    try:
        number = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise click.ClickException(f"{path}: row {row}: {column} is {value!r}, not a number")
    return number


def _probability(path: Path, row: int, column: str, value: Any) -> float:
    number = _number(path, row, column, value)
    if not 0.0 <= number <= 1.0:
        raise click.ClickException(f"{path}: row {row}: {column} is {value!r}, outside [0, 1]")
    return number


def _label(path: Path, row: int, value: Any) -> float:
    number = _number(path, row, LABEL_COL, value)
    if number not in (0.0, 1.0):
        raise click.ClickException(f"{path}: row {row}: {LABEL_COL} is {value!r}, expected 0 or 1")
    return number


def _field(path: Path, row: int, record: dict[str, Any], column: str) -> Any:
    if column not in record or record[column] is None:
        raise click.ClickException(f"{path}: row {row}: no value for column {column!r}")
    return record[column]


def read_forecasts(path: Path, pred_col: str, group_cols: list[str]) -> Forecasts:
    """Read and check every row, failing on the first bad one with its 1-based row number."""
    try:
        with _open_text(path) as fh:
            columns, records = _records(path, fh)
            if not columns:
                raise click.ClickException(f"{path}: empty file, no forecasts to score")
            missing = [c for c in (LABEL_COL, pred_col, *group_cols) if c not in columns]
            if missing:
                raise click.ClickException(
                    f"{path}: missing column {missing[0]!r} (has: {', '.join(columns)})"
                )
            has_market = MARKET_COL in columns
            y: list[float] = []
            pred: list[float] = []
            market: list[float] = []
            groups: dict[str, list[str]] = {col: [] for col in group_cols}
            for row, record in enumerate(records, start=1):
                y.append(_label(path, row, _field(path, row, record, LABEL_COL)))
                value = _field(path, row, record, pred_col)
                pred.append(_probability(path, row, pred_col, value))
                if has_market:
                    value = _field(path, row, record, MARKET_COL)
                    market.append(_probability(path, row, MARKET_COL, value))
                for col in group_cols:
                    groups[col].append(str(_field(path, row, record, col)))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise click.ClickException(f"{path}: cannot read ({exc})") from None
    if not y:
        raise click.ClickException(f"{path}: no data rows, nothing to score")
    return Forecasts(y=y, pred=pred, market=market if has_market else None, groups=groups)


def score_report(
    data: Forecasts, bins: int, mode: TradingMode, B: float, cost: float
) -> tuple[dict[str, Any], BinStats]:
    """The pm_eval JSON (plus Brier skill and Murphy) and the bins behind ECE and the diagram."""
    stats = reliability(data.pred, data.y, bins, right_closed=True)
    decomposition = murphy(data.pred, data.y, bins, right_closed=True)
    report: dict[str, Any] = {
        "n": len(data.y),
        "brier": brier(data.pred, data.y),
        "logloss": log_loss(data.pred, data.y),
        "ece": ece_from_bins(stats),
        "bss": brier_skill_score(data.pred, data.y, "random"),
        "murphy": {
            "reliability": decomposition.reliability,
            "resolution": decomposition.resolution,
            "uncertainty": decomposition.uncertainty,
        },
    }
    if data.market is not None:
        kelly = kelly_bankroll(data.pred, data.market, data.y, fee=cost)
        report["trading"] = {
            "mode": mode,
            "B": B,
            "transaction_cost": cost,
            "pnl_per_event": realized_trading_pnl(
                data.pred, data.market, data.y, B=B, transaction_cost=cost, mode=mode
            ),
            "kelly": {"n": kelly.n, "roi": kelly.roi, "final_bankroll": kelly.final_bankroll},
        }
    if data.groups:
        report["groups"] = {}
        for col, labels in data.groups.items():
            bias = group_calibration_bias(data.pred, data.y, labels)
            report["groups"][col] = {
                "worst_abs_bias": bias.worst_abs_bias,
                "avg_abs_bias": bias.avg_abs_bias,
                "n_groups": bias.n_groups,
            }
    return report, stats


def _metrics_table(path: Path, report: dict[str, Any]) -> Table:
    table = Table(title=f"{path.name}: {report['n']} forecasts", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    murphy_ = report["murphy"]
    rows: list[tuple[str, str]] = [
        ("Brier", f"{report['brier']:.6f}"),
        ("log loss", f"{report['logloss']:.6f}"),
        ("ECE", f"{report['ece']:.6f}"),
        ("Brier skill vs 0.25", f"{report['bss']:+.4f}"),
        ("reliability (REL)", f"{murphy_['reliability']:.6f}"),
        ("resolution (RES)", f"{murphy_['resolution']:.6f}"),
        ("uncertainty (UNC)", f"{murphy_['uncertainty']:.6f}"),
    ]
    if "trading" in report:
        trading = report["trading"]
        rows += [
            (
                f"P/L per event ({trading['mode']}, B={trading['B']:g}, "
                f"c={trading['transaction_cost']:g})",
                f"{trading['pnl_per_event']:+.6f}",
            ),
            ("Kelly ROI (cap 0.25)", f"{trading['kelly']['roi']:+.4f}"),
            ("Kelly final bankroll", f"{trading['kelly']['final_bankroll']:.6g}"),
        ]
    for col, bias in report.get("groups", {}).items():
        rows.append(
            (
                f"bias by {col} ({bias['n_groups']} groups): worst / avg",
                f"{bias['worst_abs_bias']:.4f} / {bias['avg_abs_bias']:.4f}",
            )
        )
    for name, value in rows:
        table.add_row(name, value)
    return table


def _diagram_bar(forecast: float, observed: float) -> Text:
    """Observed frequency as a bar, the mean forecast as a marker: calibrated when they meet."""
    bar = Text()
    filled = round(observed * DIAGRAM_WIDTH)
    marker = min(round(forecast * DIAGRAM_WIDTH), DIAGRAM_WIDTH - 1)
    for cell in range(DIAGRAM_WIDTH):
        if cell == marker:
            bar.append("┃", style="bold yellow")
        else:
            bar.append("█" if cell < filled else "·", style="cyan" if cell < filled else "dim")
    return bar


def _reliability_table(stats: BinStats) -> Table:
    table = Table(
        title="reliability: bar = observed frequency, ┃ = mean forecast",
        caption="empty bins omitted",
    )
    for name in ("bin", "n", "forecast", "observed"):
        table.add_column(name, justify="right")
    table.add_column("0 ── observed ── 1", no_wrap=True, min_width=DIAGRAM_WIDTH)
    for b in np.flatnonzero(stats.nonempty):
        forecast, observed = float(stats.mean_forecast[b]), float(stats.observed[b])
        table.add_row(
            f"{stats.lower[b]:.2f}–{stats.upper[b]:.2f}",
            str(int(stats.count[b])),
            f"{forecast:.3f}",
            f"{observed:.3f}",
            _diagram_bar(forecast, observed),
        )
    return table


@click.command("score")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--pred-col", default="pred_prob", show_default=True, help="Forecast column.")
@click.option(
    "--group-cols", default="", help="Comma-separated columns to check calibration bias by."
)
@click.option(
    "--bins", default=20, show_default=True, type=click.IntRange(min=1), help="ECE/Murphy bins."
)
@click.option(
    "--mode",
    type=click.Choice(["sign", "linear"]),
    default="sign",
    show_default=True,
    help="Trading rule: stake B toward the edge (sign) or B·edge capped at B (linear).",
)
@click.option(
    "--B", "B", default=1.0, show_default=True, type=click.FloatRange(min=0), help="Largest stake."
)
@click.option(
    "--cost",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Transaction cost per unit staked (also the Kelly fee).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
def score(
    file: Path,
    pred_col: str,
    group_cols: str,
    bins: int,
    mode: TradingMode,
    B: float,
    cost: float,
    as_json: bool,
) -> None:
    """Score resolved forecasts: Brier, log loss, ECE, Murphy, trading P/L and Kelly.

    FILE is CSV or JSON Lines (.csv, .jsonl, optionally .gz) with a 0/1 column `y`, a forecast
    column (--pred-col) and, optionally, `market_prob` (enables the trading block: P/L per
    event and a capped-Kelly bankroll run against the market price, in file order). ECE, the
    Murphy decomposition and the diagram use --bins equal-width right-closed bins (forecastbench:
    0.05 with 20 bins is in the first bin). `bss` is the Brier skill against 0.25, the score of
    always saying 0.5. All arithmetic is float64 (forecastbench casts to float32 for trading).

    \b
    Example:
      arena score forecasts.csv --group-cols race --mode linear --cost 0.01
      arena score preds.jsonl.gz --pred-col p --json
    """
    groups = [col.strip() for col in group_cols.split(",") if col.strip()]
    data = read_forecasts(file, pred_col, groups)
    try:
        report, stats = score_report(data, bins, mode, B, cost)
    except MetricInputError as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    console = make_console()
    if as_json:
        console.print_json(json.dumps(report))
        return
    console.print(_metrics_table(file, report))
    console.print(_reliability_table(stats))
