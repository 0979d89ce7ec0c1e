"""Equal-width probability bins, with the edge convention made explicit.

The sources disagree on which side of an edge a forecast falls (methodology §2.2, §3.1):
forecastbench is right-closed (``np.digitize(q, edges, right=True) - 1``: bin 0 is [0, 1/m],
bin b is (b/m, (b+1)/m]), while K-Fish and most libraries are left-closed ([b/m, (b+1)/m), the
last bin closed so that q = 1 is kept rather than dropped). A forecast of exactly 0.05 with 20
bins lands in bin 0 under the first and bin 1 under the second, so the convention is a parameter
everywhere, and ECE, the Murphy decomposition and the SQL version all bin through this module.

K-Fish itself does not use edges at all: its bin is ``floor(q·K)`` (15 bins), capped at K - 1.
That is not left-closed linspace either: linspace's edges for round forecasts sit one ulp above
them (edge 6 of 20 is 0.30000000000000004), so left-closed puts 0.3 in bin 5 where
``floor(0.3·20) = 6``. ``floor=True`` bins the K-Fish way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ledger.metrics.validation import FloatArray, check_positive_int


def bin_edges(bins: int) -> FloatArray:
    """The ``bins + 1`` edges on [0, 1], exactly as ``np.linspace`` makes them.

    The SQL decomposition rebuilds these as ``i * (1.0 / bins)`` (and 1.0 for the last), which is
    what linspace computes, so boundary forecasts land in the same bin in both.
    """
    check_positive_int("bins", bins)
    return np.linspace(0.0, 1.0, bins + 1)


def bin_index(q: FloatArray, bins: int, *, right_closed: bool = True) -> NDArray[np.intp]:
    """The bin of each forecast in ``q`` (values in [0, 1]), from 0 to ``bins - 1``."""
    idx = np.digitize(q, bin_edges(bins), right=right_closed) - 1
    return np.clip(idx, 0, bins - 1)


def floor_bin_index(q: FloatArray, bins: int) -> NDArray[np.intp]:
    """floor(q·bins), capped at bins - 1: K-Fish's bins and forecastbench's repair map's. Not
    ``bin_index(..., right_closed=False)``: linspace's edges and q·bins round differently at
    some boundaries (0.15 is bin 3 here and bin 2 against linspace's 0.15000000000000002)."""
    check_positive_int("bins", bins)
    return np.clip(np.floor(q * bins), 0, bins - 1).astype(np.intp)


@dataclass(frozen=True)
class BinStats:
    """Per-bin counts and sums: everything ECE, Murphy and a reliability diagram need.

    ``lower``/``upper`` are the bin edges; empty bins have count 0 and NaN means.
    """

    lower: FloatArray
    upper: FloatArray
    count: NDArray[np.int64]
    sum_forecast: FloatArray
    sum_outcome: FloatArray

    @property
    def n(self) -> int:
        return int(self.count.sum())

    @property
    def nonempty(self) -> NDArray[np.bool_]:
        return self.count > 0

    @property
    def mean_forecast(self) -> FloatArray:
        return self._mean(self.sum_forecast)

    @property
    def observed(self) -> FloatArray:
        return self._mean(self.sum_outcome)

    def _mean(self, sums: FloatArray) -> FloatArray:
        out = np.full(sums.shape, np.nan)
        np.divide(sums, self.count, out=out, where=self.nonempty)
        return out


def calibration_bins(
    q: FloatArray, y: FloatArray, bins: int, *, right_closed: bool, floor: bool = False
) -> BinStats:
    """Bin already-validated forecasts ``q`` and outcomes ``y`` (by ``floor(q·bins)`` when
    ``floor``, ``right_closed`` then unused)."""
    edges = bin_edges(bins)
    idx = floor_bin_index(q, bins) if floor else bin_index(q, bins, right_closed=right_closed)
    return BinStats(
        lower=edges[:-1],
        upper=edges[1:],
        count=np.bincount(idx, minlength=bins).astype(np.int64),
        sum_forecast=np.bincount(idx, weights=q, minlength=bins).astype(np.float64),
        sum_outcome=np.bincount(idx, weights=y, minlength=bins).astype(np.float64),
    )
