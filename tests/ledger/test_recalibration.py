"""The group-bin post-processor and the repair map: hand-worked tables, and a property that the
repair never uses an outcome unknown when a forecast was made."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.metrics import (
    GroupBinTable,
    MetricInputError,
    approachability,
    fit_group_bin_postprocessor,
    floor_bin_index,
    repair_at_resolution,
)


def test_post_processor_by_hand() -> None:
    # group 0: three forecasts of 0.5 (bin 9 right-closed, centre 0.475), two YES
    post = fit_group_bin_postprocessor(
        [0.5, 0.5, 0.5, 0.9], [1, 1, 0, 1], np.array([0, 0, 0, 1]), 3, prior_strength=5.0
    )
    out = post.apply([0.5, 0.5, 0.9, 0.2], np.array([0, 2, 2, 1]))
    assert out[0] == pytest.approx((2 + 5 * 0.475) / (3 + 5))
    assert out[1] == pytest.approx((2 + 5 * 0.475) / (3 + 5))  # unseen group: the bin overall
    assert out[2] == pytest.approx((1 + 5 * 0.875) / (1 + 5))  # 0.9 is in bin 17, centre 0.875
    assert out[3] == 0.2  # a bin never seen anywhere: q itself
    with pytest.raises(MetricInputError, match=r"0\.\.2"):
        post.apply([0.5], np.array([3]))


def test_floor_bins_differ_from_linspace_at_a_boundary() -> None:
    assert floor_bin_index(np.array([0.15, 0.0, 1.0]), 20).tolist() == [3, 0, 19]


def test_approachability_rejects_bad_groups() -> None:
    with pytest.raises(MetricInputError, match="integer group codes"):
        approachability([0.5], [1], np.array([-1]))


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.floats(0, 1),  # q
            st.integers(0, 1),  # y
            st.integers(0, 2),  # group
            st.integers(0, 20),  # forecast instant
            st.one_of(st.none(), st.integers(0, 25)),  # resolution instant (None: never)
        ),
        min_size=1,
        max_size=30,
    )
)
def test_repair_uses_only_outcomes_known_at_the_forecast(rows: list) -> None:
    q, y, g, made, known = (list(col) for col in zip(*rows, strict=True))
    resolve = np.array([np.nan if k is None else float(k) for k in known])
    groups = np.array(g)
    out = repair_at_resolution(q, y, groups, np.array(made, float), resolve, bins=5).p
    qc = np.clip(np.array(q), 1e-6, 1 - 1e-6)
    bins = floor_bin_index(qc, 5)
    for i in range(len(rows)):
        learned = [
            j for j in range(len(rows))
            if known[j] is not None and known[j] <= made[i] and made[j] <= made[i]
        ]  # fmt: skip
        table = GroupBinTable(3, 5)
        idx = np.array(learned, dtype=np.intp)
        table.add(groups[idx], bins[idx], np.array(y, float)[idx])
        expected = table.predict(groups[i : i + 1], bins[i : i + 1], qc[i : i + 1])[0]
        assert out[i] == pytest.approx(expected)
