"""Group x bin recalibration tables: forecastbench's post-processor and its online repair map.

Both keep, per (group, bin of q) cell and per bin over all groups, how many outcomes were seen
and how many were YES, and forecast the smoothed frequency (sum + k·centre)/(count + k), where
centre is the bin's midpoint: with few outcomes the forecast stays near the bin it came from
(an "identity" prior), with many it becomes the observed frequency. A cell never seen falls back
to its bin over all groups, and a bin never seen to q itself (methodology §2.4, §2.5).

The two differ in how they bin, and the difference is forecastbench's, kept on purpose: the
intrinsic-post post-processor bins right-closed like the ECE (q clipped to [1e-4, 1 - 1e-4]),
the repair map by floor(q·bins) (left-closed; q clipped to [1e-6, 1 - 1e-6]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ledger.metrics.binning import bin_index, floor_bin_index
from ledger.metrics.calibration import ECE_BINS
from ledger.metrics.validation import (
    FloatArray,
    as_group_codes,
    as_outcomes,
    as_probabilities,
    as_vector,
    check_non_negative,
    check_positive_int,
    same_length,
)

PRIOR_STRENGTH = 5.0
POST_CLIP = 1e-4
REPAIR_CLIP = 1e-6


class GroupBinTable:
    """Counts and YES-sums per (group, bin) cell and per bin, and the smoothed forecast."""

    def __init__(self, groups: int, bins: int, prior_strength: float = PRIOR_STRENGTH) -> None:
        check_positive_int("groups", groups)
        check_positive_int("bins", bins)
        check_non_negative("prior_strength", prior_strength)
        self.bins = bins
        self.prior_strength = prior_strength
        self.count = np.zeros((groups, bins))
        self.total = np.zeros((groups, bins))
        self.global_count = np.zeros(bins)
        self.global_total = np.zeros(bins)

    def add(self, group: NDArray[np.intp], bin_: NDArray[np.intp], y: FloatArray) -> None:
        """Record outcomes ``y`` in their cells."""
        cell = group * self.bins + bin_  # 1-D: numpy's fast path, a tuple index is ~10x slower
        np.add.at(self.count.reshape(-1), cell, 1.0)
        np.add.at(self.total.reshape(-1), cell, y)
        np.add.at(self.global_count, bin_, 1.0)
        np.add.at(self.global_total, bin_, y)

    def predict(
        self,
        group: NDArray[np.intp],
        bin_: NDArray[np.intp],
        q: FloatArray,
        *,
        float32_means: bool = False,
    ) -> FloatArray:
        """The smoothed frequency of each forecast's cell, else of its bin, else q.

        ``float32_means``: forecastbench's intrinsic-post table keeps each cell's mean as
        float32 and multiplies it back by the count, so a cell of 9 YES in 10 holds
        0.9 -> 0.899999976 and its sum is 8.99999976, not 9: computed this way, a forecast
        the formula puts exactly on an ECE edge can land a bin lower, as in the original."""
        k = self.prior_strength
        centre = (bin_ + 0.5) / self.bins
        count, total = self.count[group, bin_], self.total[group, bin_]
        own = count > 0
        count = np.where(own, count, self.global_count[bin_])
        total = np.where(own, total, self.global_total[bin_])
        seen = count > 0
        if float32_means:
            mean = np.divide(total, count, out=np.zeros_like(total), where=seen)
            total = mean.astype(np.float32).astype(np.float64) * count
        out = np.array(q, dtype=np.float64)
        out[seen] = (total[seen] + k * centre[seen]) / (count[seen] + k)
        return out


def fit_group_bin_postprocessor(
    q: ArrayLike,
    y: ArrayLike,
    groups: ArrayLike,
    n_groups: int,
    *,
    bins: int = ECE_BINS,
    prior_strength: float = PRIOR_STRENGTH,
    clip: float = POST_CLIP,
    float32: bool = False,
) -> GroupBinPostprocessor:
    """intrinsic_post's post-processor, fitted on a training split (group codes 0..n_groups-1);
    ``float32``: its table's means and its output are float32, as the original's."""
    probs, labels = as_probabilities("q", q), as_outcomes("y", y)
    codes = as_group_codes("groups", groups, n_groups)
    same_length(q=probs, y=labels, groups=codes)
    table = GroupBinTable(n_groups, bins, prior_strength)
    table.add(codes, bin_index(np.clip(probs, clip, 1.0 - clip), bins), labels)
    return GroupBinPostprocessor(table, clip, float32)


@dataclass(frozen=True)
class GroupBinPostprocessor:
    """A fitted post-processor: ``apply`` maps new forecasts through the table."""

    table: GroupBinTable
    clip: float
    float32: bool = False

    def apply(self, q: ArrayLike, groups: ArrayLike) -> FloatArray:
        probs = np.clip(as_probabilities("q", q), self.clip, 1.0 - self.clip)
        codes = as_group_codes("groups", groups, self.table.count.shape[0])
        same_length(q=probs, groups=codes)
        out = self.table.predict(
            codes, bin_index(probs, self.table.bins), probs, float32_means=self.float32
        )
        return out.astype(np.float32).astype(np.float64) if self.float32 else out


def _instants(name: str, values: ArrayLike) -> FloatArray:
    """Times as float64 with NaN (unknown) read as +inf: never, or after everything."""
    array = as_vector(name, values, finite=False)
    return np.where(np.isnan(array), np.inf, array)


@dataclass(frozen=True)
class Repair:
    """Repaired forecasts (in the input's row order) and how many outcomes fed the map."""

    p: FloatArray
    n_updates: int


def repair_at_resolution(
    q: ArrayLike,
    y: ArrayLike,
    groups: ArrayLike,
    forecast_ts: ArrayLike,
    resolve_ts: ArrayLike,
    *,
    bins: int = ECE_BINS,
    prior_strength: float = PRIOR_STRENGTH,
    clip: float = REPAIR_CLIP,
) -> Repair:
    """forecastbench's online repair-at-resolution baseline (methodology §2.4).

    Rows are forecast in time order (stable; NaN times last). Before the forecast at t, every
    row that resolved at or before t, and was itself forecast at or before t, has taught the
    map its outcome; a row never resolving (NaN/inf) never teaches. So no forecast is repaired
    with an outcome that was unknown when it was made. A row teaches at max(forecast time,
    resolution time); forecastbench's loop instead drops for good a row whose resolution it
    meets before that row's own forecast (timestamps out of order), which loses an outcome
    that later forecasts were entitled to.
    """
    probs, labels = as_probabilities("q", q), as_outcomes("y", y)
    codes = as_group_codes("groups", groups)
    n_groups = int(codes.max()) + 1 if codes.size else 1
    made, known = _instants("forecast_ts", forecast_ts), _instants("resolve_ts", resolve_ts)
    same_length(q=probs, y=labels, groups=codes, forecast_ts=made, resolve_ts=known)
    probs = np.clip(probs, clip, 1.0 - clip)
    bin_ = floor_bin_index(probs, bins)
    table = GroupBinTable(n_groups, bins, prior_strength)
    teaches = np.where(np.isfinite(known), np.maximum(made, known), np.inf)
    by_teaching = np.argsort(teaches, kind="stable")
    out = np.empty(len(probs))
    taught = 0
    for row in np.argsort(made, kind="stable"):
        start = taught
        while taught < len(probs) and teaches[by_teaching[taught]] <= made[row]:
            taught += 1
        if taught > start:
            new = by_teaching[start:taught]
            table.add(codes[new], bin_[new], labels[new])
        out[row] = table.predict(codes[row : row + 1], bin_[row : row + 1], probs[row : row + 1])[0]
    updates = taught
    return Repair(out, updates)
