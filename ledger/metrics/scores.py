"""Proper scoring rules (methodology §2.1, §3.1): lower is better, computed in float64."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ledger.metrics.validation import (
    MetricInputError,
    as_outcomes,
    as_probabilities,
    as_probability_matrix,
    as_vector,
    same_length,
)

LOG_LOSS_EPS = 1e-6
MULTICLASS_LOG_LOSS_EPS = 1e-9
RANDOM_BRIER = 0.25  # the Brier score of always saying 0.5

BrierReference = Literal["random", "climatology"]


def brier(p: ArrayLike, y: ArrayLike) -> float:
    """Mean (p - y)^2; no clipping, so a confident miss costs the full 1."""
    probs, labels = as_probabilities("p", p), as_outcomes("y", y)
    same_length(p=probs, y=labels)
    return float(np.mean((probs - labels) ** 2))


def log_loss(p: ArrayLike, y: ArrayLike, eps: float = LOG_LOSS_EPS) -> float:
    """Mean -[y ln p + (1-y) ln(1-p)], with p clipped to [eps, 1-eps] as forecastbench does,
    so one forecast of exactly 0 or 1 costs ln(1/eps) ~ 13.8 rather than infinity."""
    probs, labels = as_probabilities("p", p), as_outcomes("y", y)
    same_length(p=probs, y=labels)
    clipped = np.clip(probs, eps, 1.0 - eps)
    return float(np.mean(-(labels * np.log(clipped) + (1.0 - labels) * np.log(1.0 - clipped))))


def squared_calibration_error(q: ArrayLike, p_true: ArrayLike) -> float:
    """Mean (q - p_true)^2: the Brier regret, observable only where the truth is known
    (synthetic benchmarks), which is why it takes probabilities rather than labels."""
    forecasts, truth = as_probabilities("q", q), as_probabilities("p_true", p_true)
    same_length(q=forecasts, p_true=truth)
    return float(np.mean((forecasts - truth) ** 2))


def _class_labels(y: ArrayLike, n: int, classes: int) -> NDArray[np.intp]:
    labels = as_vector("y", y)
    if len(labels) != n:
        raise MetricInputError(f"inputs differ in length: q={n}, y={len(labels)}")
    bad = np.flatnonzero((labels != np.round(labels)) | (labels < 0) | (labels >= classes))
    if bad.size:
        raise MetricInputError(f"y[{bad[0]}] is {labels[bad[0]]}, not a class in 0..{classes - 1}")
    return labels.astype(np.intp)


def multiclass_brier(q: ArrayLike, y: ArrayLike) -> float:
    """Mean ||q - e_y||^2, summed over classes and deliberately NOT divided by the class count
    (forecastbench's convention; Prophet Arena divides by k, methodology §4)."""
    probs = as_probability_matrix("q", q)
    labels = _class_labels(y, probs.shape[0], probs.shape[1])
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(labels)), labels] = 1.0
    return float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))


def multiclass_log_loss(q: ArrayLike, y: ArrayLike, eps: float = MULTICLASS_LOG_LOSS_EPS) -> float:
    """Mean -ln q_y after clipping to [eps, 1] and renormalising each row, so rows that do not
    quite sum to 1 are scored as the distribution they imply."""
    probs = as_probability_matrix("q", q)
    labels = _class_labels(y, probs.shape[0], probs.shape[1])
    clipped = np.clip(probs, eps, 1.0)
    clipped = clipped / clipped.sum(axis=1, keepdims=True)
    return float(np.mean(-np.log(clipped[np.arange(len(labels)), labels])))


def multiclass_sce(q: ArrayLike, p_true: ArrayLike) -> float:
    """Mean ||q - p_true||^2 over rows: the vector SCE (the multi-class Brier regret), known
    only where the true distribution is, as in the simplex parity benchmark."""
    forecasts, truth = as_probability_matrix("q", q), as_probability_matrix("p_true", p_true)
    if forecasts.shape != truth.shape:
        raise MetricInputError(f"q and p_true differ in shape: {forecasts.shape}, {truth.shape}")
    return float(np.mean(np.sum((forecasts - truth) ** 2, axis=1)))


def skill_score(score: float, reference: float) -> float:
    """1 - score/reference; 0.0 when the reference is perfect (0), as K-Fish guards UNC = 0,
    because no forecast can beat a perfect reference and a division by zero helps no one."""
    return 0.0 if reference == 0.0 else 1.0 - score / reference


def brier_skill_score(
    p: ArrayLike, y: ArrayLike, reference: BrierReference | ArrayLike = "random"
) -> float:
    """1 - B / B_ref. ``reference`` is "random" (B_ref = 0.25, the constant-0.5 forecast),
    "climatology" (B_ref = o(1-o), the base rate forecast in hindsight; K-Fish's BSS), or an
    array of reference forecasts such as market prices (B_ref = their Brier: "vs the crowd")."""
    score = brier(p, y)
    if isinstance(reference, str):
        if reference == "random":
            return skill_score(score, RANDOM_BRIER)
        if reference == "climatology":
            base_rate = float(np.mean(as_outcomes("y", y)))
            return skill_score(score, base_rate * (1.0 - base_rate))
        raise MetricInputError(
            f"reference must be 'random', 'climatology' or forecasts, got {reference!r}"
        )
    return skill_score(score, brier(reference, y))
