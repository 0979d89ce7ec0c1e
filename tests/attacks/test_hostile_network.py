"""Hostile plugins on the network, under ``--isolate`` (issue #25: no network in the sandbox).

Landlock holds a worker's TCP to the model endpoint's port and nothing else; what it does not see
(UDP, raw, packet, netlink and unix sockets, a unix datagram pair's ``sendto``, a TCP Fast Open
``sendto``, io_uring) the worker's seccomp filter refuses (``arena.boundary.seccomp``). Each
attack here is a real plugin file in a real worker, aimed at a real socket this test listens on:
the listener receives nothing, the plugin gets an ordinary ``PermissionError`` (EPERM, never a
killed worker), its decision is a recorded HOLD, and the honest agent beside it logs what it logs
alone. Where a test says what happens with no filter (another architecture), the attack gets
through; where it could not say, it is skipped there.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.boundary import seccomp
from arena.boundary.oslimits import plan
from ledger.events import AnyEvent, CohortOpened
from tests.arena.boundary.test_boundary import of_agent
from tests.attacks.test_hostile_plugins import (  # noqa: F401 (fixtures)
    WHEN,
    _quick_builds,
    alone,
    listener,
    made,
    plugin_source,
    run,
)
from tests.datagrams import bound, received, udp  # noqa: F401 (a fixture)

FILTER = plan().seccomp_filter
"""Whether this machine's workers install the seccomp filter (x86_64 or AArch64 Linux)."""

REFUSED = "PermissionError: [Errno 1] Operation not permitted"
"""What a plugin's refused call raises, as its decision's error records it."""

needs_filter = pytest.mark.skipif(not FILTER, reason="no seccomp filter here: nothing to refuse")


def isolated(tmp_path: Path, attack: str, when: str) -> list[AnyEvent]:
    """The plugin attacking at ``when`` beside ``fav=favourite``, under ``--isolate``; the run
    went on to its end, and its opening records what the workers were held to."""
    events = run(tmp_path, plugin_source(attack, when), isolate=True)
    opened = events[0]
    assert isinstance(opened, CohortOpened)
    assert opened.settings["isolation"] == plan().summary()
    assert (seccomp.ENFORCED in opened.settings["isolation"]) == FILTER
    return events


@pytest.mark.slow  # a worker per case
@pytest.mark.parametrize("when", WHEN)
def test_under_isolate_a_plugin_cannot_send_a_udp_datagram(
    tmp_path: Path,
    alone: list[AnyEvent],  # noqa: F811
    udp: socket.socket,  # noqa: F811 (the fixture)
    when: str,
) -> None:
    attack = f"""
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.sendto(b"the future, please", {udp.getsockname()!r})
"""
    events = isolated(tmp_path, attack, when)
    assert of_agent(events, "fav") == alone
    decisions = made(events)
    assert decisions and all(d.action == "HOLD" for d in decisions)
    if not FILTER:
        assert received(udp) == [b"the future, please"]
        return
    assert received(udp) == []
    first = decisions[0].error or ""
    if when == "decide":  # that decision's error; the next ones decide again
        assert first.startswith(REFUSED)
        assert {(d.reasoning, d.error) for d in decisions[1:]} == {("held", None)}
    else:  # the agent sits the cohort out with the reason
        assert first.startswith("sat out the cohort: setup failed: ")
        assert REFUSED in first


KINDS = """
said = []
for name, family, kind, proto in [
    ("udp6", socket.AF_INET6, socket.SOCK_DGRAM, 0),
    ("raw", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    ("packet", socket.AF_PACKET, socket.SOCK_RAW, 0),
    ("netlink", socket.AF_NETLINK, socket.SOCK_RAW, 0),
    ("sctp", socket.AF_INET, socket.SOCK_STREAM, 132),
    ("unix", socket.AF_UNIX, socket.SOCK_STREAM, 0),
    ("tcp", socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK, 0),
]:
    try:
        socket.socket(family, kind, proto).close()
        said.append(name + " opened")
    except OSError as exc:
        said.append(name + " " + type(exc).__name__)
return "; ".join(said)
"""


@pytest.mark.slow  # a worker
def test_under_isolate_a_plugin_opens_no_socket_but_tcp(
    tmp_path: Path,
    alone: list[AnyEvent],  # noqa: F811
) -> None:
    """Raw, packet, netlink, SCTP and unix sockets refused at ``socket()``; a TCP one opens
    (the model client's), and Landlock decides where it may connect."""
    events = isolated(tmp_path, KINDS, "decide")
    assert of_agent(events, "fav") == alone
    said = made(events)[0].reasoning
    if FILTER:
        refused = ("udp6", "raw", "packet", "netlink", "sctp", "unix")
        assert said == "; ".join([*(f"{k} PermissionError" for k in refused), "tcp opened"])
    else:
        assert "netlink opened" in said  # any user may open one


@pytest.fixture
def door(tmp_path: Path) -> Iterator[socket.socket]:
    """A named unix socket listening, as a container runtime's or D-Bus's does: not a file
    Landlock's rules govern, so only the filter keeps a plugin from connecting to one."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(tmp_path / "door.sock"))
        server.listen()
        server.setblocking(False)
        yield server


def knocked(door: socket.socket) -> bool:
    """Whether anyone connected to ``door``."""
    try:
        door.accept()[0].close()
    except BlockingIOError:
        return False
    return True


@needs_filter
@pytest.mark.slow  # a worker
def test_under_isolate_a_plugin_cannot_reach_a_unix_socket(
    tmp_path: Path,
    alone: list[AnyEvent],  # noqa: F811
    door: socket.socket,
) -> None:
    attack = f"""
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect({door.getsockname()!r})
        s.sendall(b"the future, please")
    return "connected"
except OSError as exc:
    return "refused: " + type(exc).__name__
"""
    events = isolated(tmp_path, attack, "decide")
    assert not knocked(door)
    assert of_agent(events, "fav") == alone
    assert made(events)[0].reasoning == "refused: PermissionError"


PAIRS = """
import errno
said = []
for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, kind)
    except OSError as exc:
        said.append(f"{kind.name} pair {type(exc).__name__}")
        continue
    with a, b:
        for how, go in (("sendto log", lambda: a.sendto(b"the future, please", LOG)),
                        ("connect door", lambda: a.connect(DOOR))):
            try:
                go()
                said.append(f"{kind.name} pair {how}: went")
            except OSError as exc:
                said.append(f"{kind.name} pair {how}: {errno.errorcode[exc.errno]}")
return "; ".join(said)
"""


@needs_filter
@pytest.mark.slow  # a worker
def test_under_isolate_a_plugin_cannot_reach_a_unix_socket_through_a_socketpair(
    tmp_path: Path,
    alone: list[AnyEvent],  # noqa: F811
    door: socket.socket,
) -> None:
    """``socketpair`` makes unix sockets with no ``socket()`` call, and the datagram kind's
    ``sendto`` with a path reached any named datagram socket (``/dev/log``, journald) before
    the filter refused that kind (issue #25). The stream pair asyncio needs is still made, and
    reaches no one: its ends are connected to each other, so ``sendto`` with an address and
    ``connect`` fail with ``EISCONN``."""
    with bound(str(tmp_path / "log.sock")) as log:
        attack = f"LOG, DOOR = {log.getsockname()!r}, {door.getsockname()!r}\n{PAIRS}"
        events = isolated(tmp_path, attack, "decide")
        assert received(log) == []
    assert not knocked(door)
    assert of_agent(events, "fav") == alone
    assert made(events)[0].reasoning == (
        "SOCK_DGRAM pair PermissionError; "
        "SOCK_STREAM pair sendto log: EISCONN; SOCK_STREAM pair connect door: EISCONN"
    )


@needs_filter
@pytest.mark.slow  # a worker and a server
def test_under_isolate_a_plugin_cannot_connect_by_tcp_fast_open(
    tmp_path: Path,
    alone: list[AnyEvent],  # noqa: F811
    listener: tuple[int, list[bytes]],  # noqa: F811
) -> None:
    """``sendto(MSG_FASTOPEN)`` connects without ``connect()``, which is where Landlock looks:
    without the filter this reached a port Landlock refuses (Linux 6.18, ABI 7)."""
    port, got = listener
    attack = f"""
try:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.sendto(b"the future, please", socket.MSG_FASTOPEN, ("127.0.0.1", {port}))
    return "sent"
except OSError as exc:
    return "refused: " + type(exc).__name__
"""
    events = isolated(tmp_path, attack, "decide")
    assert of_agent(events, "fav") == alone
    assert made(events)[0].reasoning == "refused: PermissionError"
    assert got == []


@needs_filter
@pytest.mark.slow  # a worker
def test_under_isolate_a_plugin_cannot_set_up_io_uring(
    tmp_path: Path,
    alone: list[AnyEvent],  # noqa: F811
) -> None:
    """io_uring's socket, connect and send operations are not system calls: refused at its
    setup, through ``ctypes`` as a plugin would call it."""
    attack = """
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)  # struct io_uring_params
fd = libc.syscall(425, 8, params)  # io_uring_setup, the same number on x86_64 and AArch64
return "io_uring fd" if fd >= 0 else "refused: " + os.strerror(ctypes.get_errno())
"""
    events = isolated(tmp_path, attack, "decide")
    assert of_agent(events, "fav") == alone
    assert made(events)[0].reasoning == "refused: Operation not permitted"
