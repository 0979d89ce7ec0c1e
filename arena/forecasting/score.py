"""What ``arena score`` computes from a forecasts file: forecastbench's ``pm_eval`` and more.

Everything is float64 unless ``float32`` asks for pm_eval's own arithmetic: it casts the
forecast and the market price to float32 *before* Brier, log loss, ECE and trading (not only
before trading), which moves a forecast of 0.05 from ECE bin 0 to bin 1 (float32(0.05) =
0.0500000007) and Brier in the eighth decimal; its group biases, approachability and repair
read the column as float64 and so do ours. The repair map's output is float32 there, and here
under ``float32``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from arena.forecasting.scorefile import Forecasts, MultiRows
from ledger.metrics import (
    TOP_LABEL_ECE_BINS,
    BinStats,
    TradingMode,
    approachability,
    bounded_trader_profit,
    brier,
    brier_skill_score,
    ece,
    ece_from_bins,
    group_calibration_bias,
    kelly_bankroll,
    kelly_by_run,
    log_loss,
    multiclass_brier,
    multiclass_log_loss,
    multiclass_sce,
    murphy,
    realized_trading_pnl,
    reliability,
    repair_at_resolution,
    squared_calibration_error,
)

Binning = Literal["forecastbench", "kfish"]
BINS = {"forecastbench": 20, "kfish": 15}
"""Each convention's bin count: forecastbench's ECE (right-closed linspace edges) and K-Fish's
(``floor(p·K)``)."""


@dataclass(frozen=True)
class ScoreOptions:
    """The command's choices: bins, trading rule, stake, cost, and the optional blocks."""

    bins: int = 20
    mode: TradingMode = "sign"
    B: float = 1.0
    cost: float = 0.0
    float32: bool = False
    approachability: bool = False
    repair: bool = False
    binning: Binning = "forecastbench"


def _float32(values: np.ndarray, on: bool) -> np.ndarray:
    return values.astype(np.float32).astype(np.float64) if on else values


def score_report(data: Forecasts, opts: ScoreOptions) -> tuple[dict[str, Any], BinStats | None]:
    """The report (pm_eval's keys first) and the bins behind ECE and the reliability diagram
    (None when the file has multi-outcome rows only)."""
    report: dict[str, Any] = {}
    stats = None
    if data.y:
        report, stats = _binary(data, opts)
    if data.multi.y:
        report["multiclass"] = _multiclass(data.multi)
    return report, stats


def _binary(data: Forecasts, opts: ScoreOptions) -> tuple[dict[str, Any], BinStats]:
    y = np.array(data.y)
    raw = np.array(data.pred)
    pred = _float32(raw, opts.float32)
    kfish = opts.binning == "kfish"
    stats = reliability(pred, y, opts.bins, right_closed=True, floor=kfish)
    decomposition = murphy(pred, y, opts.bins, right_closed=True, floor=kfish)
    report: dict[str, Any] = {
        "n": len(y),
        "brier": brier(pred, y),
        "logloss": log_loss(pred, y),
        "ece": ece_from_bins(stats),
        "bss": brier_skill_score(pred, y, "random"),
        "bss_climatology": _climatology_skill(pred, y),
        "murphy": {
            "reliability": decomposition.reliability,
            "resolution": decomposition.resolution,
            "uncertainty": decomposition.uncertainty,
        },
    }
    if kfish:
        report["binning"] = {"rule": "kfish: floor(p·K)", "bins": opts.bins}
    market = None
    if data.market is not None:
        market = _float32(np.array(data.market), opts.float32)
        report["trading"] = _trading(pred, market, y, data, opts)
    if data.groups:
        report["groups"] = {}
        for col, labels in data.groups.items():
            bias = group_calibration_bias(raw, y, labels)
            report["groups"][col] = {
                "worst_abs_bias": bias.worst_abs_bias,
                "avg_abs_bias": bias.avg_abs_bias,
                "n_groups": bias.n_groups,
            }
    if data.truth is not None:
        truth = np.array(data.truth)
        report["truth"] = {
            "sce": squared_calibration_error(pred, truth),
            "bounded_trader_profit": bounded_trader_profit(
                truth, pred, B=opts.B, transaction_cost=opts.cost
            ),
        }
    codes, names = _group_codes(data)
    if opts.approachability:
        report["approachability"] = _approachability(data, raw, y, codes, names, opts)
    if opts.repair:
        report["repair"] = _repair(data, raw, y, codes, market, opts)
    return report, stats


def _climatology_skill(pred: np.ndarray, y: np.ndarray) -> float | None:
    """K-Fish's BSS, 1 - Brier / o(1 - o) with o the base rate; None when every outcome is
    the same, where the reference Brier is 0 and the ratio says nothing."""
    base_rate = float(np.mean(y))
    if base_rate in (0.0, 1.0):
        return None
    return brier_skill_score(pred, y, "climatology")


def _trading(
    pred: np.ndarray, market: np.ndarray, y: np.ndarray, data: Forecasts, opts: ScoreOptions
) -> dict[str, Any]:
    return {
        "mode": opts.mode,
        "B": opts.B,
        "transaction_cost": opts.cost,
        "pnl_per_event": realized_trading_pnl(
            pred, market, y, B=opts.B, transaction_cost=opts.cost, mode=opts.mode
        ),
        "kelly": _kelly(pred, market, y, data, opts),
    }


def _kelly(
    pred: np.ndarray, market: np.ndarray, y: np.ndarray, data: Forecasts, opts: ScoreOptions
) -> dict[str, Any]:
    """pm_eval's one run over the file; a run per bettor when the file names them (its
    ``cohort`` / ``agent`` columns), with the mean return over the runs as ``roi``."""
    if data.runs is None:
        kelly = kelly_bankroll(pred, market, y, fee=opts.cost)
        return {"n": kelly.n, "roi": kelly.roi, "final_bankroll": kelly.final_bankroll}
    runs = kelly_by_run(pred, market, y, np.array(data.runs), fee=opts.cost)
    return {
        "n": runs.n,
        "roi": runs.mean_roi,
        "final_bankroll": 1.0 + runs.mean_roi,
        "runs": len(runs.rois),
        "by": list(data.run_cols),
        "roi_min": float(runs.rois.min()),
        "roi_max": float(runs.rois.max()),
    }


def _group_codes(data: Forecasts) -> tuple[np.ndarray, list[str]]:
    """One code per row for the combination of its --group-cols values ("|"-joined, codes in
    sorted order as pandas' factorize(sort=True)); one group when there are none."""
    if not data.groups:
        return np.zeros(len(data.y), dtype=np.intp), ["(all)"]
    keys = ["|".join(values) for values in zip(*data.groups.values(), strict=True)]
    names, codes = np.unique(np.array(keys), return_inverse=True)
    return codes.astype(np.intp), [str(name) for name in names]


def _forecast_order(data: Forecasts) -> np.ndarray:
    """Rows by forecast instant (stable; rows without one last), else in file order."""
    assert data.forecast_ts is not None
    if data.time_cols[0] is None:
        return np.arange(len(data.y))
    return np.argsort(np.nan_to_num(np.array(data.forecast_ts), nan=np.inf), kind="stable")


def _approachability(
    data: Forecasts,
    pred: np.ndarray,
    y: np.ndarray,
    codes: np.ndarray,
    names: list[str],
    opts: ScoreOptions,
) -> dict[str, Any]:
    order = _forecast_order(data)
    eps = opts.cost / opts.B if opts.B > 0 else 0.0
    result = approachability(pred[order], y[order], codes[order], bins=opts.bins, eps=eps)
    return {
        "app_err": result.app_err,
        "eps": eps,
        "bins": opts.bins,
        "n_cells": result.n_cells,
        "order": data.time_cols[0] or "file order",
        "curve": {"t": result.curve_t, "app_err": result.curve_err},
        "top": [
            {
                "group": names[cell.group],
                "bin": cell.bin,
                "bin_lo": cell.bin / opts.bins,
                "bin_hi": (cell.bin + 1) / opts.bins,
                "mean_payoff": cell.mean_payoff,
                "violation": cell.violation,
            }
            for cell in result.top
        ],
    }


def _repair(
    data: Forecasts,
    pred: np.ndarray,
    y: np.ndarray,
    codes: np.ndarray,
    market: np.ndarray | None,
    opts: ScoreOptions,
) -> dict[str, Any]:
    assert data.forecast_ts is not None and data.resolve_ts is not None
    made_col, known_col = data.time_cols
    made = np.array(data.forecast_ts) if made_col else np.arange(len(y), dtype=np.float64)
    known = np.array(data.resolve_ts) if known_col else np.full(len(y), np.inf)
    repair = repair_at_resolution(pred, y, codes, made, known, bins=opts.bins)
    repaired = _float32(repair.p, opts.float32)
    block: dict[str, Any] = {
        "forecast_time": made_col or "row order",
        "resolve_time": known_col or "never",
        "n_updates": repair.n_updates,
        "brier": brier(repaired, y),
        "logloss": log_loss(repaired, y),
        "ece": ece(repaired, y, opts.bins),
    }
    if market is not None:
        block["pnl_per_event"] = realized_trading_pnl(
            repaired, market, y, B=opts.B, transaction_cost=opts.cost, mode=opts.mode
        )
    return block


def _multiclass(multi: MultiRows) -> dict[str, Any]:
    """Rows of each outcome count are scored together and the means combined by row count;
    the top-label ECE (15 bins) pools every row's confidence and hit."""
    by_size: dict[int, list[int]] = {}
    for i, vector in enumerate(multi.pred):
        by_size.setdefault(len(vector), []).append(i)
    n = len(multi.y)
    totals = {"brier": 0.0, "logloss": 0.0, "sce": 0.0}
    confidence, hit = [], []
    for rows in by_size.values():
        q = np.array([multi.pred[i] for i in rows])
        y = np.array([multi.y[i] for i in rows])
        totals["brier"] += multiclass_brier(q, y) * len(rows)
        totals["logloss"] += multiclass_log_loss(q, y) * len(rows)
        if multi.truth is not None:
            truth = np.array([multi.truth[i] for i in rows])
            totals["sce"] += multiclass_sce(q, truth) * len(rows)
        confidence += list(q.max(axis=1))
        hit += list((q.argmax(axis=1) == y).astype(float))
    block: dict[str, Any] = {
        "n": n,
        "brier": totals["brier"] / n,
        "logloss": totals["logloss"] / n,
        "top_label_ece": ece(confidence, hit, TOP_LABEL_ECE_BINS),
    }
    if multi.truth is not None:
        block["sce"] = totals["sce"] / n
    return block
