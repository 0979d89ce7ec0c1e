"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for the llm agent's tests.

Tests start it on an ephemeral port, queue replies (an answer text, an HTTP status, a stall
longer than the client's timeout), and read back every request it received, headers included,
to check what the agent sent, and the most requests it was ever answering at once (``peak``).
A 401 quotes the key it was sent, as some real providers do, so tests can check that the
client scrubs it; ``Reply(echo_key=True)`` quotes it inside an answer. ``reject_schema`` makes
it answer 400 to any request carrying a ``response_format``, as servers without structured
output do. With nothing queued it answers with ``responder(request)``: an answer text, or a
``Reply`` to fail, stall, truncate or drop that request, or to send hostile bytes (``raw``, with
its own headers: a gzip bomb), a status line's reason of its own (``phrase``), or its body a
byte at a time (``drip`` seconds apart). It is a helper for tests, not a test module.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_server import LocalServer

HOLD = '{"action": "HOLD", "reasoning": "nothing stands out"}'


@dataclass(frozen=True)
class Reply:
    """One queued answer: ``content`` as the model's text, or an error ``status``; ``stall``
    seconds before answering (past the client's timeout, the client sees a timeout)."""

    content: str = HOLD
    status: int = 200
    stall: float = 0.0
    usage: dict[str, Any] = field(
        default_factory=lambda: {"prompt_tokens": 1200, "completion_tokens": 40, "cost": 0.0021}
    )
    finish_reason: str = "stop"
    reasoning: str | None = None
    body: dict[str, Any] | None = None
    """A whole body to send instead of an answer or the usual error (an error object inside a
    200, say)."""
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    """Close the connection without answering."""
    echo_key: bool = False
    raw: bytes | None = None
    """These bytes as the body, as they are (``headers`` say what they are)."""
    phrase: str | None = None
    """The status line's reason phrase."""
    drip: float = 0.0
    """Seconds between the bytes of the body (headers and all), sent one at a time."""


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def user_prompt(self) -> str:
        """The question asked; empty for a request cut before its body arrived (a client that
        gave up at its time limit while sending, as a loaded machine makes happen)."""
        messages = self.body.get("messages")
        return str(messages[-1]["content"]) if messages else ""


class FakeLLM(LocalServer):
    """The server, its queue of replies and its request log. Use as a context manager."""

    def __init__(
        self,
        responder: Callable[[Received], str | Reply] | None = None,
        *,
        reject_schema: bool = False,
    ) -> None:
        self.responder = responder or (lambda _: HOLD)
        self.reject_schema = reject_schema
        self.received: list[Received] = []
        self.dripped: list[tuple[int, int]] = []
        """(bytes sent, bytes in all) of each dripped answer, once its sending ended."""
        self.drip_ended = threading.Event()
        self.peak = 0
        self._active = 0
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        super().__init__(self._handler())
        # the standard backlog of 5 drops connections when a forecaster asks many questions at
        # once, and the client's retry of a dropped connect (1 s later) would slow every test
        self._server.socket.listen(64)

    @property
    def url(self) -> str:
        """The base URL, as a client's ``base_url`` (``/chat/completions`` is appended)."""
        return f"{self.origin}/v1"

    def queue(self, *replies: Reply | str) -> None:
        """Answer the next requests with these, in order (a string is a 200 with that text)."""
        with self._lock:
            self._replies.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    def _next(self, request: Received) -> Reply:
        with self._lock:
            self.received.append(request)
            if self._replies:
                return self._replies.popleft()
        reply = self.responder(request)
        return reply if isinstance(reply, Reply) else Reply(reply)

    def _busy(self, change: int) -> None:
        with self._lock:
            self._active += change
            self.peak = max(self.peak, self._active)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = Received(self.path, dict(self.headers.items()), body)
                fake._busy(+1)
                try:
                    reply = fake._next(request)
                    if reply.stall:
                        time.sleep(reply.stall)
                finally:  # before answering: a client may ask again the moment it hears back
                    fake._busy(-1)
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)  # no status line at all
                elif not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "no such route"}})
                elif fake.reject_schema and "response_format" in body:
                    self._send(400, {"error": {"message": "response_format is not supported"}})
                elif reply.status == 401:  # as some providers do: quote the refused key
                    self._send(401, {"error": {"message": f"Incorrect API key provided: {key}"}})
                elif reply.raw is not None:
                    self._send(reply.status, reply.raw, reply.headers, reply.phrase)
                elif reply.drip:
                    self._drip(reply)
                elif reply.status != 200:
                    error = reply.body or {"error": {"message": f"injected {reply.status}"}}
                    self._send(reply.status, error, reply.headers, reply.phrase)
                elif reply.body is not None:
                    self._send(200, reply.body, reply.headers, reply.phrase)
                else:
                    content = reply.content + (f" your header was Bearer {key}" * reply.echo_key)
                    message: dict[str, Any] = {"role": "assistant", "content": content}
                    if reply.reasoning is not None:
                        message["reasoning"] = reply.reasoning
                    choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason}
                    self._send(
                        200,
                        {
                            "id": f"fake-{len(fake.received)}",
                            "model": body.get("model"),
                            "choices": [choice],
                            "usage": reply.usage,
                        },
                        reply.headers,
                    )

            def _send(
                self,
                status: int,
                payload: dict[str, Any] | bytes,
                headers: dict[str, str] | None = None,
                phrase: str | None = None,
            ) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status, phrase)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a stall past its timeout): nothing to answer

            def _drip(self, reply: Reply) -> None:
                """A whole 200 answer, a byte every ``reply.drip`` seconds, until the client
                hangs up."""
                body = json.dumps({"choices": [{"message": {"content": reply.content}}]})
                data = (
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n{body}"
                ).encode()
                self.close_connection = True
                sent = 0
                try:
                    for k in range(len(data)):
                        self.wfile.write(data[k : k + 1])
                        self.wfile.flush()
                        sent += 1
                        time.sleep(reply.drip)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                fake.dripped.append((sent, len(data)))
                fake.drip_ended.set()

            def log_message(self, format: str, *args: object) -> None:
                pass  # the request log above is what tests read; keep pytest output clean

        return Handler
