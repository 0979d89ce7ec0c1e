"""A server that answers too much, too slowly or too deep, on 127.0.0.1: the fetcher refuses
each in one line (issue 25: every reader of untrusted input has a size cap, a depth cap and a
time bound), instead of holding a body of any size, waiting on a trickle for ever, or raising
a RecursionError."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from arena.bench.loopback import LocalServer
from replays.http import FetchError, JsonFetcher, RetryPolicy

BIG = b"[" + b"1," * 600_000 + b"1]"  # 1.2 MB of valid JSON
DEEP = b"[" * 100_000 + b"]" * 100_000


class _Hostile(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = {"/big": BIG, "/deep": DEEP, "/small": b"[1, 2]"}.get(self.path, b" " * 40)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            if self.path != "/trickle":
                self.wfile.write(body)
                return
            for byte in body:  # one every 50 ms: each read well inside the client's timeout
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the fetcher hung up, as it should

    def log_message(self, *args: object) -> None:
        """Quiet: the tests read what the fetcher says."""


@pytest.fixture
def origin() -> Iterator[str]:
    with LocalServer(_Hostile) as server:
        yield server.origin


def _fetch(origin: str, path: str, **policy: float) -> object:
    sleeps: list[float] = []
    with httpx.Client(timeout=httpx.Timeout(5.0)) as client:
        fetcher = JsonFetcher(client, RetryPolicy(max_retries=1, **policy), sleep=sleeps.append)
        return fetcher.get_json(f"{origin}{path}")


def test_a_body_within_the_cap_is_read(origin: str) -> None:
    assert _fetch(origin, "/small", max_body_bytes=6) == [1, 2]
    assert len(_fetch(origin, "/big", max_body_bytes=len(BIG))) == 600_001  # type: ignore[arg-type]


def test_a_body_past_the_cap_is_refused_at_once(origin: str) -> None:
    with pytest.raises(FetchError) as info:
        _fetch(origin, "/big", max_body_bytes=len(BIG) - 1)
    assert str(info.value) == (
        f"GET {origin}/big failed: the response is larger than {len(BIG) - 1:,} bytes"
    )


def test_a_trickled_body_is_cut_off_at_its_deadline(origin: str) -> None:
    with pytest.raises(FetchError) as info:
        _fetch(origin, "/trickle", body_seconds=0.2)
    assert str(info.value) == (
        f"GET {origin}/trickle failed after 2 attempts: the body took longer than 0.2 s to arrive"
    )


def test_json_nested_too_deeply_is_one_line(origin: str) -> None:
    with pytest.raises(FetchError) as info:
        _fetch(origin, "/deep")
    assert str(info.value) == f"GET {origin}/deep failed: the response's JSON is nested too deeply"
