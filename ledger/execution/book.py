"""One order-book snapshot of one outcome token, and what can be wrong with it.

A Polymarket ``/book`` lists bids ascending and asks descending, best last; an ``OrderBook``
keeps both **best first** (bids descending, asks ascending), as the recorded samples do. The
checks name every defect a fill must refuse rather than fill through (crossed, locked, one-sided
and empty books, off-tick and unordered levels, sizes that are not positive, prices outside
(0, 1]); a model turns the first that matters to its order into a ``Rejection``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable
from decimal import Decimal
from enum import StrEnum

import msgspec

from ledger.errors import LedgerError
from ledger.execution.exact import (
    INFINITY,
    ONE,
    ZERO,
    Number,
    add,
    dec,
    half,
    on_grid,
    show,
    sub,
)


class Reason(StrEnum):
    """Why an order was refused; the values are what a log or a report would carry."""

    CROSSED = "crossed_book"
    LOCKED = "locked_book"
    ONE_SIDED = "one_sided"
    EMPTY = "empty_book"
    BAD_PRICE = "bad_price"
    NON_POSITIVE_SIZE = "non_positive_size"
    UNORDERED = "unordered_levels"
    OFF_TICK = "off_tick"
    NO_LIQUIDITY = "no_liquidity"
    NO_PRICE = "no_price"
    BELOW_MIN_SIZE = "below_min_size"
    STALE = "stale_book"
    FEE_UNKNOWN = "fee_unknown"
    FOK_UNFILLABLE = "fok_unfillable"
    LIMIT_UNREACHABLE = "limit_unreachable"
    INSUFFICIENT_CASH = "insufficient_cash"
    INVALID_ORDER = "invalid_order"


class Rejection(msgspec.Struct, frozen=True):
    """An order a model refused: the ``reason`` for machines, the ``message`` for people
    (``"crossed book: best bid 0.52 is above best ask 0.51"``)."""

    reason: Reason
    message: str

    def __str__(self) -> str:
        return self.message


_read = functools.lru_cache(maxsize=1 << 16)(Decimal)
"""A float's exact ``Decimal``, remembered: a book's prices are a few hundred values of a grid
and its sizes repeat, and the exact value of a double costs a microsecond to make. (0.0 and -0.0
share a key; a validated store holds neither.)"""

Pair = tuple[Number, Number]
"""A level as given: (price, size)."""


class OrderBook(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one outcome token's book: levels best first, each price with its size.

    ``ts_ms`` is the snapshot's instant (UTC unix milliseconds, as Polymarket stamps books);
    ``tick`` and ``min_size`` the venue's tick size and minimum order size in shares, None where
    unknown (then unchecked). ``mid`` is a price known without levels: a ``/prices-history``
    tape point or a ``/midpoint`` answer. ``id`` names the snapshot in fills and in the
    consumption map: an importer's content hash, or by default a sha256 of the content.

    A ``flat`` book is not a venue's: one infinitely deep level at one price on both sides
    (``flat_at``), which is the ``fa`` rule written as a book. It is locked by construction and
    the checks accept it, so ``l2`` on it gives the ``fa`` fill exactly.

    Build one with ``of``, ``quote`` or ``flat_at``, which read numbers exactly (see
    ``ledger.execution.exact``) and compute the id."""

    ts_ms: int
    bid_px: tuple[Decimal, ...] = ()
    bid_sz: tuple[Decimal, ...] = ()
    ask_px: tuple[Decimal, ...] = ()
    ask_sz: tuple[Decimal, ...] = ()
    tick: Decimal | None = None
    min_size: Decimal | None = None
    mid: Decimal | None = None
    flat: bool = False
    token: str = ""
    id: str = ""

    @classmethod
    def of(
        cls,
        *,
        ts_ms: int,
        bids: Iterable[Pair] = (),
        asks: Iterable[Pair] = (),
        tick: Number | None = None,
        min_size: Number | None = None,
        mid: Number | None = None,
        token: str = "",
        id: str | None = None,
    ) -> OrderBook:
        """A book from (price, size) pairs, best first; ``id`` defaults to the content hash."""
        bid_levels = [(dec(p, "bid price"), dec(s, "bid size")) for p, s in bids]
        ask_levels = [(dec(p, "ask price"), dec(s, "ask size")) for p, s in asks]
        book = cls(
            ts_ms=int(ts_ms),
            bid_px=tuple(p for p, _ in bid_levels),
            bid_sz=tuple(s for _, s in bid_levels),
            ask_px=tuple(p for p, _ in ask_levels),
            ask_sz=tuple(s for _, s in ask_levels),
            tick=_positive(tick, "tick size"),
            min_size=_positive(min_size, "minimum order size", allow_zero=True),
            mid=None if mid is None else dec(mid, "mid price"),
            token=token,
        )
        return book.with_id(id)

    @classmethod
    def columns(
        cls,
        *,
        ts_ms: int,
        bid_px: Iterable[float],
        bid_sz: Iterable[float],
        ask_px: Iterable[float],
        ask_sz: Iterable[float],
        tick: float | None,
        token: str,
        id: str,
    ) -> OrderBook:
        """A book from a validated store's float columns (``replays.books``: every number
        checked when imported), each read as its double's exact value as ``of`` reads it,
        without checking each number again: what a replay builds at every order."""
        return cls(
            ts_ms=int(ts_ms),
            bid_px=tuple(map(_read, bid_px)),
            bid_sz=tuple(map(_read, bid_sz)),
            ask_px=tuple(map(_read, ask_px)),
            ask_sz=tuple(map(_read, ask_sz)),
            tick=None if tick is None else _read(tick),
            token=token,
            id=id,
        )

    @classmethod
    def quote(
        cls,
        mid: Number,
        *,
        ts_ms: int,
        tick: Number | None = None,
        token: str = "",
        id: str | None = None,
    ) -> OrderBook:
        """A price without levels: what a mid tape knows at an instant (``fa``, ``mid`` and a
        synthetic ``touch`` can fill against it; ``l2`` cannot)."""
        return cls.of(ts_ms=ts_ms, mid=mid, tick=tick, token=token, id=id)

    @classmethod
    def flat_at(
        cls, price: Number, *, ts_ms: int, token: str = "", id: str | None = None
    ) -> OrderBook:
        """One infinitely deep level at ``price`` on both sides: the ``fa`` rule as a book."""
        p = dec(price, "price")
        book = cls(
            ts_ms=int(ts_ms),
            bid_px=(p,),
            bid_sz=(INFINITY,),
            ask_px=(p,),
            ask_sz=(INFINITY,),
            mid=p,
            flat=True,
            token=token,
        )
        return book.with_id(id)

    def with_id(self, id: str | None = None) -> OrderBook:
        """This book named ``id``, or by its content hash when ``id`` is None or empty."""
        return msgspec.structs.replace(self, id=id or self.content_hash())

    def content_hash(self) -> str:
        """sha256 of the book's content (levels with their exact values, instant, facts)."""
        parts = [
            f"ts={self.ts_ms}",
            f"tick={self.tick}",
            f"min={self.min_size}",
            f"mid={self.mid}",
            f"flat={self.flat}",
            f"token={self.token}",
            "bids=" + ",".join(f"{p}x{s}" for p, s in zip(self.bid_px, self.bid_sz, strict=True)),
            "asks=" + ",".join(f"{p}x{s}" for p, s in zip(self.ask_px, self.ask_sz, strict=True)),
        ]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    # -- reading -----------------------------------------------------------------------------

    def best_bid(self) -> Decimal | None:
        return self.bid_px[0] if self.bid_px else None

    def best_ask(self) -> Decimal | None:
        return self.ask_px[0] if self.ask_px else None

    def has_levels(self) -> bool:
        return bool(self.bid_px or self.ask_px)

    def midpoint(self) -> Decimal | None:
        """The CLOB midpoint, (best bid + best ask) / 2, where the book is two-sided, uncrossed
        and its best prices are valid; else the quoted ``mid``; else None."""
        bid, ask = self.best_bid(), self.best_ask()
        if (
            bid is not None
            and ask is not None
            and _valid_price(bid)
            and _valid_price(ask)
            and bid <= ask
        ):
            return half(add(bid, ask))
        return self.mid

    def complement(self) -> OrderBook:
        """The other outcome's book of a binary market, mirrored: its bids are 1 − these asks,
        its asks 1 − these bids, with the same sizes (the exchange's MINT and MERGE make the
        two books one)."""
        mirrored = OrderBook(
            ts_ms=self.ts_ms,
            bid_px=tuple(sub(ONE, p) for p in self.ask_px),
            bid_sz=self.ask_sz,
            ask_px=tuple(sub(ONE, p) for p in self.bid_px),
            ask_sz=self.bid_sz,
            tick=self.tick,
            min_size=self.min_size,
            mid=None if self.mid is None else sub(ONE, self.mid),
            flat=self.flat,
            token=self.token + "~" if self.token else "",
        )
        return mirrored.with_id(None)

    # -- checks ------------------------------------------------------------------------------

    def problems(self) -> tuple[Rejection, ...]:
        """Every defect of the book, at most one of each kind, most fundamental first: prices
        outside (0, 1], sizes that are not positive, unordered levels, off-tick prices, a
        crossed or locked top, an empty or one-sided book. A flat book is never locked."""
        tick = self.tick
        if _clean(self.bid_px, self.bid_sz, False, tick) and _clean(
            self.ask_px, self.ask_sz, True, tick
        ):  # every level sound (the usual case, at every order): only the top can be wrong
            top = (
                (Reason.CROSSED, self._crossed()),
                (Reason.LOCKED, self._locked()),
                (Reason.EMPTY, "" if self.has_levels() else "empty book: no bids and no asks"),
                (Reason.ONE_SIDED, self._one_sided()),
            )
            return tuple(Rejection(reason, message) for reason, message in top if message)
        sides = (("bid", self.bid_px, self.bid_sz), ("ask", self.ask_px, self.ask_sz))
        unreadable = [
            Rejection(reason, message)
            for reason, test in (
                (Reason.BAD_PRICE, _bad_price),
                (Reason.NON_POSITIVE_SIZE, _bad_size),
            )
            if (message := _first(test, sides))
        ]
        if unreadable:  # the order and grid of unreadable numbers mean nothing
            return tuple(unreadable)
        checks = (
            (Reason.UNORDERED, _first(_unordered, sides)),
            (Reason.OFF_TICK, _first(_off_tick(tick), sides) if tick is not None else ""),
            (Reason.CROSSED, self._crossed()),
            (Reason.LOCKED, self._locked()),
            (Reason.EMPTY, "" if self.has_levels() else "empty book: no bids and no asks"),
            (Reason.ONE_SIDED, self._one_sided()),
        )
        return tuple(Rejection(reason, message) for reason, message in checks if message)

    def _crossed(self) -> str:
        bid, ask = self.best_bid(), self.best_ask()
        if bid is None or ask is None or bid <= ask:
            return ""
        return f"crossed book: best bid {show(bid)} is above best ask {show(ask)}"

    def _locked(self) -> str:
        bid, ask = self.best_bid(), self.best_ask()
        if bid is None or bid != ask or self.flat:
            return ""
        return f"locked book: best bid and best ask are both {show(bid)}"

    def _one_sided(self) -> str:
        if bool(self.bid_px) == bool(self.ask_px):
            return ""
        return f"one-sided book: no {'bids' if not self.bid_px else 'asks'}"


Side = tuple[str, tuple[Decimal, ...], tuple[Decimal, ...]]
"""One side of a book for the checks: its name, prices and sizes."""


def _first(
    test: Callable[[str, tuple[Decimal, ...], tuple[Decimal, ...]], str], sides: Iterable[Side]
) -> str:
    """The first defect ``test`` finds on the bid side, then the ask side; "" for none."""
    for name, prices, sizes in sides:  # a loop, not a generator: checked at every order
        message = test(name, prices, sizes)
        if message:
            return message
    return ""


def _clean(
    prices: tuple[Decimal, ...], sizes: tuple[Decimal, ...], ascending: bool, tick: Decimal | None
) -> bool:
    """Whether one side has none of the level defects ``problems`` names (a price outside
    (0, 1], a size that is not positive, a level not strictly worse than the one before, a
    price off the tick), in one pass: True only where each of those checks finds nothing."""
    if len(prices) != len(sizes):
        return False
    before = None
    for p, s in zip(prices, sizes, strict=True):
        if not (p.is_finite() and ZERO < p <= ONE) or s.is_nan() or s <= ZERO:
            return False
        if before is not None and ((p <= before) if ascending else (p >= before)):
            return False
        if tick is not None and not on_grid(p, tick):
            return False
        before = p
    return True


def _unordered(name: str, prices: tuple[Decimal, ...], sizes: tuple[Decimal, ...]) -> str:
    ascending = name == "ask"
    for i in range(1, len(prices)):
        a, b = prices[i - 1], prices[i]
        if (b <= a) if ascending else (b >= a):
            way = "ascending" if ascending else "descending"
            return (
                f"unordered levels: {name} {i} at {show(b)} after {show(a)} "
                f"(best first, strictly {way})"
            )
    return ""


def _off_tick(tick: Decimal) -> Callable[[str, tuple[Decimal, ...], tuple[Decimal, ...]], str]:
    def test(name: str, prices: tuple[Decimal, ...], sizes: tuple[Decimal, ...]) -> str:
        for i, p in enumerate(prices):
            if not on_grid(p, tick):
                return f"off tick: {name} {i} at {show(p)} is not on the {show(tick)} tick"
        return ""

    return test


def _valid_price(p: Decimal) -> bool:
    return p.is_finite() and ZERO < p <= ONE


def _bad_price(name: str, prices: tuple[Decimal, ...], sizes: tuple[Decimal, ...]) -> str:
    for i, p in enumerate(prices):
        if not (p.is_finite() and ZERO < p <= ONE):  # _valid_price, inline: every level
            return f"bad price: {name} {i} at {show(p)} is outside (0, 1]"
    return ""


def _bad_size(name: str, prices: tuple[Decimal, ...], sizes: tuple[Decimal, ...]) -> str:
    if len(sizes) != len(prices):
        return f"non-positive size: {len(prices)} {name} prices but {len(sizes)} sizes"
    for i, s in enumerate(sizes):
        if s.is_nan() or s <= ZERO:
            return f"non-positive size: {name} {i} holds {show(s)} shares"
    return ""


def _positive(value: Number | None, what: str, allow_zero: bool = False) -> Decimal | None:
    if value is None:
        return None
    d = dec(value, what)
    if not d.is_finite() or d < ZERO or (d == ZERO and not allow_zero):
        raise LedgerError(f"{what} {value!r} must be a positive number")
    return d
