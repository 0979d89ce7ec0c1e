"""The CLOB market channel as order books: its messages checked, each token's book kept level by
level, and a REST ``/book`` answer checked against the hash Polymarket puts in it.

Polymarket's market WebSocket sends a full ``book`` when a client subscribes (and after a trade
that touches the book), then ``price_change`` messages that each set one level's new total size
(``"0"`` removes the level), ``tick_size_change`` when the tick moves (prices past 0.96 or under
0.04), and ``last_trade_price``. A recorder that keeps every token's book and writes a snapshot
after each change has the book at every instant it changed, which is what a ``.books`` file
holds. Prices and sizes stay :class:`~decimal.Decimal` here, as the venue sends them, so a
snapshot written and read back is the book to the last digit.

Everything a server sends is untrusted: a message is size-capped before it is parsed, every
number must be a finite decimal in range, and a book may hold at most ``MAX_LEVELS`` levels a
side. A message that breaks a rule is a :class:`StreamError` naming the message and the field,
which the recorder counts and logs without stopping (a live feed has bad moments).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from replays.errors import TapeError

MAX_MESSAGE_BYTES = 4 << 20
"""The largest WebSocket message read (a 20-level book of one token is about 2 KB)."""
MAX_LEVELS = 5_000
"""Levels a side a book may hold; a feed past it is refused rather than grown without bound."""
MAX_EVENTS = 10_000
"""Events one message (a JSON array) may carry."""
EVENT_TYPES = ("book", "price_change", "tick_size_change", "last_trade_price")
"""The market channel's events a recorder keeps; others (``best_bid_ask``, ``new_market``, ...)
are counted and passed over."""

DecimalLevel = tuple[Decimal, Decimal]


class StreamError(TapeError):
    """A market-channel message or a ``/book`` answer that breaks the documented shape."""


def _decimal(value: Any, what: str, *, price: bool) -> Decimal:
    """A price in (0, 1) or a size >= 0, from the decimal string the venue sends (numbers are
    taken too); anything else (NaN, infinities, exponents past the tick grid's reach) refused."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise StreamError(f"{what}: expected a decimal string, got {type(value).__name__}")
    text = str(value)
    if len(text) > 40:
        raise StreamError(f"{what}: a number of {len(text)} characters")
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise StreamError(f"{what}: not a number: {text[:20]!r}") from None
    if not number.is_finite():
        raise StreamError(f"{what}: not finite: {text!r}")
    if price and not Decimal(0) < number < Decimal(1):
        raise StreamError(f"{what}: price {text} outside (0, 1)")
    if not price and (number < 0 or number > Decimal(10) ** 15):
        raise StreamError(f"{what}: size {text} outside [0, 1e15]")
    return number


def _text(event: Mapping[str, Any], key: str, what: str) -> str:
    value = event.get(key)
    if not isinstance(value, str) or not value or len(value) > 200:
        raise StreamError(f"{what}: {key!r} must be a non-empty string")
    return value


def _timestamp(event: Mapping[str, Any], what: str) -> int:
    value = event.get("timestamp")
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not text.isdigit() or len(text) > 16:
        raise StreamError(f"{what}: 'timestamp' must be unix milliseconds, got {value!r}")
    return int(text)


def _levels(raw: Any, what: str) -> list[DecimalLevel]:
    if not isinstance(raw, list):
        raise StreamError(f"{what}: levels must be a list")
    if len(raw) > MAX_LEVELS:
        raise StreamError(f"{what}: {len(raw)} levels (at most {MAX_LEVELS})")
    levels = []
    for i, level in enumerate(raw):
        if not isinstance(level, Mapping):
            raise StreamError(f"{what}[{i}]: a level must be an object with price and size")
        levels.append(
            (
                _decimal(level.get("price"), f"{what}[{i}].price", price=True),
                _decimal(level.get("size"), f"{what}[{i}].size", price=False),
            )
        )
    return levels


def parse_message(raw: str | bytes) -> list[dict[str, Any]]:
    """One WebSocket message → its events (the channel sends an object or an array of them).

    ``PONG`` and other non-JSON keep-alives are no events."""
    if len(raw) > MAX_MESSAGE_BYTES:
        raise StreamError(f"a message of {len(raw)} bytes (at most {MAX_MESSAGE_BYTES})")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if text.strip().upper() in ("PONG", "PING", ""):
        return []
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        raise StreamError(f"a message that is not JSON: {text[:40]!r}") from None
    events = decoded if isinstance(decoded, list) else [decoded]
    if len(events) > MAX_EVENTS:
        raise StreamError(f"a message of {len(events)} events (at most {MAX_EVENTS})")
    if not all(isinstance(e, dict) for e in events):
        raise StreamError("a message whose events are not objects")
    return events


@dataclass
class TokenBook:
    """One outcome token's book as the feed last left it (price → total size per side)."""

    market: str
    bids: dict[Decimal, Decimal] = field(default_factory=dict)
    asks: dict[Decimal, Decimal] = field(default_factory=dict)
    tick: Decimal | None = None
    ts: int = 0

    def levels(self) -> tuple[list[DecimalLevel], list[DecimalLevel]]:
        """Bids and asks best first (bids high to low, asks low to high), empty levels gone."""
        bids = sorted(((p, s) for p, s in self.bids.items() if s > 0), reverse=True)
        asks = sorted((p, s) for p, s in self.asks.items() if s > 0)
        return bids, asks

    def replace(self, bids: Sequence[DecimalLevel], asks: Sequence[DecimalLevel]) -> None:
        self.bids = {p: s for p, s in bids if s > 0}
        self.asks = {p: s for p, s in asks if s > 0}


@dataclass(frozen=True)
class BookRecord:
    """A token's book after a change: what the recorder writes, one JSON line each.

    ``via`` is ``ws`` (the market channel) or ``rest`` (a ``/book`` check that found the kept
    book had drifted, and replaced it)."""

    token: str
    market: str
    ts: int
    tick: str | None
    bids: tuple[tuple[str, str], ...]
    asks: tuple[tuple[str, str], ...]
    via: str = "ws"

    def content(self) -> tuple[Any, ...]:
        """What the book is, apart from when: two records with one content are one book."""
        return (self.tick, self.bids, self.asks)

    def as_json(self) -> dict[str, Any]:
        return {
            "token": self.token, "market": self.market, "ts": self.ts, "tick": self.tick,
            "bids": [list(x) for x in self.bids], "asks": [list(x) for x in self.asks],
            "via": self.via,
        }  # fmt: skip


def _record(token: str, book: TokenBook, via: str) -> BookRecord:
    bids, asks = book.levels()
    return BookRecord(
        token=token,
        market=book.market,
        ts=book.ts,
        tick=None if book.tick is None else str(book.tick),
        bids=tuple((str(p), str(s)) for p, s in bids),
        asks=tuple((str(p), str(s)) for p, s in asks),
        via=via,
    )


@dataclass
class FeedCounts:
    """What the feed sent, by kind: the recorder's summary and its coverage of the feed."""

    books: int = 0
    price_changes: int = 0
    tick_changes: int = 0
    trades: int = 0
    other: int = 0
    foreign: int = 0  # events for a token not subscribed
    refused: int = 0  # events that broke the documented shape
    reasons: dict[str, int] = field(default_factory=dict)

    def refuse(self, error: StreamError) -> None:
        self.refused += 1
        reason = str(error).split(":")[-1].strip()[:60]
        self.reasons[reason] = self.reasons.get(reason, 0) + 1


class BookState:
    """The books of the subscribed tokens, moved by the feed's events.

    ``apply`` returns the records of the tokens an event changed; a ``price_change`` for a
    token with no ``book`` yet is refused (a delta needs the book it applies to)."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        """``tokens``: token id → its market (condition id)."""
        self.tokens = dict(tokens)
        self.books: dict[str, TokenBook] = {}
        self.counts = FeedCounts()
        self.last_trade: dict[str, tuple[int, str, str, str]] = {}
        self.pending_ticks: dict[str, Decimal] = {}

    def apply_message(self, raw: str | bytes) -> Iterator[BookRecord]:
        """Every record one message makes; a refused event is counted and passed over."""
        try:
            events = parse_message(raw)
        except StreamError as error:
            self.counts.refuse(error)
            return
        for event in events:
            try:
                yield from self.apply(event)
            except StreamError as error:
                self.counts.refuse(error)

    def apply(self, event: Mapping[str, Any]) -> list[BookRecord]:
        kind = event.get("event_type")
        if kind == "book":
            return self._book(event)
        if kind == "price_change":
            return self._price_change(event)
        if kind == "tick_size_change":
            return self._tick_change(event)
        if kind == "last_trade_price":
            self._trade(event)
            return []
        self.counts.other += 1
        return []

    def _known(self, event: Mapping[str, Any], what: str) -> str | None:
        token = _text(event, "asset_id", what)
        if token not in self.tokens:
            self.counts.foreign += 1
            return None
        return token

    def _book(self, event: Mapping[str, Any]) -> list[BookRecord]:
        what = "book"
        token = self._known(event, what)
        if token is None:
            return []
        ts = _timestamp(event, what)
        # the channel's documentation names the sides bids/asks; its older pages buys/sells
        bids = _levels(event.get("bids", event.get("buys", [])), f"{what}.bids")
        asks = _levels(event.get("asks", event.get("sells", [])), f"{what}.asks")
        book = self.books.setdefault(
            token, TokenBook(market=self.tokens[token], tick=self.pending_ticks.pop(token, None))
        )
        book.replace(bids, asks)
        book.ts = max(book.ts, ts)
        self.counts.books += 1
        return [_record(token, book, "ws")]

    def _price_change(self, event: Mapping[str, Any]) -> list[BookRecord]:
        what = "price_change"
        ts = _timestamp(event, what)
        changes = event.get("price_changes")
        if not isinstance(changes, list) or len(changes) > MAX_LEVELS:
            raise StreamError(f"{what}: 'price_changes' must be a list of at most {MAX_LEVELS}")
        touched: dict[str, None] = {}
        for i, change in enumerate(changes):
            where = f"{what}.price_changes[{i}]"
            if not isinstance(change, Mapping):
                raise StreamError(f"{where}: not an object")
            token = self._known(change, where)
            if token is None:
                continue
            book = self.books.get(token)
            if book is None:
                raise StreamError(f"{where}: a change before the token's first book")
            price = _decimal(change.get("price"), f"{where}.price", price=True)
            size = _decimal(change.get("size"), f"{where}.size", price=False)
            side = change.get("side")
            if side not in ("BUY", "SELL"):
                raise StreamError(f"{where}: side must be BUY or SELL, got {side!r}")
            levels = book.bids if side == "BUY" else book.asks
            if size == 0:
                levels.pop(price, None)
            else:
                if price not in levels and len(levels) >= MAX_LEVELS:
                    raise StreamError(f"{where}: the book would pass {MAX_LEVELS} levels")
                levels[price] = size
            book.ts = max(book.ts, ts)
            touched[token] = None
        self.counts.price_changes += 1
        return [_record(token, self.books[token], "ws") for token in touched]

    def _tick_change(self, event: Mapping[str, Any]) -> list[BookRecord]:
        what = "tick_size_change"
        token = self._known(event, what)
        if token is None:
            return []
        ts = _timestamp(event, what)
        tick = _decimal(event.get("new_tick_size"), f"{what}.new_tick_size", price=True)
        self.counts.tick_changes += 1
        book = self.books.get(token)
        if book is None:  # no book yet: the tick waits for it in the pending ticks
            self.pending_ticks[token] = tick
            return []
        book.tick = tick
        book.ts = max(book.ts, ts)
        return [_record(token, book, "ws")]

    def _trade(self, event: Mapping[str, Any]) -> None:
        what = "last_trade_price"
        token = self._known(event, what)
        if token is None:
            return
        ts = _timestamp(event, what)
        price = _decimal(event.get("price"), f"{what}.price", price=True)
        size = _decimal(event.get("size", "0"), f"{what}.size", price=False)
        side = str(event.get("side", ""))[:4]
        self.last_trade[token] = (ts, str(price), str(size), side)
        self.counts.trades += 1

    def resync(self, token: str, rest: RestBook) -> BookRecord | None:
        """A ``/book`` answer checked against the kept book: the record that replaces it when
        they differ (the feed dropped something), else None."""
        book = self.books.setdefault(token, TokenBook(market=self.tokens[token]))
        # a tick the feed never stated is learnt quietly; one that differs was a change missed
        missed_tick = None not in (book.tick, rest.tick) and book.tick != rest.tick
        if rest.tick is not None:
            book.tick = rest.tick
        if book.levels() == (rest.bids, rest.asks) and not missed_tick:
            return None
        book.replace(rest.bids, rest.asks)
        book.ts = max(book.ts, rest.ts)
        return _record(token, book, "rest")


@dataclass(frozen=True)
class RestBook:
    """A ``GET /book`` answer, checked: levels best first, and whether its hash held."""

    token: str
    market: str
    ts: int
    tick: Decimal | None
    bids: list[DecimalLevel]
    asks: list[DecimalLevel]
    hash_ok: bool


def book_hash(raw: Mapping[str, Any]) -> str:
    """The hash Polymarket's CLOB puts in a ``/book`` answer: SHA-1 of the answer as compact
    JSON, its fields in the server's order, with ``hash`` set to the empty string (the
    algorithm of Polymarket's own client, ``py-clob-client``'s ``utilities.py``)."""
    payload = {
        "market": raw.get("market"),
        "asset_id": raw.get("asset_id"),
        "timestamp": raw.get("timestamp"),
        "hash": "",
        "bids": [{"price": b.get("price"), "size": b.get("size")} for b in raw.get("bids") or []],
        "asks": [{"price": a.get("price"), "size": a.get("size")} for a in raw.get("asks") or []],
        "min_order_size": raw.get("min_order_size"),
        "tick_size": raw.get("tick_size"),
        "neg_risk": raw.get("neg_risk"),
        "last_trade_price": raw.get("last_trade_price"),
    }
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def parse_rest_book(raw: Any) -> RestBook:
    """A ``/book`` answer → a :class:`RestBook`. The endpoint lists bids ascending and asks
    descending (the best level *last*); both are turned best first. A missing or wrong hash is
    recorded in ``hash_ok``, not refused: the book may still be right, and the count says how
    often it was not provably so."""
    what = "/book"
    if not isinstance(raw, Mapping):
        raise StreamError(f"{what}: the answer is not an object")
    token = _text(raw, "asset_id", what)
    market = _text(raw, "market", what)
    ts = _timestamp(raw, what)
    bids = _levels(raw.get("bids", []), f"{what}.bids")
    asks = _levels(raw.get("asks", []), f"{what}.asks")
    tick_raw = raw.get("tick_size")
    tick = None if tick_raw is None else _decimal(tick_raw, f"{what}.tick_size", price=True)
    stated = raw.get("hash")
    hash_ok = isinstance(stated, str) and stated.lower().removeprefix("0x") == book_hash(raw)
    return RestBook(
        token=token,
        market=market,
        ts=ts,
        tick=tick,
        bids=sorted(((p, s) for p, s in bids if s > 0), reverse=True),
        asks=sorted((p, s) for p, s in asks if s > 0),
        hash_ok=hash_ok,
    )
