"""The peers' band rule as a plain loop, the reference the benchmark's order count is held to."""

from __future__ import annotations

from replays.tape import Tape


def band_orders(tape: Tape, buy_below: float = 0.40, sell_above: float = 0.60) -> int:
    """Orders of "buy when flat under ``buy_below``, sell all when long over ``sell_above``",
    market by market, point by point; the last instant is left out because every market of a
    synthetic tape closes there (nothing trades at a market's close)."""
    orders = 0
    for m in range(len(tape.markets)):
        long = False
        for price in tape.yes(m)[:-1].tolist():
            if not long and price < buy_below:
                long, orders = True, orders + 1
            elif long and price > sell_above:
                long, orders = False, orders + 1
    return orders
