"""Blackwell approachability of calibration over group x bin cells (methodology §2.4).

Each forecast is one round of a vector game: the payoff is y - q on the coordinate of its
(group, bin) cell and 0 elsewhere. A forecaster calibrated on every cell drives the running mean
payoff vector into the box [-eps, eps]^M; ``AppErr_t`` is how far (in the sup norm) that mean
still is from the box after t rounds. Unlike ECE it is read as a curve: whether the error shrinks
as forecasts accumulate in time order, which is what an online forecaster can promise.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ledger.metrics.binning import bin_index
from ledger.metrics.calibration import ECE_BINS
from ledger.metrics.validation import (
    as_group_codes,
    as_outcomes,
    as_probabilities,
    check_non_negative,
    check_positive_int,
    same_length,
)

CURVE_EVERY = 10
APPROACHABILITY_CLIP = 1e-6
TOP_CELLS = 10


@dataclass(frozen=True)
class CellViolation:
    """A cell whose mean payoff lies outside the box: group code, bin, mean, excess."""

    group: int
    bin: int
    mean_payoff: float
    violation: float


@dataclass(frozen=True)
class Approachability:
    """``app_err`` after the last round; the curve at every ``every``-th round and the last;
    the worst cells at the end (largest violation first)."""

    app_err: float
    curve_t: list[int]
    curve_err: list[float]
    n_cells: int
    top: list[CellViolation]


def approachability(
    q: ArrayLike,
    y: ArrayLike,
    groups: ArrayLike,
    *,
    bins: int = ECE_BINS,
    eps: float = 0.0,
    every: int = CURVE_EVERY,
    clip: float = APPROACHABILITY_CLIP,
) -> Approachability:
    """AppErr of forecasts ``q`` (already in time order) against ``y``, on cells
    (group code from 0, right-closed bin of q clipped to [clip, 1 - clip]) as forecastbench's
    ``evaluate_group_bin_approachability``: the payoff y - q uses the clipped q, and the mean
    divides by the number of rounds so far, not by the cell's count."""
    check_positive_int("bins", bins)
    check_positive_int("every", every)
    check_non_negative("eps", eps)
    probs, labels = as_probabilities("q", q), as_outcomes("y", y)
    codes = as_group_codes("groups", groups)
    same_length(q=probs, y=labels, groups=codes)
    probs = np.clip(probs, clip, 1.0 - clip)
    n_cells = (int(codes.max()) + 1) * bins
    cell = codes.astype(np.intp) * bins + bin_index(probs, bins, right_closed=True)
    touched, slot = np.unique(cell, return_inverse=True)
    payoff = labels - probs
    total = np.zeros(len(touched))
    largest = _LargestAbs(total)
    curve_t: list[int] = []
    curve_err: list[float] = []
    n = len(probs)
    for start in range(0, n, every):
        stop = min(start + every, n)
        np.add.at(total, slot[start:stop], payoff[start:stop])
        largest.update(slot[start:stop])
        curve_t.append(stop)
        curve_err.append(max(largest.value() / stop - eps, 0.0))
    mean = total / n
    excess = np.maximum(np.abs(mean) - eps, 0.0)
    worst = [i for i in np.argsort(-excess, kind="stable")[:TOP_CELLS] if excess[i] > 0]
    top = [
        CellViolation(
            int(touched[i]) // bins, int(touched[i]) % bins, float(mean[i]), float(excess[i])
        )
        for i in worst
    ]
    return Approachability(curve_err[-1], curve_t, curve_err, n_cells, top)


class _LargestAbs:
    """max_i |total_i| of an array whose entries change a few at a time, kept in a heap with
    stale entries dropped when they surface: O(log n) per change, where scanning every cell at
    every curve point was O(cells) (a million groups took minutes). The distance to the box is
    max(max|total| / t - eps, 0), the same float as max over cells of (|total_i| / t - eps)+,
    since dividing by t and subtracting eps keep the order of the values."""

    def __init__(self, total: NDArray[np.float64]) -> None:
        self.total = total
        self.heap: list[tuple[float, int]] = []

    def update(self, changed: NDArray[np.intp]) -> None:
        for j in set(changed.tolist()):
            heapq.heappush(self.heap, (-abs(float(self.total[j])), j))

    def value(self) -> float:
        while self.heap and -self.heap[0][0] != abs(float(self.total[self.heap[0][1]])):
            heapq.heappop(self.heap)
        return -self.heap[0][0] if self.heap else 0.0
