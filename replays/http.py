"""A JSON GET with the retry policy public market-data APIs need.

Polymarket's Gamma and CLOB endpoints rate-limit (429), have bad moments (5xx, stalls, cut-off
bodies) and otherwise answer plainly. So: transient failures are retried with exponential
backoff, a server's ``Retry-After`` is obeyed (capped, so a hostile value cannot park us for an
hour), and a client error such as 404 fails at once, because asking again cannot fix it.

The ``httpx.Client``, the sleep and the jitter all come from outside: tests point the client at
a local server and record the sleeps instead of waiting on them.

A server is untrusted input too. The client's timeout bounds each read, not a body trickled a
byte at a time, so each attempt also has a deadline for the whole body (``body_seconds``);
a body may not exceed ``max_body_bytes`` (read as it streams, never held past the cap); and
JSON nested past the interpreter's recursion limit is refused in one line, not a traceback.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from replays.errors import TapeError

QueryParams = Mapping[str, str | int | float | bool]


class FetchError(TapeError):
    """A request failed for good: a client error, or a transient failure that outlived retries."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait between attempts.

    The n-th retry (n = 0, 1, ...) waits ``min(base_delay * 2**n, max_delay)`` plus
    ``jitter() * base_delay``; ``jitter`` should return a number in [0, 1) and defaults to none,
    so a test's waits are exact. Production passes a seeded ``random.Random().random`` so many
    recorders started together do not retry in lockstep.
    """

    max_retries: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 60.0
    jitter: Callable[[], float] | None = None
    max_body_bytes: int = 64 << 20
    """The largest body accepted: Gamma's 500-market pages and a year of minute prices are a
    few MB."""
    body_seconds: float = 300.0
    """How long one attempt may take to deliver its whole body."""

    def backoff(self, retry: int) -> float:
        delay = min(self.base_delay * 2.0**retry, self.max_delay)
        if self.jitter is not None:
            delay += self.jitter() * self.base_delay
        return delay

    def retry_after(self, header: str | None) -> float | None:
        """The server's ``Retry-After`` in seconds, capped; None if absent or not a number
        (the HTTP-date form is rare on these APIs and falls back to our own backoff)."""
        if header is None:
            return None
        try:
            seconds = float(header.strip())
        except ValueError:
            return None
        if seconds != seconds or seconds < 0:  # NaN or negative: ignore it
            return None
        return min(seconds, self.max_retry_after)


class _Transient(Exception):
    """One attempt failed in a way that another attempt may fix."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


class JsonFetcher:
    """GETs JSON documents through a caller-owned client, retrying what is worth retrying."""

    def __init__(
        self,
        client: httpx.Client,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._client = client
        self._policy = policy or RetryPolicy()
        self._sleep = sleep or time.sleep
        self.requests = 0

    def get_json(self, url: str, params: QueryParams | None = None) -> Any:
        """The decoded body of ``GET url?params``; raises FetchError with a one-line reason."""
        shown = _describe(url, params)
        for attempt in range(self._policy.max_retries + 1):
            try:
                return self._attempt(url, params, shown)
            except _Transient as failure:
                if attempt == self._policy.max_retries:
                    raise FetchError(
                        f"GET {shown} failed after {attempt + 1} attempts: {failure.reason}"
                    ) from None
                wait = failure.wait if failure.wait is not None else self._policy.backoff(attempt)
                self._sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")

    def _attempt(self, url: str, params: QueryParams | None, shown: str) -> Any:
        self.requests += 1
        request = self._client.build_request("GET", url, params=dict(params) if params else None)
        try:
            response = self._client.send(request, stream=True)
            try:
                body = self._body(response, shown)
            finally:
                response.close()
        except httpx.TimeoutException:
            raise _Transient("timed out") from None
        except httpx.TransportError as error:
            # A dropped connection or a body cut short of its Content-Length lands here.
            raise _Transient(f"{type(error).__name__}: {' '.join(str(error).split())}") from None
        try:
            return json.loads(body)
        except ValueError:
            raise _Transient("the response body is not valid JSON") from None
        except RecursionError:
            raise FetchError(
                f"GET {shown} failed: the response's JSON is nested too deeply"
            ) from None

    def _body(self, response: httpx.Response, shown: str) -> bytes:
        """The body of a successful response, within the policy's size and time; a status
        that is worth retrying is a ``_Transient``, a client error a ``FetchError``."""
        status = response.status_code
        if status == 429 or status >= 500:
            wait = self._policy.retry_after(response.headers.get("Retry-After"))
            raise _Transient(f"HTTP {status}", wait)
        if status >= 400:
            raise FetchError(f"GET {shown} failed: HTTP {status} {response.reason_phrase}")
        cap, deadline = self._policy.max_body_bytes, time.monotonic() + self._policy.body_seconds
        parts: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > cap:
                raise FetchError(f"GET {shown} failed: the response is larger than {cap:,} bytes")
            if time.monotonic() > deadline:
                raise _Transient(
                    f"the body took longer than {self._policy.body_seconds:g} s to arrive"
                )
            parts.append(chunk)
        return b"".join(parts)


def _describe(url: str, params: QueryParams | None) -> str:
    """The request as one line for error messages (these public endpoints carry no secrets)."""
    return str(httpx.URL(url, params=dict(params) if params else None))
