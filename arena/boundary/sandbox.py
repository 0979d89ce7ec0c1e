"""What a plugin may do while it runs: ``Sandbox`` runs plugin code under the frozen clock with a
time limit, turns anything it raises (``SystemExit`` and a plugin's own ``KeyboardInterrupt``
included) into an error text, keeps a real Ctrl-C apart from a plugin's, and during the run
replaces the process-level calls a plugin could end or fork the run with (``os._exit``,
``os.fork``, ``signal.signal``, ``signal.setitimer``, ...) by ones that raise ``SandboxError``.
A freezegun clock the plugin started, stopped or cleared and left so is put back after each
call, and what that call returned is not taken; ``time.clock_gettime`` reads the frozen clock
too (freezegun leaves it real).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import freezegun
from freezegun import api as freezegun_api

from strategies.api import (
    Decision,
    RunStopped,
)
from strategies.llm.calls import stop_current

if TYPE_CHECKING:
    pass

from arena.boundary.checks import capped


class DecisionTimeout(Exception):
    """A strategy ran past its per-decision time limit."""


class SandboxError(Exception):
    """A plugin called something that would end, fork or unguard the run."""


class RunInterrupted(KeyboardInterrupt):
    """The person at the keyboard pressed Ctrl-C: the run stops (and can be resumed).

    A subclass, so a plugin that raises ``KeyboardInterrupt`` itself is told apart from it.
    ``recorded``: the decision it cut short, as the log should record it (a HOLD carrying the
    model calls it made, see ``arena.boundary.agents.InProcess``), or None."""

    recorded: tuple[Decision, str | None] | None = None


ALARM_POLL = 0.1
"""How often the time limit's thread wakes (see ``_alarm_taker``)."""

TEXT_SECONDS = 1.0
"""The time an error's text may take to make, per part (message, traceback)."""

TIMED_OUT = "DecisionTimeout: decision took longer than {seconds:g} s"
INTERRUPTED = "RunInterrupted: the run was interrupted (Ctrl-C)"


# -- what a plugin sees ----------------------------------------------------------------------

SCAN_SKIPS = ("numpy",)
"""Packages freezegun's first ``start()`` does not scan for references to replace. Scanning
numpy reads its lazy attributes, importing about 100 of its submodules (0.11–0.14 CPU-s in
every process that replays); none of them holds a reference freezegun replaces (numpy reads
the clock through ``time.``'s attributes, which freezegun patches, or in C, which no
configuration of freezegun reaches: ``numpy.datetime64("now")`` is the real date either way).
freezegun also hands the real time to a call with an ignored package among its nearest frames,
so ``Clock`` takes these back out of that list: plugin code that numpy calls back
(``numpy.vectorize``, ``apply_along_axis``) reads the frozen clock as before."""

freezegun.configure(extend_ignore_list=list(SCAN_SKIPS))


class Clock:
    """freezegun's frozen clock, moved by whole seconds.

    ``tick`` with a timedelta only adds it; ``move_to`` would parse and convert a datetime on
    every decision, which was half of the per-decision cost of the plugin boundary.
    """

    def __init__(self, frozen_time: Any, ts: int) -> None:
        self._frozen = frozen_time
        self._ts = ts
        unscanned_only(freezegun_api.ignore_lists)

    def move_to(self, ts: int) -> None:
        if ts != self._ts:
            self._frozen.tick(timedelta(seconds=ts - self._ts))
            self._ts = ts


def unscanned_only(ignore_lists: list[tuple[str, ...]]) -> None:
    """The newest freezegun clock's ignore list without ``SCAN_SKIPS``: they were left out
    of its scan, not given the real time (see ``SCAN_SKIPS``)."""
    if ignore_lists:
        ignore_lists[-1] = tuple(m for m in ignore_lists[-1] if not m.startswith(SCAN_SKIPS))


_CLOCK_STACKS: tuple[list[Any], ...] = (
    freezegun_api.freeze_factories,
    freezegun_api.tz_offsets,
    freezegun_api.ignore_lists,
    freezegun_api.tick_flags,
)


def _clock_stacks() -> tuple[tuple[Any, ...], ...]:
    return tuple(map(tuple, _CLOCK_STACKS))


def _restore_clock(saved: tuple[tuple[Any, ...], ...]) -> bool:
    """freezegun's stacks put back as they were before plugin code ran; True if it had changed
    them. A plugin that starts its own ``freeze_time`` and never stops it (or a library it uses
    that leaks one) would otherwise set every later agent's clock to its instant. Compared as
    tuples (factories by identity, as they define no equality): about 1 µs a plugin call."""
    changed = False
    for stack, before in zip(_CLOCK_STACKS, saved, strict=True):
        if tuple(stack) != before:
            stack[:] = before
            changed = True
    return changed


_REALTIME = frozenset(
    getattr(time, name) for name in ("CLOCK_REALTIME", "CLOCK_TAI") if hasattr(time, name)
)
_MONOTONIC = frozenset(
    getattr(time, name)
    for name in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_BOOTTIME", "CLOCK_UPTIME")
    if hasattr(time, name)
)


def _frozen_clock_reader(
    real: Callable[[int], Any], wall: str, monotonic: str
) -> Callable[[int], Any]:
    """``time.clock_gettime`` (or ``_ns``) that reads the wall and monotonic clocks from the
    frozen ``time.<wall>`` / ``time.<monotonic>``, looked up at each call, as freezegun does not
    patch it; CPU clocks stay real."""

    def read(clock: int) -> Any:
        if clock in _REALTIME:
            return getattr(time, wall)()
        if clock in _MONOTONIC:
            return getattr(time, monotonic)()
        return real(clock)

    return read


_CLOCK_READERS: tuple[tuple[str, str, str], ...] = tuple(
    reader
    for reader in (
        ("clock_gettime", "time", "monotonic"),
        ("clock_gettime_ns", "time_ns", "monotonic_ns"),
    )
    if hasattr(time, reader[0])
)
"""``time`` functions freezegun leaves real, each with the frozen ones it should read."""

_setitimer = signal.setitimer if hasattr(signal, "setitimer") else None
_REAL_CLOCK = (freezegun_api.real_monotonic,)
"""The time limit's clock: freezegun freezes ``time.monotonic`` for the whole run, and replaces
a module's own reference to the real one as well (not one held in a tuple)."""

MIN_ARM = 1e-5
"""The shortest the timer is armed for (a zero would disarm it)."""
_signal = signal.signal


def _forbidden(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise SandboxError(f"a strategy may not call {name} during a replay")

    return refuse


def _kill_others_only(kill: Callable[[int, int], None]) -> Callable[[int, int], None]:
    """``os.kill`` for the processes a plugin started, not for the run's own process group:
    a plugin must not stop the run by sending itself the Ctrl-C a person would."""

    def kill_other(pid: int, sig: int) -> None:
        if pid in (0, -1, os.getpid()) or -pid == os.getpgid(0):
            raise SandboxError("a strategy may not signal the replay's own process")
        kill(pid, sig)

    return kill_other


_GUARDED: tuple[tuple[Any, str, str], ...] = (
    (os, "_exit", "os._exit"),
    (os, "fork", "os.fork"),
    (os, "forkpty", "os.forkpty"),
    (os, "kill", "os.kill"),
    (os, "killpg", "os.killpg"),
    (signal, "raise_signal", "signal.raise_signal"),
    (signal, "signal", "signal.signal"),
    (signal, "setitimer", "signal.setitimer"),
    (signal, "alarm", "signal.alarm"),
    (signal, "pthread_kill", "signal.pthread_kill"),
)


def _modules_to_guard() -> list[tuple[Any, str, str]]:
    """``os`` and the C modules under it (``posix``, ``_signal``) hold the same functions."""
    found = []
    extra: list[Any] = []
    for name in ("posix", "_signal"):
        with contextlib.suppress(ImportError):  # Windows has neither
            extra.append(__import__(name))
    for module, attr, label in _GUARDED:
        if hasattr(module, attr):
            found.append((module, attr, label))
            for other in extra:
                if getattr(other, attr, None) is getattr(module, attr):
                    found.append((other, attr, label))
    return found


CLOCK_CHANGED = (
    "the strategy started or stopped a freezegun clock and left it so; it was put back, and "
    "what the strategy returned is not taken"
)


class Sandbox:
    """Runs plugin code for one replay: time limit, guards, and a Ctrl-C told apart.

    ``guarded`` is entered once for the whole run (installing handlers and guards costs
    system calls). Inside it the timer is not disarmed after each call: a call notes its
    deadline (one read of the clock) and arms the timer only if it is not armed to go off by
    then, so a run of quick decisions arms it once per ``seconds``, not twice a call. When it
    goes off early (armed for an earlier call) it is armed again for the rest of the running
    call's time; between calls it does nothing. Where there is no interval timer (Windows) or
    the run is not on the main thread, plugin code runs without a time limit and Ctrl-C keeps
    Python's own handling.
    """

    def __init__(self, seconds: float, stop: int | None = None) -> None:
        self.seconds = seconds
        self.stop = stop
        """A signal that cuts the guarded run as a Ctrl-C does (an engine's worker is told to
        stop so: the terminal's Ctrl-C is its driver's to handle), taken once: a second one
        (the worker pool's own, as it sees a sibling end) must not cut short the journaling of
        the decision the first one cut."""
        main = threading.current_thread() is threading.main_thread()
        self.main = main
        self.timed = seconds > 0 and _setitimer is not None and main
        self.interrupted = False
        self._deadline: float | None = None
        """When the running call's time is up (``_REAL_CLOCK``); None between calls."""
        self._armed: float | None = None
        """When the timer is armed to go off, or None if it is not."""
        self._guarding = False
        self._clock = _REAL_CLOCK[0]

    @contextlib.contextmanager
    def guarded(self) -> Iterator[None]:
        def expire(signum: int, frame: Any) -> None:
            deadline = self._deadline
            if deadline is None:  # between calls: the timer a call left armed went off
                self._armed = None
                return
            left = deadline - self._clock()
            if left > 0:  # armed for an earlier call: on for the rest of this one's time
                assert _setitimer is not None
                _setitimer(signal.ITIMER_REAL, max(left, MIN_ARM))
                self._armed = deadline
                return
            self._armed = None
            stop_current(TIMED_OUT.format(seconds=self.seconds))  # no model call sent after
            raise DecisionTimeout(f"decision took longer than {self.seconds:g} s")

        def interrupt(signum: int, frame: Any) -> None:
            self.interrupted = True
            stop_current(INTERRUPTED)
            raise RunInterrupted()

        def told_to_stop(signum: int, frame: Any) -> None:
            _signal(signum, signal.SIG_IGN)
            interrupt(signum, frame)

        handlers: list[tuple[int, Any]] = []
        if self.timed:
            handlers.append((signal.SIGALRM, _signal(signal.SIGALRM, expire)))
            done = threading.Event()
            _alarm_taker(done)
        if self.main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            handlers.append((signal.SIGINT, _signal(signal.SIGINT, interrupt)))
        if self.main and self.stop is not None:
            handlers.append((self.stop, _signal(self.stop, told_to_stop)))
        patched = _modules_to_guard()
        saved = [(module, attr, getattr(module, attr)) for module, attr, _ in patched]
        for module, attr, label in patched:
            setattr(module, attr, _forbidden(label))
        for module, attr, value in saved:
            if attr == "kill":
                setattr(module, attr, _kill_others_only(value))
        for attr, wall, monotonic in _CLOCK_READERS:
            saved.append((time, attr, getattr(time, attr)))
            setattr(time, attr, _frozen_clock_reader(getattr(time, attr), wall, monotonic))
        self._guarding = self.timed
        try:
            yield
        finally:
            self._guarding = False
            if self.timed:
                done.set()
            for module, attr, value in saved:
                setattr(module, attr, value)
            if self.timed and _setitimer is not None:
                _setitimer(signal.ITIMER_REAL, 0)
                self._armed = self._deadline = None
            for signum, previous in handlers:
                _signal(signum, previous)

    def call(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
        """``(fn(*args), None)``, or ``(None, error text)`` if it raised or ran out of time.

        Only a real Ctrl-C escapes (as ``RunInterrupted``, even when the plugin caught it),
        and a ``RunStopped``, which a strategy raises to stop the run on purpose."""
        result, error = None, None
        clock = _clock_stacks()
        mask = _signal_mask()
        try:
            self._start()
            try:
                result = fn(*args)
            except (RunInterrupted, RunStopped):
                raise
            except BaseException as exc:
                self._stop()
                error = self._text(exc)
            finally:
                self._stop()
        except (RunInterrupted, RunStopped):
            raise
        except BaseException as exc:
            result, error = None, self._text(exc)
        finally:
            if _restore_clock(clock) and error is None:
                result, error = None, CLOCK_CHANGED
            _restore_signal_mask(mask)
        if self.interrupted:
            raise RunInterrupted()
        return result, error

    def _text(self, exc: BaseException) -> str:
        """``error_text(exc)`` within a bound: the plugin's exception is plugin code too (its
        ``__str__`` may never return), so each step of the text has ``TEXT_SECONDS``, the
        timer striking again until the text is made (each strike gives up one part of it)."""
        if not (self.timed and _setitimer is not None):
            return error_text(exc)
        self._deadline = -math.inf  # every strike is past it
        _setitimer(signal.ITIMER_REAL, TEXT_SECONDS, TEXT_SECONDS)
        try:
            return error_text(exc)
        finally:
            _setitimer(signal.ITIMER_REAL, 0)
            self._armed = self._deadline = None

    def _start(self) -> None:
        if self.timed and _setitimer is not None:
            deadline = self._clock() + self.seconds
            self._deadline = deadline  # before the test: the timer may go off in between
            armed = self._armed
            if armed is None or armed > deadline or not self._guarding:
                _setitimer(signal.ITIMER_REAL, self.seconds)
                self._armed = deadline

    def _stop(self) -> None:
        if self.timed and _setitimer is not None:
            self._deadline = None
            if not self._guarding:  # no handler of ours: the timer must not outlive the call
                _setitimer(signal.ITIMER_REAL, 0)
                self._armed = None


def _signal_mask() -> set[int | signal.Signals] | None:
    """The calling thread's blocked signals (None where the platform has no such mask)."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, ())


def _restore_signal_mask(mask: set[int | signal.Signals] | None) -> None:
    """The blocked signals put back as they were before a plugin's call: a plugin that blocks
    SIGALRM (or SIGINT) must not leave it blocked for the run after it, nor for every process
    the run starts afterwards (a child inherits the mask, and its own time limit would never
    strike while it waits in a system call)."""
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _alarm_taker(done: threading.Event) -> None:
    """A thread, until ``done``, that leaves SIGALRM unblocked: a plugin that blocks it on the
    main thread (``signal.pthread_sigmask``, or through ``ctypes``) no longer holds the time
    limit off, since the kernel hands the timer's signal to a thread that takes it. Python runs
    the handler on the main thread, but notices a signal taken by another thread only when the
    main thread next waits for the GIL: the thread wakes every ``ALARM_POLL`` seconds to ask
    for it. (A plugin blocked in one long system call with the signal blocked is only stopped
    by ``--isolate``'s kill.)"""

    def wait() -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
        while not done.wait(ALARM_POLL):
            pass

    threading.Thread(target=wait, name="arena-time-limit", daemon=True).start()


def error_text(exc: BaseException) -> str:
    """First line: the error; then the traceback, so the log explains what went wrong.

    Frames name files without their directories: where the code happens to be installed must
    not change the bytes of the log (the same inputs give the same log on any machine). An
    error whose message cannot be shown (its ``__str__`` raises) is named by its type; the
    text is cut to ``MAX_TEXT`` characters."""
    name = type(exc).__name__
    try:
        message = str(exc)
    except BaseException:
        message = "(its message could not be shown: its __str__ raised)"
    try:
        report = traceback.TracebackException.from_exception(exc)
        pending = [report]
        while pending:
            link = pending.pop()
            for frame in link.stack:
                frame.filename = os.path.basename(frame.filename)
            pending += [e for e in (link.__cause__, link.__context__) if e is not None]
        text = f"{name}: {message}\n{''.join(report.format())}"
    except BaseException:
        text = f"{name}: {message}\n(the traceback could not be formatted)"
    return capped(text)[0]


# -- what a plugin returns -------------------------------------------------------------------
