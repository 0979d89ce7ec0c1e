"""A holding sold down the bids: hand-worked levels, and what holds for every book."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.execution.liquidation import sell_down

PRICES, SIZES = [0.48, 0.45, 0.40], [100.0, 200.0, 1000.0]


def test_a_holding_walks_the_bids_and_what_no_bid_takes_is_worth_nothing() -> None:
    """200 shares: 100 at 0.48 and 100 at 0.45 = $93. 2,000 shares: 100 x 0.48 + 200 x 0.45 +
    1,000 x 0.40 = $538, and the 700 no bid takes fetch nothing."""
    assert sell_down(PRICES, SIZES, 200.0) == (93.0, [100.0, 100.0, 0.0])
    proceeds, taken = sell_down(PRICES, SIZES, 2000.0)
    assert proceeds == pytest.approx(538.0) and taken == SIZES
    # after the 200 shares, 2,000 more meet 100 at 0.45 and 1,000 at 0.40: $445
    proceeds, _ = sell_down(PRICES, SIZES, 2000.0, [100.0, 100.0, 0.0])
    assert proceeds == pytest.approx(445.0)
    assert sell_down([0.0, -0.1], [50.0, 50.0], 10.0)[0] == 0.0  # no price, no proceeds


levels = st.lists(
    st.tuples(st.integers(1, 99), st.floats(0.0, 1e4, allow_nan=False)), min_size=0, max_size=8
)


# a holding is 0 or a real number of shares: below 1e-12 a share count times a price falls into
# floats too small to hold it (5e-324 x 0.01 is 0.0), which says nothing about the walk
shares = st.one_of(st.just(0.0), st.floats(1e-12, 5e4))


@given(levels, shares, shares)
def test_a_bigger_holding_never_fetches_more_a_share(
    book: list[tuple[int, float]], small: float, extra: float
) -> None:
    prices = sorted((p / 100 for p, _ in book), reverse=True)
    sizes = [s for _, s in book]
    less, taken = sell_down(prices, sizes, small)
    more, _ = sell_down(prices, sizes, small + extra)
    assert 0.0 <= less <= more + 1e-9
    if small > 0 and small + extra > 0:
        assert more / (small + extra) <= less / small + 1e-9  # worse or equal per share
    if prices:
        assert less <= small * prices[0] + 1e-9  # never above the best bid
    assert all(0.0 <= t <= s + 1e-9 for t, s in zip(taken, sizes, strict=True))
