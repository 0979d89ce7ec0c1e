"""What a holding fetches if sold now: its shares walked down the bid levels, best first.

``--marks-at liquidation`` values each agent's position by this rather than by one price per
share, so a holding bigger than the best bid holds is worth what the deeper, cheaper bids pay,
and shares no bid takes are worth nothing. A mark sells nothing: the levels it walks are only
imagined taken, by one agent (isolated liquidity) or by the cohort's agents one after another
(shared), and are whole again at the next mark. The value is before any taker fee.
"""

from __future__ import annotations

from collections.abc import Sequence


def sell_down(
    prices: Sequence[float], sizes: Sequence[float], shares: float, taken: Sequence[float] = ()
) -> tuple[float, list[float]]:
    """The dollars ``shares`` fetch sold down bid levels (``prices`` best first, ``sizes``
    displayed), each level less what ``taken`` says was sold into it before, and the shares
    taken from each level after this sale. Levels at a price of 0 or less pay nothing."""
    after = list(taken) + [0.0] * (len(sizes) - len(taken))
    proceeds, left = 0.0, shares
    for k, (price, size) in enumerate(zip(prices, sizes, strict=True)):
        if left <= 0.0 or price <= 0.0:
            break
        take = min(left, max(size - after[k], 0.0))
        proceeds += price * take
        after[k] += take
        left -= take
    return proceeds, after
