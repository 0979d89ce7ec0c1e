"""A chat-completions endpoint on 127.0.0.1 that answers every request at once, the same way.

``arena bench llm`` points an agent at it to time everything a call costs except the model:
the prompt, the request, the HTTP round trip on loopback, the parse and the trace. Its own
handling (a few hundred microseconds of Python) is inside that figure, so the figure is an
upper bound of the agent's overhead.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

from arena.bench.loopback import LocalServer

USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


class CannedLLM(LocalServer):
    """Serves ``content`` as every answer while used as a context manager; counts requests."""

    def __init__(self, content: str) -> None:
        self.requests = 0
        self._body = json.dumps(
            {
                "id": "canned",
                "object": "chat.completion",
                "model": "canned",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": USAGE,
            }
        ).encode()
        self._lock = threading.Lock()
        super().__init__(self._handler())
        self._server.socket.listen(64)  # a forecaster asks several questions at once

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real server: no connect per call

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with canned._lock:
                    canned.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(canned._body)))
                self.end_headers()
                self.wfile.write(canned._body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
