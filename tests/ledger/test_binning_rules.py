"""Which bin a forecast on an edge falls in: forecastbench's edges against K-Fish's floor."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.metrics import bin_index, floor_bin_index, reliability

EDGE_VALUES = np.array([0.3, 0.6, 0.7])


@pytest.mark.parametrize(
    ("bins", "right_closed", "expected"),
    [
        # linspace's edge 6 of 20 is 0.30000000000000004, so 0.3 is under it either way
        (20, True, [5, 11, 13]),
        (20, False, [5, 11, 13]),
        # at 15 bins 0.6 is edge 9 exactly: right-closed keeps it in bin 8
        (15, True, [4, 8, 10]),
        (15, False, [4, 9, 10]),
        (10, False, [2, 5, 6]),
    ],
)
def test_linspace_edges(bins: int, right_closed: bool, expected: list[int]) -> None:
    assert bin_index(EDGE_VALUES, bins, right_closed=right_closed).tolist() == expected


@pytest.mark.parametrize(
    ("bins", "expected"),
    # K-Fish: floor(0.3·20) = 6, floor(0.6·20) = 12, floor(0.7·20) = 14; 0.3·15 = 4.5 -> 4,
    # 0.6·15 = 9 -> 9, 0.7·15 = 10.5 -> 10; 0.3·10 = 3.0000000000000004 -> 3
    [(20, [6, 12, 14]), (15, [4, 9, 10]), (10, [3, 6, 7])],
)
def test_kfish_floor(bins: int, expected: list[int]) -> None:
    assert floor_bin_index(EDGE_VALUES, bins).tolist() == expected
    stats = reliability(EDGE_VALUES, [1, 0, 1], bins, floor=True)
    assert np.flatnonzero(stats.count).tolist() == expected


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=50), st.integers(1, 40))
def test_floor_bins_are_in_range_and_ordered(q: list[float], bins: int) -> None:
    values = np.sort(np.array(q))
    idx = floor_bin_index(values, bins)
    assert idx.min() >= 0 and idx.max() <= bins - 1
    assert np.all(np.diff(idx) >= 0)
