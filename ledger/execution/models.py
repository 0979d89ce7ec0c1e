"""The execution models: what an order gets from a book under each rule.

Four models share one call, ``fill(order, book, cash, consumed) -> Fill | Rejection``, from the
benchmark's rule to a walk of the book:

* ``fa``: Forecaster Arena's rule, today's broker: the whole order at the given price (the
  book's quoted ``mid``, a tape point; else its levels' midpoint), no fee, no depth.
* ``mid``: Forecaster Arena's methodology v2: the CLOB midpoint; refused where none is known.
* ``touch``: a BUY at the best ask, a SELL at the best bid; with ``cap`` no more than the top
  level holds (a partial fill); with ``spread_ticks`` and only a mid known, a synthetic spread
  of that many ticks centred on the mid, and the fill marked ``synthetic``.
* ``l2``: a walk of the book, level by level at each level's price: FAK (what the book holds
  up to the limit; the rest cancelled) or FOK (all or nothing), a limit price or a slippage cap,
  tick and minimum-size checks, the fee per level, and the levels this agent already took from
  the same snapshot (``consumed``) left out.

Every model but ``fa`` takes a fee callable and keeps amount + fee within cash by buying less;
``fa`` fills whole or refuses. A model is a frozen dataclass of its parameters; ``params()`` and
``params_hash`` name it in a fill's record (the fee schedule is recorded by its own id).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Protocol

import msgspec

from ledger.errors import LedgerError
from ledger.execution.book import OrderBook, Reason, Rejection
from ledger.execution.checks import (
    STRUCTURAL,
    check_age,
    check_limit_tick,
    check_min_size,
    check_order,
    check_price,
    gate,
    no_price,
    read_cash,
    side_of,
)
from ledger.execution.exact import (
    INFINITY,
    ONE,
    ZERO,
    Number,
    add,
    dec,
    floor_quotient,
    half,
    money,
    mul,
    show,
    sub,
)
from ledger.execution.fills import (
    BookSide,
    Consumed,
    FeeUnknown,
    Fill,
    LevelKey,
    Order,
    TakerFee,
    no_fee,
)
from ledger.execution.walk import Level, Walk, walk_buy, walk_sell

Params = dict[str, str | int | bool | None]


class ExecutionModel(Protocol):
    """What the broker calls: one order against one snapshot.

    ``cash`` is the agent's cash before the order (None: not checked here, as the ``fa`` rule
    leaves it to the broker); ``consumed`` the shares already taken from levels (see
    ``Consumed``), None for none. The result is a ``Fill`` (with the new consumption map) or a
    ``Rejection``; bad input from the caller (an unreadable number, a book newer than the order)
    is a ``LedgerError``."""

    name: ClassVar[str]

    def params(self) -> Params: ...

    def fill(
        self,
        order: Order,
        book: OrderBook,
        cash: Number | None = None,
        consumed: Consumed | None = None,
    ) -> Fill | Rejection: ...


def params_hash(model: ExecutionModel) -> str:
    """sha256 of the model's name and parameters, as a fill would record it."""
    return hashlib.sha256(msgspec.json.encode(model.params(), order="sorted")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class _Model:
    """Parameters every model has: the book's age limit (``max_age_ms``: refuse a snapshot
    older than this at the order's ``at_ms``; None, no limit)."""

    name: ClassVar[str] = ""
    max_age_ms: int | None = None

    def params(self) -> Params:
        out: Params = {"model": self.name}
        for f in dataclasses.fields(self):
            if f.name == "fee":
                continue
            value = getattr(self, f.name)
            out[f.name] = str(value) if isinstance(value, Decimal) else value
        return out


@dataclass(frozen=True, kw_only=True)
class _Priced(_Model):
    """Parameters of the models that price beyond the ``fa`` rule: the taker ``fee``, and
    ``share_step``, which buys whole steps of shares (Polymarket sizes have two decimals:
    ``Decimal("0.01")``) where None buys the ``fa`` rule's unrounded quotient."""

    fee: TakerFee = no_fee
    share_step: Decimal | None = None


@dataclass(frozen=True, kw_only=True)
class FaModel(_Model):
    """Forecaster Arena's rule: the whole order at the given price; shares = amount / price,
    proceeds = shares × price, no fee. Pass ``cash=None`` to leave the cash check to the
    broker as today (it allows 1e-9 over); with cash, an amount above it is refused."""

    name: ClassVar[str] = "fa"

    def fill(
        self,
        order: Order,
        book: OrderBook,
        cash: Number | None = None,
        consumed: Consumed | None = None,
    ) -> Fill | Rejection:
        refused = check_order(order) or check_age(order, book, self.max_age_ms)
        if refused:
            return refused
        price = book.mid if book.mid is not None else book.midpoint()
        refused = check_price(order, price, "price")
        if refused or price is None:
            return refused or no_price("price")
        wallet = read_cash(cash)
        if order.kind == "buy" and wallet is not None and order.quantity > wallet:
            return Rejection(
                Reason.INSUFFICIENT_CASH,
                f"insufficient cash: bet {money(order.quantity)} exceeds cash {money(wallet)}",
            )
        levels = [Level(price, INFINITY, None)]
        return _execute(self.name, order, book, levels, None, no_fee, None, consumed)


@dataclass(frozen=True, kw_only=True)
class MidModel(_Priced):
    """Forecaster Arena v2: the CLOB midpoint, (best bid + best ask) / 2, or the quoted mid of
    a book without both sides; refused where the book is defective or no midpoint is known."""

    name: ClassVar[str] = "mid"

    def fill(
        self,
        order: Order,
        book: OrderBook,
        cash: Number | None = None,
        consumed: Consumed | None = None,
    ) -> Fill | Rejection:
        refused = check_order(order) or check_age(order, book, self.max_age_ms)
        if refused:
            return refused
        if book.has_levels():
            structural = [p for p in book.problems() if p.reason in STRUCTURAL]
            if structural:
                return structural[0]
        price = book.midpoint()
        refused = check_price(order, price, "midpoint")
        if refused or price is None:
            return refused or no_price("midpoint")
        levels = [Level(price, INFINITY, None)]
        return _execute(
            self.name, order, book, levels, read_cash(cash), self.fee, self.share_step, consumed
        )


@dataclass(frozen=True, kw_only=True)
class TouchModel(_Priced):
    """The best price on the side the order takes, for the whole order (infinite depth at the
    touch), or with ``cap`` for no more than the top level holds. With ``spread_ticks`` and a
    book that is only a quoted mid, the touch is made up: mid ± ``spread_ticks`` × tick / 2
    (the book's tick, else ``tick``), and the fill is ``synthetic``; a made-up ask at 1 or more
    (a bid at 0 or less) is no quote, and the order is refused for want of liquidity.
    ``allow_one_sided`` fills against a book whose other side is empty."""

    name: ClassVar[str] = "touch"
    cap: bool = False
    spread_ticks: int | None = None
    tick: Decimal = Decimal("0.01")
    allow_one_sided: bool = False

    def fill(
        self,
        order: Order,
        book: OrderBook,
        cash: Number | None = None,
        consumed: Consumed | None = None,
    ) -> Fill | Rejection:
        refused = check_order(order) or check_age(order, book, self.max_age_ms)
        if refused:
            return refused
        wallet = read_cash(cash)
        if self.spread_ticks is not None and not book.has_levels():
            mid = book.midpoint()
            refused = check_price(order, mid, "mid")
            if refused or mid is None:
                return refused or no_price("mid")
            spread = mul(Decimal(self.spread_ticks), book.tick or self.tick)
            buy = order.kind == "buy"
            price = add(mid, half(spread)) if buy else sub(mid, half(spread))
            if (buy and price >= ONE) or (not buy and price <= ZERO):
                # no one sells a share at $1 or more, nor buys one at $0: a quote that far
                # out is no quote (Polymarket's prices stop a tick inside [0, 1])
                side = "ask" if buy else "bid"
                return Rejection(
                    Reason.NO_LIQUIDITY,
                    f"no synthetic {side}: {self.spread_ticks} ticks around mid {show(mid)} "
                    f"reach {show(price)}",
                )
            levels = [Level(price, INFINITY, None)]
            return _execute(
                self.name,
                order,
                book,
                levels,
                wallet,
                self.fee,
                self.share_step,
                consumed,
                synthetic=True,
            )
        refused = _unmarketable(book, order, wallet, self.allow_one_sided)
        if refused:
            return refused
        own = _own(consumed, book)
        side = side_of(order)
        if self.cap:
            top = next((lv for lv in _remaining(book, side, own) if lv.size > ZERO), None)
            if top is None:
                return _used_up(side)
            levels = [top]
        else:
            prices = book.ask_px if side == "ask" else book.bid_px
            levels = [Level(prices[0], INFINITY, 0)]
        return _execute(
            self.name,
            order,
            book,
            levels,
            wallet,
            self.fee,
            self.share_step,
            consumed,
            record=self.cap,
        )


@dataclass(frozen=True, kw_only=True)
class L2Model(_Priced):
    """A walk of the book, each level at its own price, less what this agent already took
    from the snapshot. FAK by default; ``fok`` refuses an order the book cannot fill whole
    (within the limit and the cash). ``slippage`` caps how far past the touch the walk may go
    (in price: ``Decimal("0.02")`` is 2¢), besides the order's own limit. An order's limit must
    be on the book's tick, and the order at least the book's minimum size (a BUY: the shares its
    dollars buy at the best ask). ``allow_one_sided`` fills against a book whose other side is
    empty."""

    name: ClassVar[str] = "l2"
    fok: bool = False
    slippage: Decimal | None = None
    allow_one_sided: bool = False

    def fill(
        self,
        order: Order,
        book: OrderBook,
        cash: Number | None = None,
        consumed: Consumed | None = None,
    ) -> Fill | Rejection:
        refused = check_order(order) or check_age(order, book, self.max_age_ms)
        if refused:
            return refused
        wallet = read_cash(cash)
        refused = _unmarketable(book, order, wallet, self.allow_one_sided)
        if refused:
            return refused
        side = side_of(order)
        levels = _remaining(book, side, _own(consumed, book))
        limit = order.limit
        if self.slippage is not None:
            touch = levels[0].price
            if order.kind == "buy":
                cap = add(touch, self.slippage)
                limit = cap if limit is None else min(limit, cap)
            else:
                cap = sub(touch, self.slippage)
                limit = cap if limit is None else max(limit, cap)
        return _execute(
            self.name,
            msgspec.structs.replace(order, limit=limit),
            book,
            levels,
            wallet,
            self.fee,
            self.share_step,
            consumed,
            record=True,
            fok=self.fok,
        )


MODELS: dict[str, type[FaModel | MidModel | TouchModel | L2Model]] = {
    model.name: model for model in (FaModel, MidModel, TouchModel, L2Model)
}


def model_for(name: str, **params: Any) -> ExecutionModel:
    """The model called ``name`` with ``params``; an unknown name or parameter is a one-line
    ``LedgerError``. Decimal parameters may be strings or numbers, a float read as it prints
    (a setting of 0.01 means 0.01, not the double nearest it)."""
    try:
        cls = MODELS[name]
    except KeyError:
        known = ", ".join(MODELS)
        raise LedgerError(f"unknown execution model {name!r} (known: {known})") from None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - set(fields))
    if unknown:
        allowed = ", ".join(sorted(fields))
        raise LedgerError(f"model {name!r} has no parameter {unknown[0]!r} (it has: {allowed})")
    for key in ("share_step", "slippage", "tick"):
        value = params.get(key)
        if value is not None:
            params[key] = dec(repr(value) if isinstance(value, float) else value, key)
    model: ExecutionModel = cls(**params)
    return model


# -- the steps of a fill ------------------------------------------------------------------


def _unmarketable(
    book: OrderBook, order: Order, wallet: Decimal | None, allow_one_sided: bool
) -> Rejection | None:
    """Why a marketable order cannot meet ``book``'s levels (a defective or one-sided book, a
    limit off the tick, an order under the minimum size), or None: what ``touch`` and ``l2``
    both ask before they take a level."""
    return (
        gate(book, order, allow_one_sided)
        or check_limit_tick(order, book)
        or check_min_size(order, book, wallet)
    )


def _own(consumed: Consumed | None, book: OrderBook) -> dict[LevelKey, Decimal]:
    """The entries of ``consumed`` that belong to ``book``'s snapshot."""
    if not consumed:
        return {}
    return {key: shares for key, shares in consumed.items() if key[0] == book.id}


def _remaining(book: OrderBook, side: BookSide, own: Mapping[LevelKey, Decimal]) -> list[Level]:
    """The levels of one side, best first, each less what ``own`` has taken from it."""
    prices, sizes = (book.ask_px, book.ask_sz) if side == "ask" else (book.bid_px, book.bid_sz)
    levels = []
    for i, (price, size) in enumerate(zip(prices, sizes, strict=True)):
        taken = own.get((book.id, side, price), ZERO) if own else ZERO  # no key to hash
        levels.append(Level(price, max(sub(size, taken), ZERO), i))
    return levels


def _used_up(side: BookSide) -> Rejection:
    return Rejection(
        Reason.NO_LIQUIDITY,
        f"no liquidity: this snapshot's {side}s are used up by earlier fills",
    )


def _execute(
    model: str,
    order: Order,
    book: OrderBook,
    levels: list[Level],
    cash: Decimal | None,
    fee: TakerFee,
    step: Decimal | None,
    consumed: Consumed | None,
    *,
    synthetic: bool = False,
    record: bool = False,
    fok: bool = False,
) -> Fill | Rejection:
    """Walk ``levels`` for ``order`` and make the fill, or say why there is none. ``record``
    adds the legs to the consumption map (models that take finite levels)."""
    side = side_of(order)
    requested = order.quantity
    try:
        if order.kind == "buy":
            walk = walk_buy(levels, requested, cash=cash, limit=order.limit, fee=fee, step=step)
        else:
            shares = requested
            if step is not None:
                shares = mul(Decimal(floor_quotient(requested, ONE, step)), step)
                if shares <= ZERO:
                    return Rejection(
                        Reason.BELOW_MIN_SIZE,
                        f"below minimum size: {show(requested)} shares is less than one "
                        f"{show(step)}-share step",
                    )
            walk = walk_sell(levels, shares, limit=order.limit, fee=fee)
    except FeeUnknown as exc:
        return Rejection(Reason.FEE_UNKNOWN, f"unknown fee: {exc}")
    refused = _refusal(order, walk, levels, cash, fok)
    if refused:
        return refused
    own = _own(consumed, book)
    if record:
        for leg in walk.legs:
            if leg.level is not None:
                key: LevelKey = (book.id, side, leg.price)
                own[key] = add(own.get(key, ZERO), leg.shares)
    return Fill(
        kind=order.kind,
        legs=walk.legs,
        requested=requested,
        unfilled=walk.left,
        stop=walk.stop,
        model=model,
        book_id=book.id,
        synthetic=synthetic,
        consumed=own,
    )


def _refusal(
    order: Order, walk: Walk, levels: list[Level], cash: Decimal | None, fok: bool
) -> Rejection | None:
    side = side_of(order)
    filled = add(*(leg.amount for leg in walk.legs))
    if not walk.legs:
        if walk.stop == "limit":
            best = next((lv.price for lv in levels if lv.size > ZERO), levels[0].price)
            way = "above" if order.kind == "buy" else "below"
            return Rejection(
                Reason.LIMIT_UNREACHABLE,
                f"limit not reachable: the best {side} {show(best)} is {way} the limit "
                f"{show(order.limit or ZERO)}",
            )
        if walk.stop == "depth":
            return _used_up(side)
        if walk.stop == "cash":
            return Rejection(
                Reason.INSUFFICIENT_CASH,
                f"insufficient cash: {money(cash or ZERO)} does not pay for a share at "
                f"{show(levels[0].price)} with its fee",
            )
        return Rejection(
            Reason.BELOW_MIN_SIZE,
            f"below minimum size: {money(order.quantity)} buys no whole share step at "
            f"{show(levels[0].price)}",
        )
    if fok and walk.stop in ("depth", "limit") and walk.left > ZERO:
        within = f" up to the limit {show(order.limit)}" if order.limit is not None else ""
        if order.kind == "buy":
            holds = f"{money(filled)} of the {money(order.quantity)} asked"
        else:
            got = add(*(leg.shares for leg in walk.legs))
            holds = f"{show(got)} of the {show(order.quantity)} shares asked"
        return Rejection(
            Reason.FOK_UNFILLABLE,
            f"FOK not fully fillable: the book holds {holds}{within}",
        )
    if order.kind == "sell" and cash is not None:
        fees = add(*(leg.fee for leg in walk.legs))
        if add(cash, filled) < fees:
            return Rejection(
                Reason.INSUFFICIENT_CASH,
                f"insufficient cash: the fee {money(fees)} exceeds cash {money(cash)} plus "
                f"proceeds {money(filled)}",
            )
    return None
