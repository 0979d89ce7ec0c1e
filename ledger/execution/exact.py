"""The arithmetic of fills: exact decimals, and the one rounding a fill makes.

Every price, size, amount and fee is a ``Decimal`` holding exactly the number it was given: a
string or a ``Decimal`` as written, a float as the exact value of its double (``0.49`` as a
double is 0.48999999999999999111...). Sums and products go through ``EXACT``, a context of 1,000
digits that traps ``Inexact``: they are exact or they raise, never rounded in silence.

Taking a double at its exact value is what makes the ``fa`` rule a special case rather than a
second code path: a single exact operation on two doubles, rounded once to a double, is what
IEEE 754 arithmetic computes, so ``float(shares)`` and ``float(amount)`` of a fill equal the
broker's ``amount / price`` and ``shares * price`` to the last bit.

The one division, how many shares the last dollars buy at a level's price, cannot be exact. It
is rounded once, either to the nearest double (``nearest_quotient``, the ``fa`` rule's own
division) or down to a share step (``floor_quotient``).

A tick grid is checked on the prices as they print (``printed``): a book of doubles quoting
0.49 is on a 0.01 grid, though the double 0.49 is not a multiple of 0.01.
"""

from __future__ import annotations

import functools
import math
import struct
from decimal import (
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
)
from fractions import Fraction

from ledger.errors import LedgerError

Number = Decimal | float | int | str
"""What a price, size or amount may be given as; ``dec`` reads each exactly."""

EXACT = Context(prec=1_000, traps=[Inexact, InvalidOperation, DivisionByZero, Overflow])
"""Sums and products of the fill arithmetic: exact, or ``decimal.Inexact`` is raised. The exact
value of a double between 1e-6 and 1e12 has at most about 70 significant digits, so the products
and sums of a fill stay far inside the limit."""

ZERO = Decimal(0)
ONE = Decimal(1)
INFINITY = Decimal("Infinity")


def dec(value: Number, what: str = "value") -> Decimal:
    """``value`` as the exact ``Decimal`` it stands for (a float: its double's exact value).

    NaN and infinities pass through, for the checks to name; anything that is not a number
    is a ``LedgerError`` naming ``what``."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise LedgerError(f"{what} {value!r} is not a number")
    if isinstance(value, float):
        return Decimal(float(value))  # float() drops a subclass, numpy's float64 among them
    if isinstance(value, int):
        return Decimal(int(value))
    if isinstance(value, str):
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            raise LedgerError(f"{what} {value!r} is not a number") from None
    try:
        return Decimal(float(value))  # numpy scalars that are not float subclasses
    except (TypeError, ValueError):
        raise LedgerError(f"{what} {value!r} is not a number") from None


def add(*terms: Decimal) -> Decimal:
    """The exact sum."""
    total = ZERO
    for term in terms:
        total = EXACT.add(total, term)
    return total


def sub(a: Decimal, b: Decimal) -> Decimal:
    """The exact difference."""
    return EXACT.subtract(a, b)


def mul(a: Decimal, b: Decimal) -> Decimal:
    """The exact product (``Infinity`` times a positive number is ``Infinity``)."""
    return EXACT.multiply(a, b)


def half(a: Decimal) -> Decimal:
    """``a / 2``, exact (a finite decimal halves into one)."""
    return EXACT.multiply(a, Decimal("0.5"))


def nearest_quotient(dollars: Decimal, price: Decimal) -> Decimal:
    """``dollars / price`` rounded once to the nearest double (ties to even), as a ``Decimal``.

    The exact quotient is a ratio of two integers, which CPython's true division rounds
    correctly (what ``float(Fraction(...))`` does, without building the fractions). With two
    doubles as operands this is IEEE division bit for bit."""
    n, d = dollars.as_integer_ratio()
    pn, pd = price.as_integer_ratio()
    return Decimal((n * pd) / (d * pn))


def floor_quotient(dollars: Decimal, price: Decimal, step: Decimal) -> int:
    """How many whole ``step``s of shares ``dollars`` buy at ``price``: floor(d / (p·step)),
    in integers (exact, as the fractions it stands for)."""
    n, d = dollars.as_integer_ratio()
    pn, pd = price.as_integer_ratio()
    sn, sd = step.as_integer_ratio()
    return (n * pd * sd) // (d * pn * sn)


def ratio(a: Decimal, b: Decimal) -> Fraction:
    """``a / b`` exactly, for comparisons and averages."""
    return Fraction(a) / Fraction(b)


def printed(value: Decimal) -> Decimal:
    """The shortest decimal that prints as the double nearest ``value`` (``0.49``)."""
    return Decimal(repr(float(value)))


@functools.lru_cache(maxsize=4096)
def on_grid(price: Decimal, tick: Decimal) -> bool:
    """Whether ``price``, as it prints, is a whole number of ``tick``s (remembered: a book's
    prices are a few hundred values of one grid, checked at every order)."""
    return EXACT.remainder(printed(price), printed(tick)).is_zero()


def double_bits(value: float) -> int:
    """The bits of a non-negative double as an integer; their order is the doubles' order."""
    bits: int = struct.unpack("<q", struct.pack("<d", value))[0]
    return bits


def from_bits(bits: int) -> float:
    """The double whose bits are ``bits`` (the inverse of ``double_bits``)."""
    value: float = struct.unpack("<d", struct.pack("<q", bits))[0]
    return value


def money(value: Decimal) -> str:
    """A readable amount for a rejection's message: ``$1,234.56``, to the cent toward zero."""
    if not value.is_finite():
        return f"${value}"
    return f"${math.trunc(float(value) * 100) / 100:,.2f}"


def show(value: Decimal) -> str:
    """A readable price or size for a message, to ten significant digits (``0.49``)."""
    if not value.is_finite():
        return str(value)
    return f"{float(value):.10g}"
