"""The seccomp filter of an ``--isolate`` worker (``arena.boundary.seccomp``), and how
``oslimits`` installs it and says it.

The program is run here by a classic-BPF interpreter of a dozen lines, on the ``seccomp_data``
the kernel would hand it, for both architectures it is written for; the call numbers typed into
it are checked against the kernel's headers where this machine has them. Then, in real
processes: the filter holds threads started before it, and the model endpoint's name, looked
up before the filter refuses the resolver's UDP, is still found after it.
"""

from __future__ import annotations

import errno
import re
import socket
import struct
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from arena.boundary import seccomp
from arena.boundary.oslimits import Confinement, plan, seccomp_arch
from arena.boundary.seccomp import AARCH64, X86_64, Arch, Instruction, program
from tests.datagrams import received, udp  # noqa: F401 (a fixture)

ALLOW = seccomp.RET_ALLOW
EPERM = seccomp.RET_ERRNO | errno.EPERM
ENOSYS = seccomp.RET_ERRNO | errno.ENOSYS
I386 = 0x4000_0003  # AUDIT_ARCH_I386: int 0x80 on an x86_64 kernel

AF_INET, AF_INET6, AF_UNIX, AF_NETLINK, AF_PACKET = 2, 10, 1, 16, 17
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
SOCK_NONBLOCK, SOCK_CLOEXEC = 0o4000, 0o2000000
MSG_NOSIGNAL, MSG_FASTOPEN = 0x4000, 0x2000_0000
CLONE_THREAD_FLAGS = 0x3D0F00  # what glibc's pthread_create passes
SIGCHLD, CLONE_NEWUSER, CLONE_NEWNET = 17, 0x1000_0000, 0x4000_0000


def decide(instructions: list[Instruction], data: bytes) -> int:
    """What the kernel's classic-BPF machine returns for ``data`` (the few opcodes used)."""
    a, pc = 0, 0
    while True:
        code, jt, jf, k = instructions[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            a = struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:  # and #k
            a &= k
        elif code == 0x06:  # ret #k
            return k
        else:
            taken = {0x15: a == k, 0x35: a >= k, 0x45: bool(a & k)}[code]
            pc += jt if taken else jf


def call(arch: Arch, name: str | int, *args: int, audit: int | None = None) -> int:
    """The filter's answer to the call ``name`` (or a number) with ``args``, made by ``arch``'s
    ABI (or ``audit``'s)."""
    nr = arch.numbers[name] if isinstance(name, str) else name
    words = [*args, *[0] * (6 - len(args))]
    data = struct.pack("<iIQ6Q", nr, arch.audit if audit is None else audit, 0, *words)
    return decide(program(arch), data)


CASES = [
    # the model client's TCP socket, however it is flagged
    ("socket", (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), ALLOW),
    ("socket", (AF_INET6, SOCK_STREAM, 6), ALLOW),
    ("socket", (AF_INET + 2**32, SOCK_STREAM, 0), ALLOW),  # the kernel reads an int
    # every other socket
    ("socket", (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), EPERM),
    ("socket", (AF_INET6, SOCK_DGRAM, 17), EPERM),
    ("socket", (AF_INET, SOCK_RAW, 1), EPERM),
    ("socket", (AF_INET, SOCK_STREAM, 132), EPERM),  # SCTP
    ("socket", (AF_INET, SOCK_STREAM, 262), EPERM),  # MPTCP
    ("socket", (AF_PACKET, SOCK_RAW, 0x0300), EPERM),
    ("socket", (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0), EPERM),
    ("socket", (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), EPERM),
    # a unix stream pair (asyncio's, multiprocessing's), connected to itself and so to no one
    # else; not a datagram pair, whose sendto reaches any named unix socket (issue #25)
    ("socketpair", (AF_UNIX, SOCK_STREAM, 0), ALLOW),
    ("socketpair", (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), ALLOW),
    ("socketpair", (AF_UNIX, SOCK_DGRAM, 0), EPERM),
    ("socketpair", (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), EPERM),
    ("socketpair", (AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0), EPERM),
    ("socketpair", (AF_UNIX, SOCK_RAW, 0), EPERM),  # the kernel makes it a datagram pair
    ("socketpair", (AF_INET, SOCK_STREAM, 0), EPERM),
    # sends, but not the connect TCP Fast Open makes of one
    ("sendto", (3, 0, 10, MSG_NOSIGNAL, 0, 0), ALLOW),
    ("sendto", (3, 0, 10, MSG_FASTOPEN | MSG_NOSIGNAL, 0, 16), EPERM),
    ("sendmsg", (3, 0, MSG_NOSIGNAL), ALLOW),
    ("sendmsg", (3, 0, MSG_FASTOPEN), EPERM),
    ("sendmmsg", (3, 0, 2, MSG_FASTOPEN), EPERM),
    # threads and forks, not namespaces; clone3 sent back to clone
    ("clone", (CLONE_THREAD_FLAGS,), ALLOW),
    ("clone", (SIGCHLD,), ALLOW),
    ("clone", (SIGCHLD | CLONE_NEWUSER,), EPERM),
    ("clone", (CLONE_NEWNET,), EPERM),
    ("clone3", (0, 88), ENOSYS),
    *((name, (), EPERM) for name in seccomp.REFUSED),
]


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda a: a.name)
@pytest.mark.parametrize(("name", "args", "answer"), CASES, ids=lambda c: str(c))
def test_the_filter_allows_tcp_and_refuses_every_other_socket_and_the_calls_around_it(
    arch: Arch, name: str, args: tuple[int, ...], answer: int
) -> None:
    assert call(arch, name, *args) == answer


@pytest.mark.parametrize(("arch", "read"), [(X86_64, 0), (AARCH64, 63)], ids=["x86_64", "aarch64"])
def test_any_other_call_is_allowed_and_another_abis_calls_are_refused(
    arch: Arch, read: int
) -> None:
    assert call(arch, read, 0, 0, 4096) == ALLOW
    assert call(arch, read, audit=I386) == EPERM  # the 32-bit ABI: its own numbers
    assert call(arch, arch.numbers["socket"], AF_INET, SOCK_STREAM, audit=I386) == EPERM
    other = AARCH64 if arch is X86_64 else X86_64
    assert call(arch, read, audit=other.audit) == EPERM


def test_x32_numbers_on_x86_64_are_refused() -> None:
    """x32's calls carry x86_64's audit id, and their number bit 30: ``socket`` by x32 is
    0x40000029, which the native rule would not recognise."""
    assert call(X86_64, 0x4000_0000 | 41, AF_INET, SOCK_DGRAM) == EPERM
    assert call(X86_64, 0x4000_0000, 0, 0, 4096) == EPERM


HEADERS = {
    X86_64: ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"],
    AARCH64: ["/usr/include/asm-generic/unistd.h"],
}


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda a: a.name)
def test_the_call_numbers_are_the_kernel_headers(arch: Arch) -> None:
    found = [Path(p) for p in HEADERS[arch] if Path(p).exists()]
    if not found:
        pytest.skip(f"no {arch.name} headers here (linux-libc-dev)")
    text = found[0].read_text()
    defined = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", text)}
    assert {name: defined.get(name) for name in arch.numbers} == dict(arch.numbers)


# -- what the run says it enforced -------------------------------------------------------------

KEPT = "memory 4 GiB, files 256 MiB, no core; own session, dies with the run"
LANDLOCK = "reads the libraries and the plugin's folder only; writes its scratch folder only"


def test_the_isolation_line_says_what_the_filter_and_landlock_each_enforce() -> None:
    full = Confinement(7, 443, True, "api.example.com")
    assert full.summary() == (
        f"landlock abi 7; {LANDLOCK}; TCP refused but port 443; seccomp: sockets TCP and unix "
        "stream pairs only (no UDP, raw, netlink, packet or other unix), no TCP Fast Open, "
        f"io_uring, ptrace, bpf, namespaces, mounts or keyrings; signals its own sandbox only; "
        f"{KEPT}"
    )
    assert full.complete
    unfiltered = Confinement(7, None, False)
    assert unfiltered.summary() == (
        f"landlock abi 7; {LANDLOCK}; TCP refused; UDP and other sockets not confined (no "
        f"seccomp filter); signals its own sandbox only; {KEPT}"
    )
    assert not unfiltered.complete
    older = Confinement(3, None, True).summary()
    assert older.startswith(f"landlock abi 3; {LANDLOCK}; TCP not confined (no Landlock ABI 4); ")
    assert older.endswith(f"keyrings; signals not confined; {KEPT}")


def test_the_endpoint_is_planned_but_its_host_never_recorded() -> None:
    """The worker is given the endpoint's host (to look it up before the filter), but the line
    the log records is the same whatever the host: a cohort's log does not say where its model
    was served from, and two runs against different servers on one port record alike."""
    planned = plan({"ARENA_LLM_BASE_URL": "https://api.example.com/v1"})
    elsewhere = plan({"ARENA_LLM_BASE_URL": "https://10.1.2.3:443/v1"})
    assert (planned.endpoint_host, planned.endpoint_port) == ("api.example.com", 443)
    assert (elsewhere.endpoint_host, elsewhere.endpoint_port) == ("10.1.2.3", 443)
    assert planned.seccomp_filter == (seccomp_arch() is not None)
    assert planned != elsewhere
    assert planned.summary() == elsewhere.summary()
    assert plan({}).endpoint_host is None


# -- in real processes ---------------------------------------------------------------------------

needs_filter = pytest.mark.skipif(seccomp_arch() is None, reason="no seccomp filter here")


def confined(tmp_path: Path, before: str, confinement: str, after: str) -> str:
    """What a fresh interpreter prints running ``before``, confining itself with
    ``confinement`` (a ``Confinement`` expression), then running ``after``."""
    script = "\n".join(
        [
            "import socket, threading",
            "from arena.boundary import oslimits",
            "from arena.boundary.oslimits import Confinement",
            textwrap.dedent(before),
            f"oslimits.confine({confinement}, [], {str(tmp_path)!r})",
            textwrap.dedent(after),
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@needs_filter
def test_the_filter_holds_the_threads_started_before_it(tmp_path: Path) -> None:
    """The worker's watch threads start before it confines itself; the filter is synchronised
    onto every thread (``TSYNC``), or plugin code run in one of them would open any socket."""
    before = """
    go, said = threading.Event(), []
    def early():
        go.wait()
        try:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
            said.append("opened")
        except OSError as exc:
            said.append(type(exc).__name__)
    thread = threading.Thread(target=early)
    thread.start()
    """
    after = """
    go.set()
    thread.join()
    print(said[0])
    """
    assert confined(tmp_path, before, "Confinement(0, None, True)", after) == "PermissionError"


@needs_filter
def test_the_model_endpoints_name_is_found_after_the_filter_refuses_dns(
    tmp_path: Path,
    udp: socket.socket,  # noqa: F811 (the fixture)
) -> None:
    """The plugin's process resolves names as glibc does, by a UDP question to the name server
    (here ``udp``, a stand-in on 127.0.0.1 that always says 127.0.0.1): the endpoint's name is
    asked once, before the filter, and connected to after it; any other name is refused."""
    dns = udp.getsockname()[1]
    with socket.create_server(("127.0.0.1", 0)) as model:
        port = model.getsockname()[1]
        got: list[bytes] = []

        def serve() -> None:
            conn, _ = model.accept()
            with conn:
                got.append(conn.recv(64))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        before = f"""
        real = socket.getaddrinfo
        def resolver(host, port, family=0, type=0, proto=0, flags=0):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(str(host).encode(), ("127.0.0.1", {dns}))
            return real("127.0.0.1", port, family, type, proto, flags)
        socket.getaddrinfo = resolver
        """
        after = f"""
        with socket.create_connection(("model.test", {port}), timeout=10) as c:
            c.sendall(b"asked")
        try:
            socket.getaddrinfo("other.test", 80)
            print("other found")
        except OSError as exc:
            print("other", type(exc).__name__)
        """
        endpoint = f"Confinement(0, {port}, True, 'model.test')"
        said = confined(tmp_path, before, endpoint, after)
        thread.join(10)
    assert said == "other PermissionError"
    assert got == [b"asked"]
    assert received(udp) == [b"model.test"]
