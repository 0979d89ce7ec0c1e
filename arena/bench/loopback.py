"""A real HTTP server on 127.0.0.1 (an ephemeral port), started and stopped by its user.

``arena bench llm``'s canned endpoint and the tests' fakes of Polymarket and of an
OpenAI-compatible API share this plumbing; each supplies only its request handler. Nothing here
ever listens on, or talks to, another address.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar, Self


class LocalServer:
    """Serves ``handler`` on 127.0.0.1 in a background thread while used as a context manager."""

    poll_interval: ClassVar[float] = 0.05
    """Seconds the serving loop waits between looks at whether it was asked to stop: the longest
    stopping takes. Shorter wakes the loop more often, beside whatever is being measured."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": self.poll_interval},
            daemon=True,
        )

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
