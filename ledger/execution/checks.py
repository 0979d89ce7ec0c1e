"""The checks a model makes before it walks: the order itself, the book's age, its defects
as they matter to the order, the limit's tick, the venue's minimum size, a price's range."""

from __future__ import annotations

from decimal import Decimal

from ledger.errors import LedgerError
from ledger.execution.book import OrderBook, Reason, Rejection
from ledger.execution.exact import ONE, ZERO, Number, dec, money, mul, on_grid, show
from ledger.execution.fills import BookSide, Order

STRUCTURAL = frozenset(
    {
        Reason.BAD_PRICE,
        Reason.NON_POSITIVE_SIZE,
        Reason.UNORDERED,
        Reason.OFF_TICK,
        Reason.CROSSED,
        Reason.LOCKED,
    }
)


def side_of(order: Order) -> BookSide:
    """The side of the book an order takes from: a BUY the asks, a SELL the bids."""
    return "ask" if order.kind == "buy" else "bid"


def read_cash(cash: Number | None) -> Decimal | None:
    """The cash before the order, exactly; None when the caller checks it itself."""
    if cash is None:
        return None
    wallet = dec(cash, "cash")
    if wallet.is_nan():
        raise LedgerError("cash is NaN")
    return wallet


def check_order(order: Order) -> Rejection | None:
    """A quantity that is not a positive number, or a limit outside (0, 1]."""
    what = "amount" if order.kind == "buy" else "shares"
    q = order.amount if order.kind == "buy" else order.shares
    if q is None or not q.is_finite() or q <= ZERO:
        return Rejection(
            Reason.INVALID_ORDER, f"invalid order: {what} {q} must be a positive number"
        )
    limit = order.limit
    if limit is not None and not (limit.is_finite() and ZERO < limit <= ONE):
        return Rejection(
            Reason.INVALID_ORDER, f"invalid order: limit price {limit} is outside (0, 1]"
        )
    return None


def check_age(order: Order, book: OrderBook, max_age_ms: int | None) -> Rejection | None:
    """A snapshot older than ``max_age_ms`` when the order meets it (exactly the limit is
    fresh enough). A snapshot newer than the order is the caller's look-ahead: an error."""
    if max_age_ms is None:
        return None
    if order.at_ms is None:
        raise LedgerError("a book age limit needs the order's at_ms (when it meets the book)")
    age = order.at_ms - book.ts_ms
    if age < 0:
        raise LedgerError(
            f"book {book.id[:12]} at {book.ts_ms} ms is newer than the order at "
            f"{order.at_ms} ms: a fill may only read books that already exist"
        )
    if age > max_age_ms:
        return Rejection(
            Reason.STALE,
            f"stale book: the snapshot is {age / 1000:g} s old when the order arrives, "
            f"older than the {max_age_ms / 1000:g} s limit",
        )
    return None


def no_price(what: str) -> Rejection:
    return Rejection(Reason.NO_PRICE, f"no price: the book has no {what} at this instant")


def check_price(order: Order, price: Decimal | None, what: str) -> Rejection | None:
    """No price, or one a BUY cannot pay (outside (0, 1]) or a SELL cannot take ([0, 1])."""
    if price is None:
        return no_price(what)
    low_ok = price > ZERO if order.kind == "buy" else price >= ZERO
    if not (price.is_finite() and low_ok and price <= ONE):
        bounds = "(0, 1]" if order.kind == "buy" else "[0, 1]"
        return Rejection(Reason.BAD_PRICE, f"bad price: {what} {show(price)} is outside {bounds}")
    return None


def gate(book: OrderBook, order: Order, allow_one_sided: bool) -> Rejection | None:
    """The first defect of ``book`` that stops ``order``: a structural one, then an empty
    book, then no level on the side the order takes, then (unless allowed) none on the other."""
    problems = book.problems()
    structural = [p for p in problems if p.reason in STRUCTURAL]
    if structural:
        return structural[0]
    if not book.has_levels():
        return Rejection(Reason.EMPTY, "empty book: no bids and no asks")
    side = side_of(order)
    if not (book.ask_px if side == "ask" else book.bid_px):
        return Rejection(
            Reason.NO_LIQUIDITY, f"no liquidity: the book has no {side}s to {order.kind} into"
        )
    if not allow_one_sided:
        one_sided = [p for p in problems if p.reason == Reason.ONE_SIDED]
        if one_sided:
            return one_sided[0]
    return None


def check_limit_tick(order: Order, book: OrderBook) -> Rejection | None:
    """A limit price off the book's tick grid (as it prints)."""
    if order.limit is None or book.tick is None or on_grid(order.limit, book.tick):
        return None
    return Rejection(
        Reason.OFF_TICK,
        f"off tick: limit price {show(order.limit)} is not on the book's {show(book.tick)} tick",
    )


def check_min_size(order: Order, book: OrderBook, cash: Decimal | None) -> Rejection | None:
    """An order smaller than the book's minimum size: a SELL of fewer shares, a BUY whose
    dollars (no more than the cash) buy fewer shares even at the best ask."""
    least = book.min_size
    if least is None or least <= ZERO:
        return None
    if order.kind == "sell":
        if order.quantity < least:
            return Rejection(
                Reason.BELOW_MIN_SIZE,
                f"below minimum size: {show(order.quantity)} shares, the book's minimum is "
                f"{show(least)}",
            )
        return None
    dollars = order.quantity
    if cash is not None and cash > ZERO:  # no cash at all is the walk's to say
        dollars = min(dollars, cash)
    ask = book.ask_px[0]
    if dollars < mul(least, ask):
        return Rejection(
            Reason.BELOW_MIN_SIZE,
            f"below minimum size: {money(dollars)} buys fewer than the book's minimum of "
            f"{show(least)} shares at the best ask {show(ask)}",
        )
    return None
