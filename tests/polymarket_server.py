"""A fake Polymarket (Gamma + CLOB) on 127.0.0.1, serving the real recorded API fixtures.

Tests start it on an ephemeral port, queue faults for a path (a status with an optional
``Retry-After``, a stall longer than the client's timeout, a body cut short of its
``Content-Length``, or broken JSON), and read back the log of every request it received.
It is a helper for tests, not a test module.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.local_server import LocalServer

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "data" / "polymarket" / "api_fixtures"
HISTORY_FILES = (
    "prices_history_active_prices_1h.json",
    "prices_history_active_prices_1d.json",
    "prices_history_active_prices_1w_f5.json",
    "prices_history_active_prices_max.json",
)


@dataclass(frozen=True)
class Fault:
    """One bad answer: ``status`` (with ``retry_after``), ``stall`` seconds, ``truncated``
    (Content-Length larger than the body sent), or ``bad_json`` (a complete but cut JSON body)."""

    status: int | None = None
    retry_after: str | None = None
    stall: float = 0.0
    truncated: bool = False
    bad_json: bool = False


@dataclass(frozen=True)
class Request:
    path: str
    query: dict[str, str]


def load_fixtures() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The real Gamma markets and events, deduplicated by id (a market file may repeat)."""
    gamma = FIXTURES / "gamma"
    markets: dict[str, dict[str, Any]] = {}
    events: dict[str, dict[str, Any]] = {}
    for name in ("gamma_markets_list_closed_2020.json", "gamma_markets_list_active.json"):
        for market in json.loads((gamma / "wom_raw" / name).read_text()):
            markets[market["id"]] = market
    for name in ("gamma_events_list_closed.json", "gamma_events_list_active.json"):
        for event in json.loads((gamma / "wom_raw" / name).read_text()):
            events[event["id"]] = event
    for path in sorted((gamma / "statground_raw").glob("*.json")):
        obj = json.loads(path.read_text())
        (events if "_event_" in path.name else markets)[obj["id"]] = obj
    return list(markets.values()), list(events.values())


def history_for(token_id: str) -> dict[str, Any]:
    """The fixture body served for a token: one of the real histories, chosen by the token,
    so different tokens get different (but predictable) answers."""
    name = HISTORY_FILES[int(token_id) % len(HISTORY_FILES)]
    body: dict[str, Any] = json.loads((FIXTURES / "clob" / name).read_text())
    return body


class FakePolymarket(LocalServer):
    """The server, its request log and its fault queues. Use as a context manager."""

    def __init__(self) -> None:
        self.markets, self.events = load_fixtures()
        self.requests: list[Request] = []
        self._faults: dict[str, deque[Fault]] = defaultdict(deque)
        self._lock = threading.Lock()
        super().__init__(self._handler())

    @property
    def url(self) -> str:
        return self.origin

    def inject(self, path: str, *faults: Fault) -> None:
        """Answer the next requests to ``path`` with these faults, in order, then normally."""
        with self._lock:
            self._faults[path].extend(faults)

    def count(self, path: str, **query: str) -> int:
        """How many requests hit ``path`` with at least these query values."""
        with self._lock:
            log = list(self.requests)
        return sum(
            1 for r in log if r.path == path and all(r.query.get(k) == v for k, v in query.items())
        )

    def _next_fault(self, request: Request) -> Fault | None:
        with self._lock:
            self.requests.append(request)
            queue = self._faults.get(request.path)
            return queue.popleft() if queue else None

    def _answer(self, request: Request) -> Any:
        query = request.query
        if request.path == "/prices-history":
            return history_for(query["market"])
        if request.path == "/markets":
            rows, key = self.markets, "volumeNum"
        elif request.path == "/events":
            rows, key = self.events, "volume"
        else:
            return None
        if "closed" in query:
            rows = [r for r in rows if bool(r.get("closed")) == (query["closed"] == "true")]
        if "tag_slug" in query:
            rows = [r for r in rows if any(t["slug"] == query["tag_slug"] for t in r["tags"])]
        if "tag_id" in query:
            rows = [r for r in rows if any(t["id"] == query["tag_id"] for t in r.get("tags", []))]
        if query.get("order") == key:
            rows = sorted(rows, key=lambda r: float(r.get(key) or 0), reverse=True)
        offset = int(query.get("offset", 0))
        return rows[offset : offset + int(query.get("limit", 20))]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                request = Request(parts.path, query)
                fault = fake._next_fault(request)
                if fault and fault.stall:
                    time.sleep(fault.stall)
                if fault and fault.status:
                    headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
                    self._send(fault.status, b'{"error": "injected"}', headers)
                    return
                body = fake._answer(request)
                if body is None:
                    self._send(404, b'{"error": "not found"}', {})
                    return
                data = json.dumps(body).encode()
                if fault and fault.bad_json:
                    self._send(200, data[: len(data) // 2], {})
                elif fault and fault.truncated:
                    self._send(200, data[: len(data) // 2], {}, length=len(data))
                else:
                    self._send(200, data, {})

            def _send(
                self, status: int, data: bytes, headers: dict[str, str], length: int | None = None
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(length or len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                    if length:
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a stall past its timeout): nothing to answer

            def log_message(self, format: str, *args: object) -> None:
                pass  # the request log above is what tests read; keep pytest output clean

        return Handler
