"""``arena diffusion``: train the market diffusion model on a tape's resolved markets, and
evaluate it on the markets held out after its cut-off, next to the market price."""

from __future__ import annotations

# isort: off
import arena.forecasting.lab  # noqa: F401  (one BLAS thread, set before numpy loads: see arena.forecasting.lab)

# isort: on
import json
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from arena.console import make_console
from arena.forecasting.diffusion_data import HeldOut, held_out, resolved_paths
from arena.forecasting.score import ScoreOptions, score_report
from arena.forecasting.scorefile import Forecasts, MultiRows
from replays.instants import parse_instant
from replays.samples import tape_file
from replays.tapefile import load_tape
from strategies.diffusion import DiffusionConfig, T
from strategies.market_diffusion.examples import PER_MARKET, training_set
from strategies.market_diffusion.model import MARKET_DEFAULTS, MarketModel

D = MARKET_DEFAULTS
SHOWN = ("n", "brier", "logloss", "ece", "bss")


@click.group()
def diffusion() -> None:
    """The market diffusion forecaster: train it on resolved markets, evaluate it on later ones.

    \b
    Examples:
      arena diffusion train --tape btc.tape --before 2025-12-20 --out model.npz
      arena diffusion eval --model model.npz --tape btc.tape
      arena replay --tape btc.tape --agent 'sign?forecaster=diffusion:model.npz' ...
    """


def _when(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


@diffusion.command()
@click.option("--tape", "tape_path", type=click.Path(path_type=Path), required=True,
              help="Tape whose resolved markets to learn from, or 'sample'.")  # fmt: skip
@click.option("--before", default=None, metavar="INSTANT",
              help="Learn only from markets resolved strictly before this instant "
              "(default: every resolved market).")  # fmt: skip
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="Where to write the model (.npz).")  # fmt: skip
@click.option("--per-market", type=click.IntRange(1, 1000), default=PER_MARKET, show_default=True,
              help="Rows per market, at instants spread over its life.")  # fmt: skip
@click.option("--hidden", type=click.IntRange(1), default=D.hidden, show_default=True,
              help="Width of the denoiser MLP (forecastbench: 256).")  # fmt: skip
@click.option("--depth", type=click.IntRange(1), default=D.depth, show_default=True,
              help="Layers of the denoiser MLP.")  # fmt: skip
@click.option("--steps", type=click.IntRange(1), default=D.steps, show_default=True,
              help="Training steps.")  # fmt: skip
@click.option("--batch", type=click.IntRange(1), default=D.batch, show_default=True,
              help="Rows per training step.")  # fmt: skip
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=D.lr,
              show_default=True, help="AdamW learning rate.")  # fmt: skip
@click.option("--sample-steps", type=click.IntRange(2, T), default=D.sample_steps,
              show_default=True, help="DDIM steps when it forecasts (of T = 64).")  # fmt: skip
@click.option("--mc", type=click.IntRange(1), default=D.mc, show_default=True,
              help="Sampler runs per forecast: for a binary market, the boundary is found to the "
                   "precision of this many bisection steps over [-6, 6].")  # fmt: skip
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the initial weights and every training draw.")  # fmt: skip
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def train(
    tape_path: Path,
    before: str | None,
    out: Path,
    per_market: int,
    seed: int,
    quiet: bool,
    as_json: bool,
    **config: Any,
) -> None:
    """Train the market diffusion model on the resolved markets of a tape.

    Each market gives rows at instants spread from its first price to its last before it
    resolved, conditioned on what was knowable then (price, its recent changes and volatility,
    time to the scheduled end, volume, category, question words) and labelled with its outcome.
    The model records the latest resolution it learned from: it forecasts only after it.

    \b
    Example:
      arena diffusion train --tape btc.tape --before 2025-12-20 --out model.npz
    """
    tape = load_tape(tape_file(tape_path))
    cutoff = 2**62 if before is None else int(parse_instant(before).timestamp())
    data = training_set(resolved_paths(tape), cutoff, per_market)
    if not data.conditions:
        raise click.ClickException(
            f"{tape_path}: no market with a price path resolved"
            + ("" if before is None else f" before {before}")
        )
    cfg = DiffusionConfig(**config)
    started = time.process_time()
    silent = quiet or as_json
    model = MarketModel.fit(data, cfg, seed) if silent else _fit_with_bar(data, cfg, seed)
    cpu = time.process_time() - started
    model.save(out)
    s = model.summary
    figures = {
        "out": str(out),
        "markets": {str(m): v for m, v in s.markets.items()},
        "rows": {str(m): v for m, v in s.rows.items()},
        "final_loss": {str(m): v for m, v in s.final_loss.items()},
        "trained_through": s.trained_through,
        "cpu_seconds": cpu,
    }
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    table = Table(title=f"trained {out}", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("model", s.line())
    table.add_row("learned from markets resolved up to", _when(s.trained_through))
    table.add_row("training CPU time", f"{cpu:.1f} s")
    make_console().print(table)


def _fit_with_bar(data: Any, cfg: DiffusionConfig, seed: int) -> MarketModel:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("loss {task.fields[loss]}"),
    )
    with RichProgress(*columns, console=make_console(stderr=True), transient=True) as bar:
        tasks = {
            m: bar.add_task(
                f"{'binary' if m == 2 else f'{m}-outcome'} ({data.markets[m]} markets)",
                total=cfg.steps,
                loss="…",
            )
            for m in sorted(data.conditions)
        }

        def progress(m: int, step: int, loss: float) -> None:
            if step % 10 == 0 or step == cfg.steps:
                bar.update(tasks[m], completed=step, loss=f"{loss:.4f}")

        return MarketModel.fit(data, cfg, seed, progress)


@diffusion.command(name="eval")
@click.option("--model", "model_path", type=click.Path(path_type=Path), required=True,
              help="A model 'arena diffusion train' wrote.")  # fmt: skip
@click.option("--tape", "tape_path", type=click.Path(path_type=Path), required=True,
              help="Tape with markets that resolved after the model's cut-off, or "
              "'sample'.")  # fmt: skip
@click.option("--per-market", type=click.IntRange(1, 1000), default=PER_MARKET, show_default=True,
              help="Rows per held-out market, spread over its life after the cut-off.")  # fmt: skip
@click.option("--bins", type=click.IntRange(1), default=20, show_default=True,
              help="ECE bins (equal width, right-closed).")  # fmt: skip
@click.option("--predictions", type=click.Path(path_type=Path), default=None,
              help="Also write the rows as a CSV that 'arena score' reads.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def evaluate(
    model_path: Path,
    tape_path: Path,
    per_market: int,
    bins: int,
    predictions: Path | None,
    as_json: bool,
) -> None:
    """Score the model on markets held out after its cut-off, next to the market price.

    A market is held out if it resolved after every market the model learned from, and it is
    seen only at instants after that cut-off. Both forecasts get arena score's metrics; the
    verdict says whether the model's Brier beats the price's, with a standard error over
    markets (a market's rows are not independent of one another).

    \b
    Example:
      arena diffusion eval --model model.npz --tape btc.tape --json
    """
    model = MarketModel.load(model_path)
    tape = load_tape(tape_file(tape_path))
    rows = held_out(model, tape, per_market)
    if not rows.y and not rows.multi_y:
        raise click.ClickException(
            f"{tape_path}: no market resolved after the model's cut-off "
            f"({_when(model.summary.trained_through)}): nothing is held out"
        )
    opts = ScoreOptions(bins=bins)
    report = {
        "model": model.summary.line(),
        "trained_through": model.summary.trained_through,
        "held_out_markets": rows.markets,
        "diffusion": _scores(rows, rows.pred, rows.multi_pred, opts, with_market=True),
        "market_price": _scores(rows, rows.market, rows.multi_market, opts, with_market=False),
    }
    if rows.y:
        report["verdict"] = _verdict(rows)
    if predictions is not None:
        _write_predictions(predictions, rows)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    _print(report)


def _scores(
    rows: HeldOut,
    pred: list[float],
    multi: list[list[float]],
    opts: ScoreOptions,
    with_market: bool,
) -> dict[str, Any]:
    data = Forecasts(
        y=rows.y,
        pred=pred,
        market=rows.market if with_market and rows.y else None,
        groups={"category": rows.categories} if rows.y else {},
        multi=MultiRows(pred=multi, y=rows.multi_y),
    )
    report, _ = score_report(data, opts)
    return report


def _verdict(rows: HeldOut) -> dict[str, Any]:
    """Brier(model) − Brier(price) per market, averaged over markets, with its standard error."""
    p, q, y = np.array(rows.pred), np.array(rows.market), np.array(rows.y)
    gain = (p - y) ** 2 - (q - y) ** 2
    ids = np.array(rows.ids)
    per_market = np.array([gain[ids == m].mean() for m in dict.fromkeys(rows.ids)])
    mean = float(per_market.mean())
    se = float(per_market.std(ddof=1) / np.sqrt(per_market.size)) if per_market.size > 1 else 0.0
    return {
        "brier_difference": mean,
        "standard_error": se,
        "markets": int(per_market.size),
        "beats_market": mean < 0,
        "significant": abs(mean) > 2 * se,
    }


def _write_predictions(path: Path, rows: HeldOut) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write("market_id,market_prob_target_ts,category,y,pred_prob,market_prob\n")
        for values in zip(
            rows.ids, rows.instants, rows.categories, rows.y, rows.pred, rows.market, strict=True
        ):
            market, ts, category, y, pred, price = values
            handle.write(f"{market},{ts},{json.dumps(category)},{int(y)},{pred!r},{price!r}\n")


def _print(report: dict[str, Any]) -> None:
    console = make_console()
    console.print(f"[bold]model[/] {report['model']}")
    console.print(
        f"held out: {report['held_out_markets']} markets resolved after "
        f"{_when(report['trained_through'])}, seen only after it"
    )
    model, market = report["diffusion"], report["market_price"]
    if "brier" in model:
        table = Table(title="binary markets (forecast vs outcome)", title_justify="left")
        table.add_column("metric", style="bold")
        table.add_column("diffusion", justify="right")
        table.add_column("market price", justify="right")
        for key in SHOWN:
            table.add_row(key, _number(model[key]), _number(market[key]))
        trading = model["trading"]
        table.add_row("sign P/L per row vs the price", _number(trading["pnl_per_event"]), "0")
        table.add_row("Kelly ROI vs the price", f"{trading['kelly']['roi']:+.2%}", "0")
        console.print(table)
        v = report["verdict"]
        word = "beats" if v["beats_market"] else "does not beat"
        note = "" if v["significant"] else " (within two standard errors: no clear difference)"
        console.print(
            f"diffusion {word} the market price on held-out Brier: difference "
            f"{v['brier_difference']:+.5f} ± {v['standard_error']:.5f} per market over "
            f"{v['markets']} markets{note}"
        )
    if "multiclass" in model:
        table = Table(title="multi-outcome markets", title_justify="left")
        table.add_column("metric", style="bold")
        table.add_column("diffusion", justify="right")
        table.add_column("market price", justify="right")
        for key, value in model["multiclass"].items():
            table.add_row(key, _number(value), _number(market["multiclass"][key]))
        console.print(table)


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:.5f}"
