"""The real local model server, for the tests: ``arena llm serve --port 0 --json`` as a child.

A child process rather than a thread of pytest: llama.cpp takes over SIGINT and SIGTERM in the
process it runs in, and logs to its stderr; and "the server stopped" is then plainly true (its
process is gone). The model loads in about a second.

``tokens()`` reads the server's own counters (llama.cpp's Prometheus ``/metrics``): prompt
tokens processed plus those reused from its cache, and tokens generated, over the server's
whole life. Tests compare what the log says was spent with them.
"""

from __future__ import annotations

import json
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Self

import httpx

ARENA = Path(sys.executable).parent / "arena"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
_COUNTER = re.compile(r"^llamacpp:(\w+) ([0-9.e+]+)$", re.MULTILINE)


class LlamaServer:
    """Started on entering, stopped (SIGTERM, as a user's Ctrl-C would) on leaving."""

    def __init__(self, *args: str) -> None:
        self.args = ["llm", "serve", "--port", "0", "--json", *args]
        self.base_url = ""
        self.model = ""
        self.returncode: int | None = None
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            [str(ARENA), *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        line = _read_line(self._process.stdout, START_TIMEOUT)
        if not line:
            self._process.kill()
            _, err = self._process.communicate()
            raise RuntimeError(f"arena llm serve did not start: {err.strip()}")
        served = json.loads(line)
        self.base_url, self.model = served["base_url"], served["model"]
        return self

    @property
    def origin(self) -> str:
        return self.base_url.removesuffix("/v1")

    def tokens(self) -> tuple[int, int]:
        """(prompt tokens, completion tokens) the server has handled since it started."""
        counters = {
            name: float(value)
            for name, value in _COUNTER.findall(httpx.get(f"{self.origin}/metrics").text)
        }
        prompt = counters["prompt_tokens_total"] + counters["prompt_tokens_cached_total"]
        return int(prompt), int(counters["tokens_predicted_total"])

    def stop(self) -> None:
        if self._process is None or self.returncode is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self.returncode = self._process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self.returncode = self._process.wait()
        self._process.communicate()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _read_line(stream: IO[str], timeout: float) -> str:
    """The first line the server prints, or "" if it prints none within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([stream], [], [], left)
        if ready:
            return stream.readline()
    return ""
