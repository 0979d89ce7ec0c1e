"""Approachability's curve from the largest cell kept in a heap equals the scan of every cell."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.metrics import approachability, bin_index


def _scanned(q: np.ndarray, y: np.ndarray, g: np.ndarray, bins: int, eps: float) -> list[float]:
    """forecastbench's loop: every cell scanned at every curve point (quadratic)."""
    q = np.clip(q, 1e-6, 1 - 1e-6)
    cell = g * bins + bin_index(q, bins, right_closed=True)
    total = np.zeros((int(g.max()) + 1) * bins)
    curve = []
    for start in range(0, len(q), 10):
        stop = min(start + 10, len(q))
        np.add.at(total, cell[start:stop], y[start:stop] - q[start:stop])
        curve.append(float(np.maximum(np.abs(total / stop) - eps, 0.0).max()))
    return curve


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0), st.integers(0, 1), st.integers(0, 30)),
        min_size=1,
        max_size=80,
    ),
    st.integers(1, 25),
    st.sampled_from([0.0, 0.01, 0.2]),
)
def test_the_curve_is_the_scan_exactly(
    rows: list[tuple[float, int, int]], bins: int, eps: float
) -> None:
    q, y, g = (np.array(c) for c in zip(*rows, strict=True))
    result = approachability(q, y, g, bins=bins, eps=eps)
    assert result.curve_err == _scanned(q.astype(float), y.astype(float), g, bins, eps)
    assert result.n_cells == (int(g.max()) + 1) * bins


def test_worst_cells_by_hand() -> None:
    # group 1 bin 15 ((0.75, 0.8]): 0.8 then y=0 -> payoff -0.8; group 0 bin 5: 1 - 0.3 = +0.7
    result = approachability([0.8, 0.3], [0, 1], [1, 0], bins=20)
    assert [(c.group, c.bin) for c in result.top] == [(1, 15), (0, 5)]
    assert [c.mean_payoff for c in result.top] == [-0.4, 0.35]
    assert result.app_err == 0.4
