"""Scoring metrics for binary (and multi-class) forecasts, in pure numpy and float64.

The formulas follow the forecastbench harness and K-Fish's scoring notes exactly (see
``docs/methodology.md`` §2 and §3); where those sources disagree (bin edges, bin counts,
what "Brier skill" is relative to) the choice is a parameter with the source's default.
Every function validates its inputs and raises :class:`MetricInputError` (a ``LedgerError``)
rather than returning a quietly wrong number.
"""

from ledger.metrics.approachability import Approachability, CellViolation, approachability
from ledger.metrics.binning import BinStats, bin_edges, bin_index, floor_bin_index
from ledger.metrics.calibration import (
    ECE_BINS,
    MURPHY_BINS,
    TOP_LABEL_ECE_BINS,
    GroupBias,
    Murphy,
    ece,
    ece_from_bins,
    group_calibration_bias,
    murphy,
    murphy_from_bins,
    reliability,
    top_label_ece,
)
from ledger.metrics.recalibration import (
    GroupBinPostprocessor,
    GroupBinTable,
    Repair,
    fit_group_bin_postprocessor,
    repair_at_resolution,
)
from ledger.metrics.scores import (
    RANDOM_BRIER,
    BrierReference,
    brier,
    brier_skill_score,
    log_loss,
    multiclass_brier,
    multiclass_log_loss,
    multiclass_sce,
    skill_score,
    squared_calibration_error,
)
from ledger.metrics.trading import (
    KellyResult,
    KellyRuns,
    TradingMode,
    bounded_trader_profit,
    kelly_bankroll,
    kelly_by_run,
    positions,
    realized_trading_pnl,
)
from ledger.metrics.transforms import (
    alr_to_simplex,
    asymmetric_extremize,
    extremize_factor,
    logit_to_prob,
    prob_to_logit,
    simplex_to_alr,
)
from ledger.metrics.validation import MetricInputError

__all__ = [
    "ECE_BINS",
    "MURPHY_BINS",
    "RANDOM_BRIER",
    "TOP_LABEL_ECE_BINS",
    "Approachability",
    "BinStats",
    "BrierReference",
    "CellViolation",
    "GroupBias",
    "GroupBinPostprocessor",
    "GroupBinTable",
    "KellyResult",
    "KellyRuns",
    "MetricInputError",
    "Murphy",
    "Repair",
    "TradingMode",
    "alr_to_simplex",
    "approachability",
    "asymmetric_extremize",
    "bin_edges",
    "bin_index",
    "bounded_trader_profit",
    "brier",
    "brier_skill_score",
    "ece",
    "ece_from_bins",
    "extremize_factor",
    "fit_group_bin_postprocessor",
    "floor_bin_index",
    "group_calibration_bias",
    "kelly_bankroll",
    "kelly_by_run",
    "log_loss",
    "logit_to_prob",
    "multiclass_brier",
    "multiclass_log_loss",
    "multiclass_sce",
    "murphy",
    "murphy_from_bins",
    "positions",
    "prob_to_logit",
    "realized_trading_pnl",
    "reliability",
    "repair_at_resolution",
    "simplex_to_alr",
    "skill_score",
    "squared_calibration_error",
    "top_label_ece",
]
