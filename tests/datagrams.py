"""Datagram sockets a test listens on, standing for what a sandboxed worker must not reach (a
name server, ``/dev/log``): bound before the worker starts, read without waiting after it
ends, so "nothing arrived" is what was sent, not a timeout guessed."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


def bound(address: str | tuple[str, int]) -> socket.socket:
    """A non-blocking datagram socket bound to ``address``: a path (a named unix socket) or a
    (host, port) pair (UDP; port 0 for any)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    server = socket.socket(family, socket.SOCK_DGRAM)
    try:
        server.bind(address)
    except OSError:
        server.close()
        raise
    server.setblocking(False)
    return server


@pytest.fixture
def udp() -> Iterator[socket.socket]:
    """A UDP socket on 127.0.0.1 (its port: ``udp.getsockname()[1]``)."""
    with bound(("127.0.0.1", 0)) as server:
        yield server


def received(server: socket.socket) -> list[bytes]:
    """The datagrams that have reached ``server``, in order."""
    got = []
    while True:
        try:
            got.append(server.recv(65536))
        except BlockingIOError:
            return got
