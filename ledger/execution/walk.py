"""Walking a side of a book: a BUY of dollars up the asks, a SELL of shares down the bids.

Each level fills at its own price (the taker keeps any price improvement), up to its remaining
size, until the order is done, the next price is past the limit, the levels run out or cash
does. The fee is charged per level, and a BUY keeps amount + fee within cash by taking fewer
shares at the level where cash runs out (the official client's ``adjust_market_buy_amount``).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import NamedTuple

import msgspec

from ledger.execution.exact import (
    ZERO,
    add,
    double_bits,
    floor_quotient,
    from_bits,
    mul,
    nearest_quotient,
    sub,
)
from ledger.execution.fills import Leg, Stop, TakerFee, charge


class Level(NamedTuple):
    """A level as a walk sees it: its price, what is left of its size, its index (None when
    the price is not a level of the book), as ``Leg.level`` records it."""

    price: Decimal
    size: Decimal
    rank: int | None


class Walk(NamedTuple):
    legs: tuple[Leg, ...]
    left: Decimal
    stop: Stop


def walk_buy(
    levels: Sequence[Level],
    dollars: Decimal,
    *,
    cash: Decimal | None,
    limit: Decimal | None,
    fee: TakerFee,
    step: Decimal | None,
) -> Walk:
    """Spend ``dollars`` up ``levels`` (best first). ``step``: shares in whole steps (each leg
    then costs price × shares exactly), or None for the ``fa`` rule's division on the last
    leg. Raises ``FeeUnknown`` from ``fee``."""
    legs: list[Leg] = []
    left = dollars
    paid = ZERO  # amount + fee so far
    for level in levels:
        if left <= ZERO:
            break
        price = level.price
        if limit is not None and price > limit:
            return Walk(tuple(legs), left, "limit")
        if level.size <= ZERO:
            continue
        whole = mul(price, level.size)
        last = whole > left
        if last:
            shares, amount = _spend(left, price, level.size, step)
            if shares <= ZERO:  # less than one step is left
                break
        else:
            shares, amount = level.size, whole
        fee_paid = charge(fee, shares, price)
        if cash is not None and add(paid, amount, fee_paid) > cash:
            fitted = _fit(sub(cash, paid), price, shares, fee, step)
            if fitted is not None:
                legs.append(msgspec.structs.replace(fitted, level=level.rank))
                left = sub(left, fitted.amount)
            return Walk(tuple(legs), left, "cash")
        legs.append(Leg(price=price, shares=shares, amount=amount, fee=fee_paid, level=level.rank))
        paid = add(paid, amount, fee_paid)
        left = sub(left, amount)
        if last:
            break
    else:
        if left > ZERO:
            return Walk(tuple(legs), left, "depth")
    return Walk(tuple(legs), left, "filled")


def walk_sell(
    levels: Sequence[Level],
    shares: Decimal,
    *,
    limit: Decimal | None,
    fee: TakerFee,
) -> Walk:
    """Sell ``shares`` down ``levels`` (best first); each leg is received at price × shares
    exactly. Raises ``FeeUnknown`` from ``fee``."""
    legs: list[Leg] = []
    left = shares
    for level in levels:
        if left <= ZERO:
            break
        if limit is not None and level.price < limit:
            return Walk(tuple(legs), left, "limit")
        if level.size <= ZERO:
            continue
        taken = min(left, level.size)
        legs.append(
            Leg(
                price=level.price,
                shares=taken,
                amount=mul(level.price, taken),
                fee=charge(fee, taken, level.price),
                level=level.rank,
            )
        )
        left = sub(left, taken)
    return Walk(tuple(legs), left, "filled" if left <= ZERO else "depth")


def _spend(
    dollars: Decimal, price: Decimal, size: Decimal, step: Decimal | None
) -> tuple[Decimal, Decimal]:
    """The shares ``dollars`` buy at ``price`` on a level holding more than that, and what
    they cost. Without a step: the quotient to the nearest double, costing ``dollars``
    exactly (never more shares than the level holds, which a decimal size can make the
    nearest double exceed). With one: whole steps, rounded down, at price × shares."""
    if step is None:
        return min(nearest_quotient(dollars, price), size), dollars
    shares = mul(Decimal(floor_quotient(dollars, price, step)), step)
    return shares, mul(price, shares)


def _fit(
    budget: Decimal, price: Decimal, most: Decimal, fee: TakerFee, step: Decimal | None
) -> Leg | None:
    """The leg of the most shares, at most ``most``, whose amount + fee fits ``budget``; None
    when not even the smallest does.

    Where the fee of spending the whole budget is zero, the leg spends it (the ``fa`` rule's
    division, or whole steps). Otherwise the largest share count that fits is found by
    bisection: over whole steps, or over the doubles in [0, ``most``] (their bit patterns are
    ordered as they are). Every candidate is checked exactly, so the leg fits whatever the
    fee callable does; a fee that grows with shares makes it the largest that fits."""
    if budget <= ZERO:
        return None
    if mul(price, most) > budget:
        shares, amount = _spend(budget, price, most, step)
        if shares > ZERO:
            fee_paid = charge(fee, shares, price)
            if add(amount, fee_paid) <= budget:
                return Leg(price=price, shares=shares, amount=amount, fee=fee_paid, level=None)

    def fits(shares: Decimal) -> Decimal | None:
        fee_paid = charge(fee, shares, price)
        return fee_paid if add(mul(price, shares), fee_paid) <= budget else None

    if step is not None:
        lo, hi = 0, floor_quotient(most, Decimal(1), step)
        hi = min(hi, floor_quotient(budget, price, step))

        def shares_at(k: int) -> Decimal:
            return mul(Decimal(k), step)
    else:
        ceiling = min(most, nearest_quotient(budget, price))
        lo, hi = 0, double_bits(float(ceiling))

        def shares_at(k: int) -> Decimal:
            return min(Decimal(from_bits(k)), most)

    while lo < hi:
        middle = (lo + hi + 1) // 2
        if fits(shares_at(middle)) is not None:
            lo = middle
        else:
            hi = middle - 1
    if lo == 0:
        return None
    shares = shares_at(lo)
    fitted = fits(shares)
    if fitted is None:  # cannot happen: lo moved only to shares that fit
        return None
    return Leg(price=price, shares=shares, amount=mul(price, shares), fee=fitted, level=None)
