"""A cohort's execution: the model its orders meet, spelled as an agent is (``KIND?key=value``),
and the venue the runner builds from it over the cohort's tape.

``fa`` (the default) is Forecaster Arena's rule, the broker's own path: every order whole at the
tape's price, no fee, and every log made before execution models existed keeps its bytes and
its cohort id. Any other model goes through ``ledger.venue``:

* ``mid``: Forecaster Arena's methodology v2, the midpoint at execution; on a price tape the
  tape's price is taken as that midpoint.
* ``touch``: the best ask for a buy, the best bid for a sell (``cap=true``: no more than the
  top level holds), from the cohort's recorded books (``--books``); on a price tape alone it
  needs ``spread_ticks=K``: a synthetic spread of K ticks around the tape's price, marked
  ``synthetic`` on every fill.
* ``l2``: a walk of the recorded order book, level by level; it needs books.

With books, an order meets the latest snapshot at or before its instant (plus ``latency``
milliseconds: the book standing when the order arrives) and never a later one.

Fees (``--fees``): ``none``, or ``auto``, Polymarket's dated schedule (``ledger.fees``) by each
market's category; unset, ``none`` for ``fa`` and ``mid`` (Forecaster Arena charges none) and
``auto`` for the book models. An unknown fee refuses the order with that reason.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import numpy as np

from ledger.execution import OrderBook, model_for
from ledger.fees import FeeRule, FeeSchedule, Side, fee_category
from ledger.venue import BookSource, Venue, quote_books
from replays.books import Books
from replays.errors import TapeError
from replays.tape import Tape

DEFAULT = "fa"
FEES = ("auto", "none")
BOOK_MODELS = ("touch", "l2")


def parse(spec: str) -> tuple[str, dict[str, Any]]:
    """``"touch?spread_ticks=2&cap=true"`` → ``("touch", {"spread_ticks": 2, "cap": True})``:
    true/false are booleans, whole numbers ints, anything else text (decimals stay exact)."""
    name, _, query = spec.partition("?")
    params: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        if value in ("true", "false"):
            params[key] = value == "true"
        elif value.lstrip("-").isdigit():
            params[key] = int(value)
        else:
            params[key] = value
    return name.strip(), params


def check(spec: str, books: bool = False) -> str:
    """``spec`` if it names a model that can run with (or without) recorded ``books``; else
    ValueError with one line saying why (the settings model turns it into a field error)."""
    try:
        name, params = parse(spec)
    except ValueError:
        raise ValueError(f"execution {spec!r} is not KIND or KIND?key=value&...") from None
    model_for(name, **params)  # an unknown model or parameter: LedgerError, one line
    if books:
        return spec
    if name == "l2":
        raise ValueError("execution 'l2' walks a recorded order book: give --books FILE")
    if name == "touch" and params.get("spread_ticks") is None:
        raise ValueError(
            "execution 'touch' on a price tape needs --books FILE, or spread_ticks=K (a "
            "synthetic spread of K ticks around the tape's price)"
        )
    return spec


def fees_for(spec: str, fees: str | None) -> str:
    """The fee setting a cohort runs with: the one given, else the model's default. ``fa`` is
    Forecaster Arena's rule, which has no fee: fees there are a ValueError saying so."""
    name = parse(spec)[0]
    if fees is None:
        return "auto" if name in BOOK_MODELS else "none"
    if fees not in FEES:
        raise ValueError(f"fees {fees!r} is not one of {', '.join(FEES)}")
    if name == DEFAULT and fees != "none":
        raise ValueError("execution 'fa' charges no fee (Forecaster Arena's rule): choose mid, "
                         "touch or l2 to pay fees")  # fmt: skip
    return fees


def venue(
    tape: Tape,
    spec: str,
    fees: str | None,
    books: Books | None = None,
    latency_ms: int = 0,
    shared: bool = False,
) -> Venue | None:
    """The venue of a cohort on ``tape`` (and its ``books``); None for ``fa`` without fees, the
    broker's own path."""
    name, params = parse(spec)
    chosen = fees_for(spec, fees)
    if name == DEFAULT and chosen == "none":
        return None
    schedule = FeeSchedule.from_option(chosen)
    category = {
        info.id: fee_category(info.category, info.tags) for info in tape.markets
    }  # looked up once per market, not per order

    def fee_rule(market: str, ts: int) -> FeeRule | None:
        return schedule.rule_for(category.get(market), ts) if chosen != "none" else None

    source = quote_books if books is None else recorded_books(tape, books)
    model = model_for(name, **params)
    return Venue(model=model, books=source, fees=fee_rule, latency_ms=latency_ms, shared=shared)


def recorded_books(tape: Tape, books: Books) -> BookSource:
    """The book of an outcome at an instant: the recorded snapshot at or before it, as the
    models read a book; None where the books hold nothing for it (the order is refused).

    The side the order takes is cut after the levels it could reach (shares at the best price:
    a buy's dollars over the best ask, a sell's shares; plus what was taken before, and one
    level more), and the other side after its best level, which is all a marketable order
    reads of it: 20 levels turned into exact decimals for every order cost 5 times the walk.
    The books were validated level by level when imported (``arena tapes validate``)."""
    outcomes = {info.id: info.outcomes for info in tape.markets}
    prefix = books.hash[:16]

    def book(
        market: str, outcome: int, ts_ms: int, price: float, side: Side, quantity: float,
        taken: float,
    ) -> OrderBook | None:  # fmt: skip
        try:
            k = books.token(market, outcomes[market][outcome])
        except (KeyError, IndexError, TapeError):
            return None
        snap = books.book_at(k, ts_ms)
        if snap is None:
            return None
        takes, other = (snap.ask_px, snap.ask_sz), (snap.bid_px, snap.bid_sz)
        if side == "sell":
            takes, other = other, takes
        px, sz = takes
        shares = quantity / px[0] if side == "buy" and px.size and px[0] > 0 else quantity
        reach = int(np.searchsorted(np.cumsum(sz), shares + taken)) + 2
        cut = [(px[:reach], sz[:reach]), (other[0][:1], other[1][:1])]
        (ask_px, ask_sz), (bid_px, bid_sz) = cut if side == "buy" else cut[::-1]
        return OrderBook.of(
            ts_ms=snap.ts,
            bids=list(zip(bid_px.tolist(), bid_sz.tolist(), strict=True)),
            asks=list(zip(ask_px.tolist(), ask_sz.tolist(), strict=True)),
            tick=snap.tick,
            token=f"{market}#{outcome}",
            id=f"{prefix}:{snap.row}",
        )

    return book
