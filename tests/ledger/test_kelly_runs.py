"""forecastbench's Kelly simulator run once per bettor: parallel cohorts never compound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.metrics import MetricInputError, kelly_bankroll, kelly_by_run
from ledger.metrics.trading import kelly_factors


def test_each_run_starts_from_one_and_the_runs_are_averaged() -> None:
    # A: p 0.6 > q 0.5, f = 0.1/0.5 = 0.2, odds 1, won: x1.2
    # B: the same bet lost: x0.8
    # C: p 0.2 > q 0.1, f = 0.1/0.9, odds 9, won: 1 + 1 = x2.0
    runs = kelly_by_run([0.6, 0.6, 0.2], [0.5, 0.5, 0.1], [1, 0, 1], ["A", "B", "C"])
    assert runs.n == 3
    assert runs.rois.tolist() == pytest.approx([0.2, -0.2, 1.0])
    assert runs.mean_roi == pytest.approx(1.0 / 3)
    # chained as one bettor they would have made 1.2 * 0.8 * 2.0 = 1.92
    assert kelly_bankroll([0.6, 0.6, 0.2], [0.5, 0.5, 0.1], [1, 0, 1]).roi == pytest.approx(0.92)


def test_rows_of_a_run_compound_in_any_order() -> None:
    runs = kelly_by_run([0.6, 0.2, 0.6], [0.5, 0.1, 0.5], [1, 1, 0], ["x", "y", "x"])
    assert runs.rois.tolist() == pytest.approx([1.2 * 0.8 - 1.0, 1.0])


def test_runs_must_match_the_rows() -> None:
    with pytest.raises(MetricInputError, match="runs has 1 rows, the forecasts 2"):
        kelly_by_run([0.6, 0.6], [0.5, 0.5], [1, 0], ["A"])


@given(
    st.lists(
        st.tuples(
            st.floats(0.01, 0.99), st.floats(0.01, 0.99), st.integers(0, 1), st.integers(0, 4)
        ),
        min_size=1,
        max_size=40,
    )
)
def test_a_run_is_the_simulator_over_its_own_rows(
    rows: list[tuple[float, float, int, int]],
) -> None:
    p, q, y, run = (np.array(c) for c in zip(*rows, strict=True))
    result = kelly_by_run(p, q, y, run)
    expected = [kelly_bankroll(p[run == r], q[run == r], y[run == r]).roi for r in np.unique(run)]
    assert result.rois.tolist() == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert np.all(kelly_factors(p, q, y) > 0.0)
