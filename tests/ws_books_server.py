"""A fake Polymarket market channel (WebSocket) and CLOB (``/markets/{id}``, ``/book``) on
127.0.0.1, replaying real books in the documented message shapes.

The script is made from the bundled BTC 15-minute books (real 20-level snapshots): a token's
first snapshot is a ``book`` event, each later one the ``price_change`` events that turn the
previous book into it (a level's new total size, ``"0"`` to remove it), with a
``last_trade_price`` now and then. A test can make the server drop the connection before given
events (the client must reconnect; the server then sends every book again, as Polymarket does
on subscribe), lose events silently (a REST check must repair the book), and read what it sent.
It is a helper for tests, not a test module.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.sync.server import ServerConnection, serve

from replays.book_stream import book_hash
from replays.bookfile import load_books
from replays.samples import books_file
from tests.local_server import LocalServer

Level = tuple[str, str]


@dataclass
class TokenScript:
    token: str
    market: str
    outcome: str
    snapshots: list[tuple[int, list[Level], list[Level]]]  # (ts, bids best first, asks best first)


def sample_tokens(market_index: int = 0, snapshots: int = 30) -> list[TokenScript]:
    """The first ``snapshots`` books of both tokens of one market of the bundled sample."""
    books = load_books(books_file("sample-books"))
    market = list(books.markets)[market_index]
    scripts = []
    for k in books.markets[market]:
        t = books.tokens[k]
        rows = []
        for row in range(books.rows(k).start, books.rows(k).start + snapshots):
            snap = books.snapshot(row)
            bids = [
                (repr(float(p)), repr(float(s)))
                for p, s in zip(snap.bid_px, snap.bid_sz, strict=True)
            ]
            asks = [
                (repr(float(p)), repr(float(s)))
                for p, s in zip(snap.ask_px, snap.ask_sz, strict=True)
            ]
            rows.append((int(snap.ts), bids, asks))
        scripts.append(TokenScript(t.token, t.market, t.outcome, rows))
    return scripts


def _changes(token: str, old: list[Level], new: list[Level], side: str) -> list[dict[str, str]]:
    before, after = dict(old), dict(new)
    changed = []
    for price in sorted(set(before) | set(after), key=float):
        if before.get(price) != after.get(price):
            changed.append({"asset_id": token, "price": price, "size": after.get(price, "0"),
                            "side": side, "hash": "0" * 40})  # fmt: skip
    return changed


def script_events(tokens: Iterable[TokenScript]) -> list[dict[str, Any]]:
    """The feed, in time order: a ``book`` first per token, then ``price_change`` deltas."""
    timed: list[tuple[int, int, dict[str, Any]]] = []
    for order, t in enumerate(tokens):
        previous: tuple[list[Level], list[Level]] | None = None
        for i, (ts, bids, asks) in enumerate(t.snapshots):
            if previous is None:
                event = {"event_type": "book", "asset_id": t.token, "market": t.market,
                         "bids": [{"price": p, "size": s} for p, s in reversed(bids)],
                         "asks": [{"price": p, "size": s} for p, s in reversed(asks)],
                         "timestamp": str(ts), "hash": "0x0"}  # fmt: skip
            else:
                changes = _changes(t.token, previous[0], bids, "BUY")
                changes += _changes(t.token, previous[1], asks, "SELL")
                event = {"event_type": "price_change", "market": t.market,
                         "price_changes": changes, "timestamp": str(ts)}  # fmt: skip
            timed.append((ts, order, event))
            if i % 7 == 3 and asks:
                trade = {"event_type": "last_trade_price", "asset_id": t.token,
                         "market": t.market, "price": asks[0][0], "size": "5", "side": "BUY",
                         "fee_rate_bps": "0", "timestamp": str(ts)}  # fmt: skip
                timed.append((ts, order, trade))
            previous = (bids, asks)
    timed.sort(key=lambda x: (x[0], x[1]))
    return [event for _, _, event in timed]


@dataclass
class FeedServer:
    """The market channel and the CLOB, serving ``tokens`` as a script of events."""

    tokens: list[TokenScript]
    drop_before: set[int] = field(default_factory=set)  # close the socket before these events
    lose: set[int] = field(default_factory=set)  # never send these events (a lost message)
    events: list[dict[str, Any]] = field(init=False)
    position: int = 0
    connections: int = 0
    sent: list[int] = field(default_factory=list)  # script positions sent, in order
    book_requests: int = 0

    def __post_init__(self) -> None:
        self.events = script_events(self.tokens)
        self._lock = threading.Lock()
        self._books: dict[str, tuple[int, dict[str, str], dict[str, str]]] = {}
        self._dropped: set[int] = set()

    def _advance(self, event: dict[str, Any]) -> None:
        """The server's own books, moved by an event (sent or lost): what ``/book`` serves."""
        ts = int(event["timestamp"])
        if event["event_type"] == "book":
            self._books[event["asset_id"]] = (
                ts,
                {lv["price"]: lv["size"] for lv in event["bids"]},
                {lv["price"]: lv["size"] for lv in event["asks"]},
            )
        elif event["event_type"] == "price_change":
            for change in event["price_changes"]:
                _, bids, asks = self._books[change["asset_id"]]
                side = bids if change["side"] == "BUY" else asks
                if change["size"] == "0":
                    side.pop(change["price"], None)
                else:
                    side[change["price"]] = change["size"]
                self._books[change["asset_id"]] = (ts, bids, asks)

    def rest_book(self, token: str) -> dict[str, Any]:
        """``GET /book``'s shape: bids ascending, asks descending (best last), a real hash."""
        market = next(t.market for t in self.tokens if t.token == token)
        ts, bids, asks = self._books[token]
        body: dict[str, Any] = {
            "market": market, "asset_id": token, "timestamp": str(ts), "hash": "",
            "bids": [{"price": p, "size": bids[p]} for p in sorted(bids, key=float)],
            "asks": [{"price": p, "size": asks[p]} for p in sorted(asks, key=float, reverse=True)],
            "min_order_size": "5", "tick_size": "0.01", "neg_risk": False,
            "last_trade_price": "0.5",
        }  # fmt: skip
        body["hash"] = book_hash(body)
        return body

    def _resend_books(self, ws: ServerConnection, wanted: list[str]) -> None:
        books = []
        for token in wanted:
            if token in self._books:
                ts, bids, asks = self._books[token]
                market = next(t.market for t in self.tokens if t.token == token)
                books.append({"event_type": "book", "asset_id": token, "market": market,
                              "bids": [{"price": p, "size": s} for p, s in bids.items()],
                              "asks": [{"price": p, "size": s} for p, s in asks.items()],
                              "timestamp": str(ts), "hash": "0x0"})  # fmt: skip
        if books:
            ws.send(json.dumps(books))

    def handle(self, ws: ServerConnection) -> None:
        subscription = json.loads(ws.recv(timeout=5))
        wanted = list(subscription["assets_ids"])
        assert subscription["type"] == "market"
        with self._lock:
            self.connections += 1
            self._resend_books(ws, wanted)
        while True:
            with self._lock:
                if self.position >= len(self.events):
                    break
                at = self.position
                if at in self.drop_before and at not in self._dropped:
                    self._dropped.add(at)
                    ws.socket.shutdown(socket.SHUT_RDWR)  # abrupt: no close frame
                    return
                event = self.events[at]
                self.position += 1
                self._advance(event)
                if at in self.lose:
                    continue
                self.sent.append(at)
                ws.send(json.dumps(event))
        try:  # the script is over: answer keep-alives until the client leaves
            while True:
                if ws.recv(timeout=30) == "PING":
                    ws.send("PONG")
        except Exception:
            return

    def __enter__(self) -> FeedServer:
        self._ws = serve(self.handle, "127.0.0.1", 0)
        self._ws_thread = threading.Thread(target=self._ws.serve_forever, daemon=True)
        self._ws_thread.start()
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path.startswith("/markets/"):
                    market = url.path.removeprefix("/markets/")
                    listed = [t for t in feed.tokens if t.market == market]
                    tokens = [{"token_id": t.token, "outcome": t.outcome} for t in listed]
                    body: Any = {"condition_id": market, "tokens": tokens}
                    status = 200 if tokens else 404
                elif url.path == "/book":
                    token = parse_qs(url.query).get("token_id", [""])[0]
                    with feed._lock:
                        feed.book_requests += 1
                        known = token in feed._books
                        body = feed.rest_book(token) if known else {"error": "no book"}
                    status = 200 if known else 404
                else:
                    body, status = {"error": "not found"}, 404
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = LocalServer(Handler).__enter__()
        return self

    @property
    def ws_url(self) -> str:
        host, port = self._ws.socket.getsockname()[:2]
        return f"ws://{host}:{port}"

    @property
    def clob_url(self) -> str:
        return self._http.origin

    def __exit__(self, *_: object) -> None:
        self._http.__exit__()
        self._ws.shutdown()
        self._ws_thread.join(timeout=5)
