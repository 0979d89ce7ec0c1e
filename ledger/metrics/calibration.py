"""Calibration diagnostics: ECE, the Murphy decomposition of Brier, and group bias.

ECE defaults follow forecastbench (20 right-closed bins, methodology §2.2); the Murphy defaults
follow the K-Fish suggestion (10 left-closed bins, last bin closed, methodology §3.1). Both take
the bin count and convention as parameters so a caller can line them up with either source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ledger.metrics.binning import BinStats, calibration_bins
from ledger.metrics.validation import (
    FloatArray,
    MetricInputError,
    as_outcomes,
    as_probabilities,
    as_probability_matrix,
    as_vector,
    same_length,
)

ECE_BINS = 20
TOP_LABEL_ECE_BINS = 15
"""difftrain_simplex's bins for the top-label ECE (methodology §2.1)."""
MURPHY_BINS = 10


def _validated(p: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    probs, labels = as_probabilities("p", p), as_outcomes("y", y)
    same_length(p=probs, y=labels)
    return probs, labels


def reliability(
    p: ArrayLike,
    y: ArrayLike,
    bins: int = ECE_BINS,
    *,
    right_closed: bool = True,
    floor: bool = False,
) -> BinStats:
    """Per-bin mean forecast against observed frequency: the data of a reliability diagram
    (``floor``: K-Fish's bins, ``floor(p·bins)``)."""
    probs, labels = _validated(p, y)
    return calibration_bins(probs, labels, bins, right_closed=right_closed, floor=floor)


def ece_from_bins(stats: BinStats) -> float:
    """Sum over non-empty bins of (n_b/n)|ybar_b - qbar_b|."""
    keep = stats.nonempty
    gap = np.abs(stats.observed[keep] - stats.mean_forecast[keep])
    return float(np.sum(stats.count[keep] * gap) / stats.n)


def ece(p: ArrayLike, y: ArrayLike, bins: int = ECE_BINS, *, right_closed: bool = True) -> float:
    """Expected calibration error, equal-width bins (forecastbench default: 20, right-closed)."""
    return ece_from_bins(reliability(p, y, bins, right_closed=right_closed))


def top_label_ece(q: ArrayLike, y: ArrayLike, bins: int = TOP_LABEL_ECE_BINS) -> float:
    """Multi-class ECE on the top label: each row's largest probability (its confidence)
    against whether that class happened, in right-closed bins as the binary ECE. A first
    maximum wins a tie, as ``argmax`` does."""
    probs = as_probability_matrix("q", q)
    labels = as_vector("y", y)
    same_length(q=probs, y=labels)
    top = np.argmax(probs, axis=1)
    hit = (top == labels).astype(np.float64)
    return ece_from_bins(calibration_bins(probs.max(axis=1), hit, bins, right_closed=True))


@dataclass(frozen=True)
class Murphy:
    """Murphy (1973) decomposition of the Brier score.

    ``brier`` is the true mean squared error, kept apart from ``reconstructed`` = REL - RES + UNC
    because the two agree only when forecasts are constant within each bin (the legacy K-Fish
    engine returned the reconstruction as "brier"; methodology §3.1).
    """

    reliability: float
    resolution: float
    uncertainty: float
    brier: float

    @property
    def reconstructed(self) -> float:
        return self.reliability - self.resolution + self.uncertainty


def murphy_from_bins(stats: BinStats, brier_score: float) -> Murphy:
    """REL, RES and UNC from per-bin sums; shared so numpy and SQL differ only in the binning."""
    keep = stats.nonempty
    n = stats.n
    count = stats.count[keep]
    base_rate = float(np.sum(stats.sum_outcome) / n)
    observed = stats.observed[keep]
    return Murphy(
        reliability=float(np.sum(count * (stats.mean_forecast[keep] - observed) ** 2) / n),
        resolution=float(np.sum(count * (observed - base_rate) ** 2) / n),
        uncertainty=base_rate * (1.0 - base_rate),
        brier=brier_score,
    )


def murphy(
    p: ArrayLike,
    y: ArrayLike,
    bins: int = MURPHY_BINS,
    *,
    right_closed: bool = False,
    floor: bool = False,
) -> Murphy:
    """Reliability, resolution and uncertainty of ``p`` against ``y``, plus the true Brier."""
    probs, labels = _validated(p, y)
    stats = calibration_bins(probs, labels, bins, right_closed=right_closed, floor=floor)
    return murphy_from_bins(stats, float(np.mean((probs - labels) ** 2)))


@dataclass(frozen=True)
class GroupBias:
    """How far the mean residual y - p strays from 0 within groups (methodology §2.4)."""

    worst_abs_bias: float
    avg_abs_bias: float
    n_groups: int


def group_calibration_bias(p: ArrayLike, y: ArrayLike, groups: ArrayLike) -> GroupBias:
    """Worst and size-weighted average |mean(y - p)| over the distinct values of ``groups``.

    Overall calibration can hide a forecaster that is too high on senate races and too low on
    governor races; this is the cheap check for that, by any column the caller can group on.
    """
    probs, labels = _validated(p, y)
    keys = np.asarray(groups)
    if keys.ndim != 1 or len(keys) != len(probs):
        raise MetricInputError(f"groups: expected {len(probs)} labels, got shape {keys.shape}")
    _, inverse = np.unique(keys, return_inverse=True)
    count = np.bincount(inverse)
    mean_residual = np.bincount(inverse, weights=labels - probs) / count
    abs_bias = np.abs(mean_residual)
    return GroupBias(
        worst_abs_bias=float(abs_bias.max()),
        avg_abs_bias=float(np.sum(count * abs_bias) / len(probs)),
        n_groups=len(count),
    )
