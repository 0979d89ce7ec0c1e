"""The seccomp filter of an ``--isolate`` worker: the system calls Landlock does not see.

Landlock (``arena.boundary.oslimits``) confines files, TCP ports and signals, but not UDP, raw,
netlink or packet sockets, nor the ways around its TCP rule: a TCP Fast Open ``sendto``
connects without ``connect`` (measured on Linux 6.18 with ABI 7: a confined worker's
``sendto(MSG_FASTOPEN)`` reached a port its ``connect`` was refused), and io_uring's socket
and send operations are not system calls at all. This module is the classic-BPF program the
worker installs after Landlock (``oslimits.confine``); it is written out here by hand, with no
libseccomp, so that every rule can be read, and ``program`` is pure so a test can run it.

Each refused call fails with ``EPERM`` (``SECCOMP_RET_ERRNO``), never a kill: the plugin sees an
ordinary ``PermissionError``, its decision is recorded with it, and the worker goes on. The rules:

- ``socket``: only ``AF_INET`` / ``AF_INET6`` with type ``SOCK_STREAM`` (``SOCK_NONBLOCK`` and
  ``SOCK_CLOEXEC`` masked off) and protocol 0 or TCP: the model client's connection, which
  Landlock then holds to the endpoint's port. Not UDP (DNS or any datagram out), raw, packet or
  netlink sockets, SCTP or MPTCP over a stream type (Landlock's TCP rule is for TCP alone), and
  not ``AF_UNIX``: a worker has no unix socket to open (measured with strace: after confining
  itself it opens none but glibc's probe for ``nscd``, which falls back when refused), and a
  named one (a container runtime's, D-Bus) is a door out of the sandbox Landlock leaves open.
- ``socketpair``: ``AF_UNIX`` with type ``SOCK_STREAM`` only, read as ``socket``'s are (the
  kernel itself refuses TCP's protocol number for a unix pair): asyncio's event loop wakes
  itself with such a pair, ``multiprocessing.Pipe`` is one, and so are the worker's own pipes
  to the run. Its ends are connected to each other from the start, and a connected stream
  socket reaches no one else: ``connect``, and ``sendto`` or ``sendmsg`` with an address, fail
  with ``EISCONN``, even once the other end is closed (measured on Linux 6.18). Not a datagram
  pair: a datagram socket's connection is only its default destination, and a ``sendto`` with
  a path from a confined worker reached a named unix datagram socket outside it (``/dev/log``,
  journald's and systemd's notify sockets are such; Landlock scopes abstract names from ABI 6,
  never paths). Nor ``SOCK_SEQPACKET``, which nothing a worker runs asks for. A TCP socket's
  ``sendto`` goes where it is connected, its address ignored but with ``MSG_FASTOPEN``:
- ``sendto``, ``sendmsg``, ``sendmmsg`` with ``MSG_FASTOPEN``: the connect Landlock does not see.
- ``listen``: a worker serves nothing; a socket listened on unbound is given a port with no
  ``bind``, which Landlock's bind rule does not see either.
- ``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``: its socket, connect and send
  operations would bypass every rule above.
- ``ptrace``, ``process_vm_readv``, ``process_vm_writev``: another process's memory.
- ``bpf``, ``perf_event_open``, ``userfaultfd``: kernel attack surface a plugin has no use for.
- ``unshare``, ``setns``, and ``clone`` with any ``CLONE_NEW*`` flag: new namespaces (a user
  namespace's capabilities open more of the kernel); ``clone3`` fails with ``ENOSYS``, since its
  flags are behind a pointer the filter cannot read, and glibc then creates threads with
  ``clone``, as on kernels before 5.3.
- ``mount`` and the new mount API, ``umount2``, ``pivot_root``: the file tree.
- ``keyctl``, ``add_key``, ``request_key``: the kernel's keyrings, shared with the user's other
  processes.

A system call of another ABI than the worker's (i386 through ``int 0x80`` on x86_64, x32's
numbers with bit 30 set, AArch32 on AArch64) would get past a filter written for the native
numbers: every one is refused.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass

# -- the kernel's interface (linux/seccomp.h, linux/filter.h, linux/audit.h) ---------------------

RET_ALLOW = 0x7FFF_0000
RET_ERRNO = 0x0005_0000
"""The action that fails a call with the errno in its low 16 bits."""

_LD_ABS, _JEQ, _JGE, _JSET, _AND, _RET = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
"""``BPF_LD|W|ABS``, ``BPF_JMP|JEQ|K``, ``JGE``, ``JSET``, ``BPF_ALU|AND|K``, ``BPF_RET|K``."""

NR, ARCH = 0, 4
"""Offsets in ``struct seccomp_data``: the call's number, its ABI."""


def arg(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` (little-endian; both architectures are):
    every argument the filter reads is an ``int`` or a flag word the kernel reads 32 bits of."""
    return 16 + 8 * index


AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
SOCK_STREAM = 1
SOCK_FLAGS = 0o4000 | 0o2000000
"""``SOCK_NONBLOCK | SOCK_CLOEXEC`` (x86_64 and AArch64 share them)."""
IPPROTO_TCP = 6
MSG_FASTOPEN = 0x2000_0000
CLONE_NEW = 0x7E02_0000
"""``CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET``: 0x20000 and each
bit from 0x2000000 to 0x40000000."""
X32_BIT = 0x4000_0000
"""x86_64's x32 ABI: its calls carry the native architecture and this bit in their number."""

REFUSED = (
    "listen",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "ptrace", "process_vm_readv", "process_vm_writev",
    "bpf", "perf_event_open", "userfaultfd",
    "unshare", "setns",
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr",
    "keyctl", "add_key", "request_key",
)  # fmt: skip
"""Calls refused whatever their arguments (why: the module's docstring)."""

ENFORCED = (
    "seccomp: sockets TCP and unix stream pairs only (no UDP, raw, netlink, packet or other "
    "unix), no TCP Fast Open, io_uring, ptrace, bpf, namespaces, mounts or keyrings"
)
"""What the filter enforces, as the run's isolation line says it."""


NUMBERS = {
    "socket": (41, 198), "socketpair": (53, 199), "listen": (50, 201),
    "sendto": (44, 206), "sendmsg": (46, 211), "sendmmsg": (307, 269),
    "clone": (56, 220), "clone3": (435, 435), "seccomp": (317, 277),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "unshare": (272, 97), "setns": (308, 268),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
}  # fmt: skip
"""Each call's number on x86_64 (``asm/unistd_64.h``) and on AArch64 (``asm-generic/unistd.h``)."""


@dataclass(frozen=True, eq=False)  # one of each, compared and hashed by identity
class Arch:
    """An architecture the filter is written for: its audit id and its call numbers."""

    name: str
    audit: int
    numbers: Mapping[str, int]
    x32: bool = False
    """Whether numbers with ``X32_BIT`` set are another ABI's (x86_64's x32)."""


X86_64 = Arch(
    "x86_64",
    0xC000_003E,  # EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
    {name: pair[0] for name, pair in NUMBERS.items()},
    x32=True,
)
AARCH64 = Arch(
    "aarch64",
    0xC000_00B7,  # EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
    {name: pair[1] for name, pair in NUMBERS.items()},
)
ARCHES = {arch.name: arch for arch in (X86_64, AARCH64)}
"""By the machine's name as ``uname`` gives it on Linux."""


# -- the program ----------------------------------------------------------------------------------

Instruction = tuple[int, int, int, int]
"""A ``struct sock_filter``: code, jump-if-true, jump-if-false, constant."""

_Step = tuple[int, int, str | None, str | None]
"""An instruction with its jumps by label (None: the next one), before ``_assemble``."""


def program(arch: Arch) -> list[Instruction]:
    """The filter for ``arch``, in the order the kernel runs it: the ABI, then the call's number,
    then the arguments of the few calls allowed only with some."""
    n = arch.numbers
    steps: list[_Step | str] = [
        (_LD_ABS, ARCH, None, None),
        (_JEQ, arch.audit, None, "refuse"),
        (_LD_ABS, NR, None, None),
    ]
    if arch.x32:
        steps.append((_JGE, X32_BIT, "refuse", None))
    checked = {
        "socket": "socket", "socketpair": "socketpair", "clone": "clone", "clone3": "enosys",
        "sendto": "flags3", "sendmmsg": "flags3", "sendmsg": "flags2",
    }  # fmt: skip
    steps += [(_JEQ, n[name], label, None) for name, label in checked.items()]
    steps += [(_JEQ, n[name], "refuse", None) for name in REFUSED]
    steps += [
        (_RET, RET_ALLOW, None, None),
        "socket",
        (_LD_ABS, arg(0), None, None),
        (_JEQ, AF_INET, "stream", None),
        (_JEQ, AF_INET6, "stream", "refuse"),
        "socketpair",
        (_LD_ABS, arg(0), None, None),
        (_JEQ, AF_UNIX, "stream", "refuse"),
        "stream",  # the type and protocol of a socket or a pair
        (_LD_ABS, arg(1), None, None),
        (_AND, 0xFFFF_FFFF & ~SOCK_FLAGS, None, None),
        (_JEQ, SOCK_STREAM, None, "refuse"),
        (_LD_ABS, arg(2), None, None),
        (_JEQ, 0, "allow", None),
        (_JEQ, IPPROTO_TCP, "allow", "refuse"),
        "clone",
        (_LD_ABS, arg(0), None, None),
        (_JSET, CLONE_NEW, "refuse", "allow"),
        "flags3",
        (_LD_ABS, arg(3), None, None),
        (_JSET, MSG_FASTOPEN, "refuse", "allow"),
        "flags2",
        (_LD_ABS, arg(2), None, None),
        (_JSET, MSG_FASTOPEN, "refuse", "allow"),
        "allow",
        (_RET, RET_ALLOW, None, None),
        "refuse",
        (_RET, RET_ERRNO | errno.EPERM, None, None),
        "enosys",
        (_RET, RET_ERRNO | errno.ENOSYS, None, None),
    ]
    return _assemble(steps)


def _assemble(steps: list[_Step | str]) -> list[Instruction]:
    """Labels (the strings) resolved to the forward jumps classic BPF has (at most 255)."""
    at: dict[str, int] = {}
    code: list[_Step] = []
    for step in steps:
        if isinstance(step, str):
            at[step] = len(code)
        else:
            code.append(step)

    def jump(label: str | None, i: int) -> int:
        offset = 0 if label is None else at[label] - i - 1
        assert 0 <= offset <= 255, f"a jump of {offset} from instruction {i}"
        return offset

    return [(op, jump(t, i), jump(f, i), k) for i, (op, k, t, f) in enumerate(code)]
