"""The OS sandbox of an ``--isolate`` worker: what the kernel holds a plugin's process to, beyond
what Python code can promise.

Landlock (Linux 5.13+, no extra package, no privilege: a process confines itself, for good)
through ``ctypes``: the worker may read only the Python standard library, the installed
libraries, the arena packages (not the tapes shipped in ``replays/samples``) and the plugin's
own folder; it may write only a scratch folder of its own; TCP connect and bind are refused
(ABI 4+) but for the port of a model endpoint the environment names (``ARENA_LLM_BASE_URL``: an
LLM agent must reach its server); it may signal only processes in its own sandbox (ABI 6+), so
no ``kill`` reaches the run. bubblewrap would need a package CI may lack and user namespaces a
kernel may refuse; Landlock needs neither, and is detected at run time. Resource limits bound
memory (``RLIMIT_AS``), the size of a file written (``RLIMIT_FSIZE``) and core dumps; no
``RLIMIT_NPROC``: it counts every process of the user (the run and its other workers
included), and forks are refused by the sandbox's guards and by Landlock's exec rule anyway.

What Landlock does not cover (UDP and every other kind of socket, TCP Fast Open, io_uring,
ptrace, namespaces) a seccomp filter refuses, installed right after it (``seccomp.py``: x86_64
and AArch64, Linux 4.14+). With no UDP there is no DNS, so the worker looks up the model
endpoint's name first and answers later lookups of it from that (``_pin``).
What is not enforced (no Landlock, an older ABI, no filter for this architecture) is said in
the one line ``Confinement.summary`` gives, which an isolated cohort's opening records
(``CohortOpened.settings["isolation"]``), so the log says what its plugins were held to.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import importlib.util
import ipaddress
import os
import signal
import socket
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.boundary import seccomp

MEMORY_BYTES = 4 * 2**30
"""Address space of a worker: room for numpy, a model client and a forecaster's arrays."""
FILE_BYTES = 256 * 2**20
"""The largest file a worker may write (in its scratch folder)."""

# -- the kernel's interface (linux/landlock.h, linux/prctl.h) ---------------------------------

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_VERSION = 1
_PATH_BENEATH, _NET_PORT = 1, 2
_NO_NEW_PRIVS, _PDEATHSIG = 38, 1
_SET_FILTER, _ACTION_AVAIL, _TSYNC = 1, 2, 1  # seccomp(2)'s operations and its one flag used

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE | _IOCTL_DEV
READ = EXECUTE | READ_FILE | READ_DIR
_BIND_TCP, _CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class ConfinementError(OSError):
    """The sandbox the run promised could not be put in place; the plugin does not run."""


class _Ruleset(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _syscall(number: int, *args: object) -> int:
    libc = _libc()
    if libc is None:
        raise ConfinementError(errno.ENOSYS, "no system calls from here")
    libc.syscall.restype = ctypes.c_long
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]  # full registers
    result = int(libc.syscall(ctypes.c_long(number), *wide))
    if result < 0:
        code = ctypes.get_errno()
        raise ConfinementError(code, os.strerror(code))
    return result


def _prctl(option: int, value: int) -> None:
    libc = _libc()
    if libc is None or libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        code = ctypes.get_errno() if libc is not None else errno.ENOSYS
        raise ConfinementError(code, f"prctl({option}): {os.strerror(code)}")


@functools.cache
def landlock_abi() -> int:
    """The Landlock ABI this kernel offers, 0 if none (not Linux, too old, or turned off)."""
    try:
        return _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    except ConfinementError:
        return 0


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


# -- what a worker is held to ------------------------------------------------------------------


@dataclass(frozen=True)
class Confinement:
    """The sandbox every isolated worker of a run gets, decided once by the driver from what
    the kernel offers (``plan``), so the line the log records is what each worker applies; a
    worker that cannot apply it refuses to run its plugin (``ConfinementError``)."""

    landlock: int
    """The Landlock ABI used; 0: none."""
    endpoint_port: int | None = None
    """The one TCP port a worker may connect to (the model endpoint), if any."""
    seccomp_filter: bool = False
    """Whether the worker installs ``arena.boundary.seccomp``'s filter after Landlock."""
    endpoint_host: str | None = None
    """The model endpoint's host, looked up before the filter refuses DNS (``_pin``); never in
    the line the log records."""

    def summary(self) -> str:
        """What is and is not enforced, in one line with no path in it (the same on any
        machine with the same kernel features)."""
        abi = self.landlock
        kept = f"memory {MEMORY_BYTES // 2**30} GiB, files {FILE_BYTES // 2**20} MiB, no core"
        own = "own session, dies with the run"
        if not abi and not self.seccomp_filter:
            return (
                "no OS sandbox (no Landlock, no seccomp filter): reads, writes, network and "
                f"signals are not confined; {kept}; {own}"
            )
        if abi:
            parts = [
                f"landlock abi {abi}",
                "reads the libraries and the plugin's folder only",
                "writes its scratch folder only",
            ]
        else:
            parts = ["no Landlock: reads and writes not confined"]
        if abi >= 4:
            but = f" but port {self.endpoint_port}" if self.endpoint_port else ""
            parts.append(f"TCP refused{but}")
        else:
            parts.append("TCP not confined (no Landlock ABI 4)")
        if self.seccomp_filter:
            parts.append(seccomp.ENFORCED)
        else:
            parts.append("UDP and other sockets not confined (no seccomp filter)")
        parts.append("signals its own sandbox only" if abi >= 6 else "signals not confined")
        return "; ".join([*parts, kept, own])

    @property
    def complete(self) -> bool:
        """Whether every confinement Landlock and the seccomp filter can give is in force."""
        return self.landlock >= 6 and self.seccomp_filter


def plan(environ: dict[str, str] | None = None) -> Confinement:
    """The confinement this machine can give a worker, and the model endpoint it may reach."""
    host, port = _endpoint(os.environ if environ is None else environ)
    return Confinement(landlock_abi(), port, seccomp_arch() is not None, host)


def _endpoint(environ: dict[str, str] | os._Environ[str]) -> tuple[str | None, int | None]:
    """The host and port of the model endpoint the environment names; (None, None) if none."""
    from strategies.llm.connection import PREFIX, Connection

    if not environ.get(PREFIX + "BASE_URL"):
        return None, None
    try:
        url = Connection.from_env(environ).base_url
    except ValueError:
        return None, None
    import httpx

    parsed = httpx.URL(url)
    return parsed.host or None, parsed.port or (443 if parsed.scheme == "https" else 80)


@functools.cache
def seccomp_arch() -> seccomp.Arch | None:
    """The architecture whose filter this process can install, None if none: not Linux, a
    machine the filter is not written for (or a 32-bit Python on a 64-bit kernel, whose calls
    are another ABI's), or a kernel without seccomp filters that fail a call with an errno."""
    arch = seccomp.ARCHES.get(os.uname().machine.lower()) if hasattr(os, "uname") else None
    if arch is None or sys.maxsize <= 2**32:
        return None
    action = ctypes.c_uint32(seccomp.RET_ERRNO)
    try:
        _syscall(arch.numbers["seccomp"], _ACTION_AVAIL, 0, ctypes.byref(action))
    except ConfinementError:
        return None
    return arch


# -- in the worker -----------------------------------------------------------------------------


def own_session() -> None:
    """A session and process group of its own: the terminal's Ctrl-C and a ``killpg`` of the
    run's group do not reach the worker, and the worker's ``killpg(0)`` reaches only itself.
    The worker dies with the process that started it (the forkserver, which ends when the run
    does) by ``PR_SET_PDEATHSIG``, even when the run is killed with SIGKILL."""
    with contextlib.suppress(OSError):  # already a group leader
        os.setsid()
    die_with_parent()


def die_with_parent() -> None:
    """SIGKILL to this process when its parent ends (Linux); nothing elsewhere."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(ConfinementError):
            _prctl(_PDEATHSIG, signal.SIGKILL)


def limit_resources() -> None:
    """Memory, file size and core dumps bounded; a write past the size fails (EFBIG) rather
    than killing the worker with SIGXFSZ. Nothing where there are no such limits (Windows)."""
    try:
        import resource
    except ImportError:
        return
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for which, value in (
        (resource.RLIMIT_AS, MEMORY_BYTES),
        (resource.RLIMIT_FSIZE, FILE_BYTES),
        (resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(which, (cap, hard))


def confine(confinement: Confinement, plugin_folders: Iterable[str], scratch: str) -> None:
    """Put ``confinement`` in force on this process, for good: the resource limits, then
    Landlock's rules and the seccomp filter (when the run has them). ``ConfinementError`` if
    the kernel refuses."""
    limit_resources()
    arch = seccomp_arch() if confinement.seccomp_filter else None
    if confinement.seccomp_filter and arch is None:
        raise ConfinementError(errno.ENOSYS, "this kernel has no seccomp filter for it")
    if arch is not None and confinement.endpoint_host and confinement.endpoint_port:
        # before Landlock too, so the resolver may load whatever modules its lookup needs
        _pin(confinement.endpoint_host, confinement.endpoint_port)
    if confinement.landlock:
        _landlock(confinement, plugin_folders, scratch)
    if arch is not None:
        _filter(arch)


def _landlock(confinement: Confinement, plugin_folders: Iterable[str], scratch: str) -> None:
    abi = confinement.landlock
    if landlock_abi() < abi:
        raise ConfinementError(errno.ENOSYS, f"this kernel has no Landlock ABI {abi}")
    fs = _fs_rights(abi)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    attr = _Ruleset(
        handled_access_fs=fs,
        handled_access_net=(_BIND_TCP | _CONNECT_TCP) if abi >= 4 else 0,
        scoped=(_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    ruleset = _syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    try:
        for path, rights in readable(plugin_folders):
            _allow(ruleset, path, rights & fs)
        _allow(ruleset, scratch, fs)
        for device in ("/dev/null", "/dev/zero", "/dev/urandom"):
            _allow(ruleset, device, (READ_FILE | WRITE_FILE) & fs)
        if abi >= 4 and confinement.endpoint_port:
            rule = _NetPort(allowed_access=_CONNECT_TCP, port=confinement.endpoint_port)
            _syscall(_ADD_RULE, ruleset, _NET_PORT, ctypes.byref(rule), 0)
        _prctl(_NO_NEW_PRIVS, 1)
        _syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _filter(arch: seccomp.Arch) -> None:
    """``seccomp.program(arch)`` installed on every thread of this process (``TSYNC``: the
    worker's watch threads started before it are held to it too), for good."""
    instructions = seccomp.program(arch)
    table = (_SockFilter * len(instructions))(*(_SockFilter(*i) for i in instructions))
    prog = _SockFprog(len(instructions), table)
    _prctl(_NO_NEW_PRIVS, 1)  # what lets a process without privileges install a filter
    thread = _syscall(arch.numbers["seccomp"], _SET_FILTER, _TSYNC, ctypes.byref(prog))
    if thread:
        raise ConfinementError(errno.EBUSY, f"thread {thread} could not take the filter")


def _pin(name: str, service: int) -> None:
    """``name`` (the model endpoint's host) looked up now, while the resolver's UDP is still
    allowed, and ``socket.getaddrinfo`` answering the client's lookups of it (a stream socket
    to port ``service``) from that for the worker's life; a worker started again looks it up
    again. An address needs no lookup; a name that does not resolve now fails later, as it
    would have."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(name)
        return
    try:
        found = socket.getaddrinfo(name, service, 0, socket.SOCK_STREAM)
    except OSError:
        return
    lookup = socket.getaddrinfo

    def pinned(host: bytes | str | None, port: bytes | str | int | None, family: int = 0,
               type: int = 0, proto: int = 0, flags: int = 0) -> list[Any]:  # fmt: skip
        asked = [x.decode("ascii", "replace") if isinstance(x, bytes) else x for x in (host, port)]
        if (
            isinstance(asked[0], str)
            and asked[0].lower() == name.lower()
            and str(asked[1]) == str(service)
            and type in (0, socket.SOCK_STREAM)
            and proto in (0, socket.IPPROTO_TCP)
        ):
            return [f for f in found if family in (0, f[0])]
        return lookup(host, port, family, type, proto, flags)

    socket.getaddrinfo = pinned


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # nothing there to allow
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(allowed_access=rights, parent_fd=fd)
        _syscall(_ADD_RULE, ruleset, _PATH_BENEATH, ctypes.byref(rule), 0)
    finally:
        os.close(fd)


# -- what a worker may read ---------------------------------------------------------------------

NETWORK_FILES = ("/etc/hosts", "/etc/nsswitch.conf", "/etc/resolv.conf", "/etc/gai.conf",
                 "/etc/ssl", "/etc/localtime", "/usr/share/zoneinfo")  # fmt: skip
"""System files a model client and a clock need (names, certificates, time zones)."""

ARENA_PACKAGES = ("arena", "ledger", "replays", "strategies")


def forbidden() -> list[str]:
    """Folders inside readable ones that a plugin must not read: the tapes and books that ship
    in the package (the future of every cohort replayed from them)."""
    spec = importlib.util.find_spec("replays.samples")
    return [os.path.realpath(p) for p in (spec.submodule_search_locations or [])] if spec else []


def readable(plugin_folders: Iterable[str]) -> list[tuple[str, int]]:
    """Every path the worker may read, each with its rights: the standard library, the
    installed libraries (``sys.path`` entries under a prefix or named ``site-packages``), the
    arena packages and the plugin's folders, less ``forbidden()``; a project folder on
    ``sys.path`` (an editable install, a test run) only listed, so imports find what is in it
    but nothing in it is read unless allowed by name."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots: set[str] = set()
    listed: set[str] = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        roots.add(os.path.realpath(sysconfig.get_paths()[name]))
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        if not os.path.exists(path):
            continue
        under_prefix = any(path == p or path.startswith(p + os.sep) for p in prefixes)
        if under_prefix or os.path.basename(path) in ("site-packages", "dist-packages"):
            roots.add(path)
        else:
            listed.add(path)
    for package in ARENA_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None:
            roots.update(os.path.realpath(p) for p in spec.submodule_search_locations or [])
    roots.update(os.path.realpath(p) for p in plugin_folders)
    roots.update(p for p in NETWORK_FILES if os.path.exists(p))
    out = [(p, READ_DIR) for p in sorted(listed)]
    for root in sorted(roots):
        out += list(_less(root, forbidden()))
    return out


def _less(root: str, excluded: list[str]) -> Iterator[tuple[str, int]]:
    """``root`` readable, or where a forbidden path lies beneath it, ``root`` listed (imports
    find its modules) and each of its parts but that path readable."""
    inside = [e for e in excluded if e == root or e.startswith(root + os.sep)]
    if not inside:
        yield root, READ
        return
    if root in inside:
        return
    try:
        children = sorted(os.listdir(root))
    except OSError:
        return
    yield root, READ_DIR
    for child in children:
        yield from _less(os.path.join(root, child), inside)


def plugin_folders(plugin: object) -> list[str]:
    """What a plugin may read besides the libraries: a file spec's folder, a ``module:Class``
    spec's top-level package, a ready object's top-level package (nothing for a built-in), and
    any file its spec names (``scripted:decisions.json``, ``sign?forecaster=file:f.csv``)."""
    from strategies.loader import AgentSpec, available

    if not isinstance(plugin, str):
        return _package_folder(type(plugin).__module__.partition(".")[0])
    spec = AgentSpec.parse(plugin)
    named = [
        os.path.realpath(part)
        for value in (spec.arg, *spec.settings.values())
        for part in {value, value.rpartition(":")[2]}
        if part and os.path.exists(part)
    ]
    where = available().get(spec.kind, spec.kind).rpartition(":")[0]
    if where.endswith(".py"):
        return [str(Path(where).resolve().parent), *named]
    return [*_package_folder(where.partition(".")[0]), *named]


def _package_folder(top: str) -> list[str]:
    if top in ARENA_PACKAGES or not top:
        return []
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [os.path.realpath(p) for p in spec.submodule_search_locations]
    return [os.path.realpath(spec.origin)] if spec.origin and os.path.exists(spec.origin) else []
