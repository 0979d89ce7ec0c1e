"""Orders as arena places them, fills as legs, the taker fee as a callable, and the record of
the levels an agent has already taken from a snapshot.

An arena order is a BUY of dollars on an outcome (a bet) or a SELL of shares of a held
position, as Polymarket's market orders are. A fill is one leg per level it took, each at that
level's own price, with exact totals; ``float()`` of any of them is what an event would log.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Context, Decimal
from fractions import Fraction
from typing import Literal, Protocol

import msgspec

from ledger.errors import LedgerError
from ledger.events import OrderKind
from ledger.execution.exact import ZERO, Number, add, dec, ratio

BookSide = Literal["bid", "ask"]

LevelKey = tuple[str, BookSide, Decimal]
"""A level of a snapshot: (snapshot id, ``"bid"`` or ``"ask"``, price)."""

Consumed = Mapping[LevelKey, Decimal]
"""The shares an agent (or, with shared liquidity, a cohort) has taken from levels of a
snapshot. A fill reads the entries of its own snapshot and returns a new map holding only
those, its own legs added; entries of any other snapshot are dropped, so a newer snapshot
starts whole. Keep one map per outcome token."""


class FeeUnknown(LedgerError):
    """Raised by a fee callable that does not know the fee of a market at an instant; the
    order is refused (``fee_unknown``) with this exception's message."""


class TakerFee(Protocol):
    """The taker fee, in dollars, of buying or selling ``shares`` at ``price`` on one level.

    Returns a ``Decimal`` (a float is read exactly), never negative, and never smaller for more
    shares at the same price (cash-limited sizing searches on that). Raises ``FeeUnknown`` where
    the fee is not known. The fee schedule is not this module's: a broker adapts its schedule
    to this shape."""

    def __call__(self, shares: Decimal, price: float) -> Decimal | float | int: ...


def no_fee(shares: Decimal, price: float) -> Decimal:
    """The fee of the ``fa`` rule and of every model by default: none."""
    return ZERO


def charge(fee: TakerFee, shares: Decimal, price: Decimal) -> Decimal:
    """``fee`` of ``shares`` at ``price``, read exactly and checked. ``FeeUnknown`` passes
    through; a negative or non-finite fee is a ``LedgerError`` (a taker never earns a fee)."""
    amount = dec(fee(shares, float(price)), "fee")
    if not amount.is_finite() or amount < ZERO:
        raise LedgerError(
            f"fee {amount} for {shares} shares at {price} is not a non-negative number"
        )
    return amount


class Order(msgspec.Struct, frozen=True, kw_only=True):
    """A marketable order: a BUY of ``amount`` dollars or a SELL of ``shares`` shares.

    ``limit`` is the worst price it accepts (the most a BUY pays a share, the least a SELL
    takes), None for none; ``at_ms`` the instant the order meets the book (UTC unix ms: the
    decision instant plus any latency), needed when a model checks the book's age."""

    kind: OrderKind
    amount: Decimal | None = None
    shares: Decimal | None = None
    limit: Decimal | None = None
    at_ms: int | None = None

    @classmethod
    def buy(cls, amount: Number, *, limit: Number | None = None, at_ms: int | None = None) -> Order:
        """Buy ``amount`` dollars' worth."""
        return cls(
            kind="buy",
            amount=dec(amount, "amount"),
            limit=None if limit is None else dec(limit, "limit price"),
            at_ms=at_ms,
        )

    @classmethod
    def sell(
        cls, shares: Number, *, limit: Number | None = None, at_ms: int | None = None
    ) -> Order:
        """Sell ``shares`` shares."""
        return cls(
            kind="sell",
            shares=dec(shares, "shares"),
            limit=None if limit is None else dec(limit, "limit price"),
            at_ms=at_ms,
        )

    @property
    def quantity(self) -> Decimal:
        """Dollars for a BUY, shares for a SELL."""
        q = self.amount if self.kind == "buy" else self.shares
        if q is None:
            raise LedgerError(
                f"a {self.kind} order needs {'an amount' if self.kind == 'buy' else 'shares'}"
            )
        return q


class Leg(msgspec.Struct, frozen=True, kw_only=True):
    """What one level gave: ``shares`` at the level's ``price``, ``amount`` dollars paid (BUY)
    or received (SELL), ``fee`` dollars paid. ``level`` is the level's index on its side of the
    snapshot, best first; None when the price is not a level of the book (``fa``, ``mid``, a
    synthetic touch).

    ``amount`` is ``price × shares`` exactly, except on a leg that spends the order's last
    dollars without a share step: it costs exactly those dollars, and its shares are their
    quotient by the price rounded to the nearest double (the ``fa`` rule's own division)."""

    price: Decimal
    shares: Decimal
    amount: Decimal
    fee: Decimal
    level: int | None


Stop = Literal["filled", "depth", "limit", "cash"]
"""Why a fill ended: all of the order filled (to the share step), the book (or its top, for a
capped touch) ran out, the next level was past the limit, or cash ran out (amount + fee)."""

_AVERAGE = Context(prec=28)


class Fill(msgspec.Struct, frozen=True, kw_only=True):
    """An order filled, whole or in part, with exact totals of its ``legs``.

    ``unfilled`` is what was left when it stopped (dollars of a BUY, shares of a SELL; under a
    share step a BUY may leave dust below one step at the last price), ``stop`` why.
    ``synthetic`` marks a price made up around a mid (a touch with only a mid known).
    ``consumed`` is the consumption map after this fill (see ``Consumed``)."""

    kind: OrderKind
    legs: tuple[Leg, ...]
    requested: Decimal
    unfilled: Decimal
    stop: Stop
    model: str
    book_id: str
    synthetic: bool = False
    consumed: Mapping[LevelKey, Decimal] = msgspec.field(default_factory=dict)

    @property
    def shares(self) -> Decimal:
        return add(*(leg.shares for leg in self.legs))

    @property
    def amount(self) -> Decimal:
        """Dollars paid for the shares (BUY) or received for them (SELL), fee apart."""
        return add(*(leg.amount for leg in self.legs))

    @property
    def fee(self) -> Decimal:
        return add(*(leg.fee for leg in self.legs))

    @property
    def cash_change(self) -> Decimal:
        """What the fill does to cash: −(amount + fee) for a BUY, amount − fee for a SELL."""
        total = self.amount
        fee = self.fee
        if self.kind == "buy":
            return add(total, fee).copy_negate()
        return add(total, fee.copy_negate())

    @property
    def average_price(self) -> Decimal:
        """amount / shares, fee apart, to 28 significant digits (the sums it divides are exact;
        ``exact_average`` is the exact fraction)."""
        return _AVERAGE.divide(self.amount, self.shares)

    def exact_average(self) -> Fraction:
        """amount / shares exactly."""
        return ratio(self.amount, self.shares)

    @property
    def price(self) -> Decimal:
        """The price an event would record: the one leg's price, or the average of several."""
        return self.legs[0].price if len(self.legs) == 1 else self.average_price

    @property
    def partial(self) -> bool:
        """Whether something was left unfilled (not counting a share step's dust)."""
        return self.stop != "filled"
