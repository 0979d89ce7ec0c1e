"""The tests' local HTTP servers share arena's loopback plumbing (``arena.bench.loopback``):
a real server on 127.0.0.1, an ephemeral port, started and stopped by the test."""

from arena.bench.loopback import LocalServer

__all__ = ["LocalServer"]
