"""``arena score``: forecastbench's ``pm_eval`` for a file of resolved forecasts, and the rest
of its metrics when the file has what they need (``arena.forecasting.score`` computes them,
``arena.forecasting.scorefile`` reads the file)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.table import Table
from rich.text import Text

from arena.console import make_console
from arena.forecasting.score import BINS, Binning, ScoreOptions, score_report
from arena.forecasting.scorefile import read_forecasts
from ledger.metrics import BinStats, MetricInputError, TradingMode

DIAGRAM_WIDTH = 24
MAX_BINS = 10_000
"""The most bins ``--bins`` takes: the sources use 10 to 20, and 10^12 asked numpy for 7 TiB."""


def _metrics_table(path: Path, report: dict[str, Any]) -> Table:
    table = Table(title=f"{path.name}: {report['n']} binary forecasts", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    murphy_ = report["murphy"]
    rows: list[tuple[str, str]] = [
        ("Brier", f"{report['brier']:.6f}"),
        ("log loss", f"{report['logloss']:.6f}"),
        ("ECE", f"{report['ece']:.6f}"),
        ("Brier skill vs 0.25", f"{report['bss']:+.4f}"),
        ("Brier skill vs climatology o(1 − o)", _signed(report["bss_climatology"])),
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
            *_kelly_rows(trading["kelly"]),
        ]
    for col, bias in report.get("groups", {}).items():
        rows.append(
            (
                f"bias by {col} ({bias['n_groups']} groups): worst / avg",
                f"{bias['worst_abs_bias']:.4f} / {bias['avg_abs_bias']:.4f}",
            )
        )
    rows += _extra_rows(report)
    for name, value in rows:
        table.add_row(name, value)
    return table


def _signed(value: float | None) -> str:
    return "— (one outcome only)" if value is None else f"{value:+.4f}"


def _kelly_rows(kelly: dict[str, Any]) -> list[tuple[str, str]]:
    """One bettor's run, or the mean of one run per cohort / agent and its range."""
    if "runs" not in kelly:
        return [
            ("Kelly ROI (cap 0.25)", f"{kelly['roi']:+.2%}"),
            ("Kelly final bankroll (from 1)", f"{kelly['final_bankroll']:.6g}"),
        ]
    by = " × ".join(kelly["by"])
    return [
        (f"Kelly ROI (cap 0.25), mean of {kelly['runs']} runs, one per {by}",
         f"{kelly['roi']:+.2%}"),
        ("Kelly ROI: worst / best run", f"{kelly['roi_min']:+.2%} / {kelly['roi_max']:+.2%}"),
    ]  # fmt: skip


def _extra_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows for the blocks a file or an option adds: truth, approachability, repair."""
    rows: list[tuple[str, str]] = []
    if "truth" in report:
        rows += [
            ("SCE against p_true", f"{report['truth']['sce']:.6f}"),
            ("bounded trader profit B·E(|p_true − q| − c)₊",
             f"{report['truth']['bounded_trader_profit']:.6f}"),
        ]  # fmt: skip
    if "approachability" in report:
        app = report["approachability"]
        rows.append(
            (f"AppErr ({app['n_cells']} cells, eps={app['eps']:g}, by {app['order']})",
             f"{app['app_err']:.6f}")
        )  # fmt: skip
    if "repair" in report:
        repair = report["repair"]
        rows += [
            (f"repaired ({repair['n_updates']} outcomes learned): Brier", f"{repair['brier']:.6f}"),
            ("repaired: log loss", f"{repair['logloss']:.6f}"),
            ("repaired: ECE", f"{repair['ece']:.6f}"),
        ]
        if "pnl_per_event" in repair:
            rows.append(("repaired: P/L per event", f"{repair['pnl_per_event']:+.6f}"))
    return rows


def _multiclass_table(path: Path, block: dict[str, Any]) -> Table:
    table = Table(title=f"{path.name}: {block['n']} multi-outcome forecasts", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    table.add_row("Brier ‖q − e_y‖² (summed over outcomes)", f"{block['brier']:.6f}")
    table.add_row("log loss −ln q_y", f"{block['logloss']:.6f}")
    table.add_row("top-label ECE (15 bins)", f"{block['top_label_ece']:.6f}")
    if "sce" in block:
        table.add_row("SCE ‖q − p_true‖²", f"{block['sce']:.6f}")
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


def _finite(value: Any, where: str, notes: dict[str, None]) -> Any:
    """``value`` with every infinite or NaN float replaced by null and its place noted (list
    positions as ``[]``): JSON has no Infinity or NaN, and a reader must not choke on them.
    A Kelly run of long shots or a huge --cost overflows a float."""
    if isinstance(value, float) and not math.isfinite(value):
        notes[where] = None
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{where}.{k}" if where else k, notes) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v, f"{where}[]", notes) for v in value]
    return value


@click.command("score")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--pred-col", default="pred_prob", show_default=True, help="Forecast column.")
@click.option(
    "--group-cols", default="", help="Comma-separated columns to check calibration bias by."
)
@click.option(
    "--binning",
    type=click.Choice(["forecastbench", "kfish"]),
    default="forecastbench",
    show_default=True,
    help="ECE and Murphy bins: forecastbench's (20, right-closed linspace edges) or K-Fish's "
    "(15, floor(p·K)).",
)
@click.option(
    "--bins", type=click.IntRange(min=1, max=MAX_BINS), default=None,
    help="Bins of ECE, Murphy, approachability and repair [default: 20, kfish 15].",
)  # fmt: skip
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
    help="Transaction cost per unit staked (also the Kelly fee; approachability's eps = c/B).",
)
@click.option(
    "--approachability",
    "with_approachability",
    is_flag=True,
    help="Blackwell approachability over (group x bin) cells, in forecast-time order.",
)
@click.option(
    "--repair",
    "with_repair",
    is_flag=True,
    help="Score the online repair-at-resolution baseline too.",
)
@click.option(
    "--float32",
    "float32",
    is_flag=True,
    help="Cast forecast and price to float32 first, as pm_eval does, to reproduce "
    "its figures exactly.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
def score(
    file: Path,
    pred_col: str,
    group_cols: str,
    binning: Binning,
    bins: int | None,
    mode: TradingMode,
    B: float,
    cost: float,
    with_approachability: bool,
    with_repair: bool,
    float32: bool,
    as_json: bool,
) -> None:
    """Score resolved forecasts: Brier, log loss, ECE, Murphy, trading P/L and Kelly, and more
    when the file has the columns for it.

    FILE is CSV or JSON Lines (.csv, .jsonl, optionally .gz) with an outcome column `y` and a
    forecast column (--pred-col). Optional columns: `market_prob` (the trading block: P/L per
    event and a capped-Kelly bankroll run against the price, in file order); `p_true`, the
    true probability on synthetic data (SCE and the bounded trader's profit
    B·E(|p_true − q| − c)₊); forecastbench's `market_prob_target_ts`/`createdAt` (forecast
    time) and `market_event_ts`/`endDate`/`closedTime` (resolution time), unix or ISO, used
    by --approachability (order) and --repair (what is known when). A forecast that is a list
    (JSON array) is a multi-outcome row: `y` is the index of the outcome that happened, scored
    by multi-class Brier (summed over outcomes), log loss and top-label ECE.

    ECE, Murphy, approachability and the post-processor bin right-closed (forecastbench: 0.05
    with 20 bins is in the first bin); the repair map bins by floor(q·bins) as forecastbench
    does; --binning kfish bins ECE and Murphy by floor(p·K), 15 bins, as K-Fish does. `bss`
    is the Brier skill against 0.25, `bss_climatology` K-Fish's against the base rate
    o(1 − o). Arithmetic is float64; --float32 casts the forecast and price to float32 before
    Brier, log loss, ECE and trading, as pm_eval does. With `cohort` / `agent` columns (arena
    export's predictions) the Kelly bettor runs once per cohort and agent, from 1 each, and
    `roi` is the mean: one run over parallel cohorts compounded them into nonsense.

    \b
    Example:
      arena score forecasts.csv --group-cols race --mode linear --cost 0.01
      arena score preds.jsonl.gz --pred-col p --approachability --repair --json
    """
    groups = [col.strip() for col in group_cols.split(",") if col.strip()]
    data = read_forecasts(file, pred_col, groups)
    opts = ScoreOptions(
        BINS[binning] if bins is None else bins,
        mode, B, cost, float32, with_approachability, with_repair, binning,
    )  # fmt: skip
    try:
        report, stats = score_report(data, opts)
    except MetricInputError as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    console = make_console()
    if as_json:
        notes: dict[str, None] = {}
        document = _finite(report, "", notes)
        if notes:
            document["notes"] = [
                f"{where}: not a finite number (an overflow), written as null" for where in notes
            ]
        console.print_json(json.dumps(document, allow_nan=False))
        return
    if stats is not None:
        console.print(_metrics_table(file, report))
        console.print(_reliability_table(stats))
    if "multiclass" in report:
        console.print(_multiclass_table(file, report["multiclass"]))
