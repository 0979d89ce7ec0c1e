"""The metrics every lab model is reported with, from ``ledger.metrics`` (methodology §2.1–2.3)."""

from __future__ import annotations

import numpy as np

from ledger.metrics import (
    TOP_LABEL_ECE_BINS,
    bounded_trader_profit,
    brier,
    ece,
    log_loss,
    multiclass_brier,
    multiclass_log_loss,
    multiclass_sce,
    squared_calibration_error,
    top_label_ece,
)


def binary_scores(
    q: np.ndarray, p_true: np.ndarray, y: np.ndarray, *, bins: int, B: float, cost: float
) -> dict[str, float]:
    """Brier and log loss against the outcomes; SCE and the bounded trader's profit
    B·E[(|f − q| − c)₊] against the truth; ECE in ``bins`` right-closed bins."""
    return {
        "brier": brier(q, y),
        "logloss": log_loss(q, y),
        "sce": squared_calibration_error(q, p_true),
        "ece": ece(q, y, bins),
        "arb": bounded_trader_profit(p_true, q, B=B, transaction_cost=cost),
    }


def multiclass_scores(q: np.ndarray, p_true: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """difftrain_simplex's metrics: ‖q − e_y‖², −ln q_y, ‖q − p‖², top-label ECE (15 bins)."""
    return {
        "brier": multiclass_brier(q, y),
        "logloss": multiclass_log_loss(q, y),
        "sce": multiclass_sce(q, p_true),
        "ece": top_label_ece(q, y, TOP_LABEL_ECE_BINS),
    }
