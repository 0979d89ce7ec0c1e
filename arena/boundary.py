"""The plugin boundary: everything between the replay loop and a strategy's code.

The loop (``arena.runner``) trades, settles and records; this module owns the contract with
the plugin on the other side:

* **What a plugin sees.** ``Past`` holds the universe's price points *up to the instant being
  decided*, copied in as time passes (``PastWriter``): memory that has no future in it, so a
  view cannot hand one out however it is asked (``markets._history(i, 2**62, None)`` ends at the
  instant). Every array a view hands out is a copy the plugin owns or a read-only buffer whose
  ultimate owner is read-only (``frozen``): bytes, or a read-only memory map. No plugin can
  re-flag such an array writable and rewrite the prices another agent trades on.
* **What a plugin may do while it runs.** ``Sandbox`` runs plugin code under the frozen clock
  with a time limit, turns anything it raises (``SystemExit`` and a plugin's own
  ``KeyboardInterrupt`` included) into an error text, keeps a real Ctrl-C apart from a
  plugin's, and during the run replaces the process-level calls a plugin could end or fork the
  run with (``os._exit``, ``os.fork``, ``signal.signal``, ``signal.setitimer``, ...) by ones
  that raise ``SandboxError``. A freezegun clock the plugin started, stopped or cleared and
  left so is put back after each call, and what that call returned is not taken;
  ``time.clock_gettime`` reads the frozen clock too (freezegun leaves it real).
* **What a plugin returns.** ``checked`` turns a decision into builtin, bounded values (finite
  amounts up to ``MAX_AMOUNT``, beliefs in [0, 1], at most ``MAX_ORDERS`` orders and
  ``MAX_TEXT`` characters of reasoning and of each model call's texts, ``MAX_TRACE_TEXT`` of
  model text in all, truncations noted), or says why it cannot.

What in-process protection cannot stop: code in the same interpreter can walk
``gc.get_objects()`` to the tape or the broker, patch classes, use ``ctypes`` to write any
memory, call functions it bound before the run began, or swallow the time limit's exception
in a loop. ``arena.isolation`` runs each agent in its own process for code you do not trust,
and ``arena verify --tape`` re-checks every fill against the tape.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import mmap
import numbers
import os
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import msgspec
import numpy as np
from freezegun import api as freezegun_api

from ledger.events import BetIntent, ModelCall, SellIntent
from ledger.live import PositionRecord
from ledger.rules import RuleSet
from replays.tape import spans
from strategies.api import (
    Context,
    Decision,
    MarketMeta,
    MarketsView,
    PositionView,
    RunStopped,
    Strategy,
    Trace,
    View,
)
from strategies.api import History as ReadHistory

if TYPE_CHECKING:
    from replays.asof import AsOf
    from replays.tape import Tape

MAX_AMOUNT = 1e12
"""The largest dollar amount a bet may ask for: far beyond any cash, far below overflow."""

MAX_ORDERS = 1_000
"""Orders (bets plus sells) kept from one decision: one bet and one sell on every market of
the default 500-market universe; the rest are dropped with a note in the log."""

MAX_TEXT = 100_000
"""Characters kept of a decision's reasoning and of each text of its trace (an LLM's prompt
and answer fit many times over); a 50 MB reasoning per decision made a 550 MB log."""

MAX_CALLS = 10_000
"""Model calls kept from one decision's trace (a forecaster asks once per market or more)."""

MAX_TRACE_TEXT = 2_000_000
"""Characters kept of one decision's model calls and system prompts together: each text is
also capped at ``MAX_TEXT``, but twenty calls of 2 MB answers wrote 40 MB per decision."""

CALL_TEXTS = ("model", "question", "request", "system", "answer", "finish_reason", "reasoning",
              "error", "rejected")  # fmt: skip

TRACE_TEXTS = ("prompt", "raw_response", "model", "error")
TRACE_COUNTS = ("tokens_in", "tokens_out", "retries")
TRACE_REALS = ("cost", "latency_ms")


class DecisionTimeout(Exception):
    """A strategy ran past its per-decision time limit."""


class SandboxError(Exception):
    """A plugin called something that would end, fork or unguard the run."""


class RunInterrupted(KeyboardInterrupt):
    """The person at the keyboard pressed Ctrl-C: the run stops (and can be resumed).

    A subclass, so a plugin that raises ``KeyboardInterrupt`` itself is told apart from it."""


# -- what a plugin sees ----------------------------------------------------------------------


def frozen(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` over an immutable bytes object: nobody can make it writable."""
    flat = np.frombuffer(array.tobytes(), dtype=array.dtype)
    return flat if array.ndim == 1 else flat.reshape(array.shape)


class Layout(NamedTuple):
    """The universe's series as the tape stores them: market ``j`` has ``lengths[j]`` points
    of ``widths[j]`` prices each (YES alone for a binary market, whose NO is 1 − YES) and, if
    binary, YES in outcome column ``yes_column[j]`` (-1 for any other market)."""

    lengths: tuple[int, ...]
    widths: tuple[int, ...]
    yes_column: tuple[int, ...]

    @classmethod
    def of(cls, tape: Tape, universe: Sequence[int]) -> Layout:
        markets = [tape.markets[m] for m in universe]
        return cls(
            tuple(len(tape.times(m)) for m in universe),
            tuple(info.stored_columns for info in markets),
            tuple(info.yes_column if info.is_binary else -1 for info in markets),
        )


class Past(NamedTuple):
    """The universe's price points up to the instant being decided, read-only.

    A tuple (its fields cannot be rebound) of arrays over a read-only memory map, filled by a
    ``PastWriter`` as time passes: market ``j``'s visible points are rows
    ``starts[j] : starts[j] + visible[j]`` of ``times``, and their prices ``widths[j]`` a point
    from element ``price_starts[j]`` of ``prices`` on, as the tape stores them.
    """

    times: np.ndarray
    prices: np.ndarray
    visible: np.ndarray
    starts: tuple[int, ...]
    price_starts: tuple[int, ...]
    widths: tuple[int, ...]
    yes_column: tuple[int, ...]

    def history(self, j: int, t: int, since: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(times, values)`` of market ``j`` up to ``t`` (from ``since`` on, if given), every
        outcome's price in outcome order (a binary market's NO derived as 1 − YES): copies the
        caller owns, of the points asked for only."""
        a = self.starts[j]
        times = self.times[a : a + int(self.visible[j])]
        end = int(np.searchsorted(times, t, side="right"))
        begin = 0 if since is None else min(int(np.searchsorted(times, since)), end)
        width, first = self.widths[j], self.price_starts[j]
        stored = self.prices[first + begin * width : first + end * width].reshape(-1, width)
        side = self.yes_column[j]
        if side < 0:
            return times[begin:end].copy(), stored.copy()
        yes = stored[:, 0]
        return times[begin:end].copy(), np.column_stack((yes, 1.0 - yes) if side == 0 else
                                                        (1.0 - yes, yes))  # fmt: skip


class Delta(NamedTuple):
    """The points of each market from its ``since``-th to before its ``until``-th, their times
    and stored prices, market after market: what moves a ``Past`` on (an isolated worker's
    too) from ``since`` visible points to ``until``."""

    since: np.ndarray
    until: np.ndarray
    times: np.ndarray
    prices: np.ndarray


def _shared_map(size: int) -> tuple[mmap.mmap, mmap.mmap]:
    """A writable and a read-only mapping of the same fresh memory."""
    size = max(size, 1)
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("arena-past", os.MFD_CLOEXEC)
    else:  # pragma: no cover - macOS and Windows
        with tempfile.TemporaryFile() as file:
            fd = os.dup(file.fileno())
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size), mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def _carve(source: mmap.mmap, sizes: Sequence[int]) -> list[np.ndarray]:
    """Times (int64), prices (float64) and counts (int64) laid end to end over ``source``."""
    arrays, at = [], 0
    for size, dtype in zip(sizes, (np.int64, np.float64, np.int64), strict=True):
        arrays.append(np.frombuffer(source, dtype=dtype, count=size, offset=at))
        at += size * 8
    return arrays


class PastWriter:
    """Owns the writable side of a ``Past`` and moves it forward, never back. It holds no
    point before its instant has come: each ``Delta`` brings the points that have arrived.
    Plugins get ``past``, never this object."""

    def __init__(self, layout: Layout) -> None:
        lengths = np.asarray(layout.lengths, dtype=np.int64)
        self._widths = np.asarray(layout.widths, dtype=np.int64)
        sizes = lengths * self._widths
        self._starts = np.cumsum(lengths) - lengths
        self._price_starts = np.cumsum(sizes) - sizes
        counts = (int(lengths.sum()), int(sizes.sum()), lengths.size)
        self._maps = _shared_map(sum(counts) * 8)
        self._times, self._prices, self._visible = _carve(self._maps[0], counts)
        times, prices, visible = _carve(self._maps[1], counts)
        self.past = Past(
            times, prices, visible,
            tuple(self._starts.tolist()), tuple(self._price_starts.tolist()),
            layout.widths, layout.yes_column,
        )  # fmt: skip

    @property
    def visible(self) -> np.ndarray:
        """How many points of each market are visible now (a copy)."""
        return self._visible.copy()

    def apply(self, delta: Delta) -> None:
        if not np.array_equal(delta.since, self._visible):
            raise ValueError("a Past moves on only from the points it already shows")
        counts = delta.until - delta.since
        self._times[spans(self._starts + delta.since, counts)] = delta.times
        first = self._price_starts + delta.since * self._widths
        self._prices[spans(first, counts * self._widths)] = delta.prices
        self._visible[:] = delta.until


class Quotes(NamedTuple):
    """Every outcome's price of each market at the instant (``at`` is what
    ``MarketsView.prices`` calls):
    a binary market's from ``yes`` (NO = 1 − YES), any other's from its row of ``rows``
    (``row[j]``; NaN where the market has no price now). Read-only, rebuilt each instant."""

    yes: np.ndarray
    rows: np.ndarray
    row: tuple[int, ...]
    widths: tuple[int, ...]
    yes_column: tuple[int, ...]

    def at(self, j: int) -> tuple[float, ...] | None:
        """Every outcome's price of market ``j`` now, or None before its first point and past
        the tape's coverage of it (where no price is known)."""
        side = self.yes_column[j]
        if side >= 0:
            yes = float(self.yes[j])
            if math.isnan(yes):
                return None
            return (yes, 1.0 - yes) if side == 0 else (1.0 - yes, yes)
        prices = self.rows[self.row[j], : self.widths[j]]
        return None if math.isnan(prices[0]) else tuple(float(x) for x in prices)


_FEEDS: dict[int, PastFeed] = {}
"""The running replays' feeds, by the number their ``History`` handles hold. Here, not in an
attribute of anything a view holds: what a handle could reach through an attribute, a plugin
walking its view could too, and a feed reaches the tape and its future. (Plugin code can read
module state as it can walk ``gc.get_objects()`` to the tape: that is what ``--isolate`` is
for.)"""

_KEYS = itertools.count()


class History(NamedTuple):
    """During a run, ``of`` is what ``MarketsView.history`` calls: the shared ``Past``'s
    history of a market, the ``Past`` built when first asked. A tuple holding a number, nothing
    else: no plugin can rebind it or follow it to the tape."""

    key: int

    def of(self, j: int, t: int, since: int | None) -> tuple[np.ndarray, np.ndarray]:
        feed = _FEEDS.get(self.key)
        if feed is None:
            raise LookupError("this view's replay has ended; its history is no longer kept")
        return feed.past().history(j, t, since)


class PastFeed:
    """The loop's side of ``Past``: how many points of each market have arrived, and the points
    themselves read from the tape's flat columns when someone needs them (``Tape.points``).

    The shared ``Past`` is built the first time a plugin reads a history, from every point
    that has arrived by then, and moved on at each decision after that. A replay whose plugins
    never read one (the view's arrays carry the instant's prices) holds no copy of the series:
    its memory grows with the markets, not with markets × instants.
    """

    def __init__(self, tape: Tape, universe: Sequence[int]) -> None:
        self._tape = tape
        self._markets = np.asarray(universe, dtype=np.int64)
        self.layout = Layout.of(tape, universe)
        self.seen = np.zeros(self._markets.size, dtype=np.int64)
        self.rows = np.empty((0, 1))
        self._writer: PastWriter | None = None
        self._lock = threading.Lock()  # a plugin's own threads may ask for history too

    def advance(self, now: AsOf) -> None:
        """The instant moved on to ``now``: its points have arrived."""
        with self._lock:
            if self._writer is not None:
                self._writer.apply(self.delta(self._writer.visible, now.seen))
            self.seen, self.rows = now.seen, now.rows

    def delta(self, since: np.ndarray, until: np.ndarray | None = None) -> Delta:
        """The points that arrived after ``since`` (counts per market) up to ``until``
        (by default every point that has arrived)."""
        until = self.seen if until is None else until
        times, prices = self._tape.points(self._markets, since, until)
        return Delta(since, until, times, prices)

    @property
    def built(self) -> bool:
        """Whether a plugin has read a history yet (and the shared ``Past`` exists)."""
        return self._writer is not None

    def past(self) -> Past:
        """The shared ``Past``, showing every point that has arrived."""
        with self._lock:
            if self._writer is None:
                writer = PastWriter(self.layout)
                writer.apply(self.delta(writer.visible))
                self._writer = writer
            return self._writer.past

    @contextlib.contextmanager
    def shown(self) -> Iterator[ReadHistory]:
        """What views hand out for history (``History.of``), answering while the run lasts."""
        key = next(_KEYS)
        _FEEDS[key] = self
        try:
            yield History(key).of
        finally:
            del _FEEDS[key]


# -- what a plugin may do while it runs ------------------------------------------------------


class Clock:
    """freezegun's frozen clock, moved by whole seconds.

    ``tick`` with a timedelta only adds it; ``move_to`` would parse and convert a datetime on
    every decision, which was half of the per-decision cost of the plugin boundary.
    """

    def __init__(self, frozen_time: Any, ts: int) -> None:
        self._frozen = frozen_time
        self._ts = ts

    def move_to(self, ts: int) -> None:
        if ts != self._ts:
            self._frozen.tick(timedelta(seconds=ts - self._ts))
            self._ts = ts


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
    system calls; starting and stopping the timer per call is two). Where there is no interval
    timer (Windows) or the run is not on the main thread, plugin code runs without a time limit
    and Ctrl-C keeps Python's own handling.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        main = threading.current_thread() is threading.main_thread()
        self.main = main
        self.timed = seconds > 0 and _setitimer is not None and main
        self.interrupted = False

    @contextlib.contextmanager
    def guarded(self) -> Iterator[None]:
        def expire(signum: int, frame: Any) -> None:
            raise DecisionTimeout(f"decision took longer than {self.seconds:g} s")

        def interrupt(signum: int, frame: Any) -> None:
            self.interrupted = True
            raise RunInterrupted()

        handlers = []
        if self.timed:
            handlers.append((signal.SIGALRM, _signal(signal.SIGALRM, expire)))
        if self.main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            handlers.append((signal.SIGINT, _signal(signal.SIGINT, interrupt)))
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
        try:
            yield
        finally:
            for module, attr, value in saved:
                setattr(module, attr, value)
            if self.timed and _setitimer is not None:
                _setitimer(signal.ITIMER_REAL, 0)
            for signum, previous in handlers:
                _signal(signum, previous)

    def call(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
        """``(fn(*args), None)``, or ``(None, error text)`` if it raised or ran out of time.

        Only a real Ctrl-C escapes (as ``RunInterrupted``, even when the plugin caught it),
        and a ``RunStopped``, which a strategy raises to stop the run on purpose."""
        result, error = None, None
        clock = _clock_stacks()
        try:
            self._start()
            try:
                result = fn(*args)
            except (RunInterrupted, RunStopped):
                raise
            except BaseException as exc:
                error = error_text(exc)
            finally:
                self._stop()
        except (RunInterrupted, RunStopped):
            raise
        except BaseException as exc:
            result, error = None, error_text(exc)
        finally:
            if _restore_clock(clock) and error is None:
                result, error = None, CLOCK_CHANGED
        if self.interrupted:
            raise RunInterrupted()
        return result, error

    def _start(self) -> None:
        if self.timed and _setitimer is not None:
            _setitimer(signal.ITIMER_REAL, self.seconds)

    def _stop(self) -> None:
        if self.timed and _setitimer is not None:
            _setitimer(signal.ITIMER_REAL, 0)


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


def capped(text: str, limit: int = MAX_TEXT) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters, and whether it was cut; loggable (see
    :func:`loggable`)."""
    text = loggable(text)
    return (text, False) if len(text) <= limit else (text[:limit], True)


def loggable(text: str) -> str:
    """``text`` with any lone surrogate (``"\\udcff"``, what ``os.fsdecode`` makes of a
    stray byte) replaced by '?': UTF-8 cannot encode one, and a plugin's reasoning, error
    message or market id holding one crashed the run at the log's next flush, writing none
    of the cohort."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="replace").decode()
    return text


def _number(x: object) -> float | None:
    """``x`` as a builtin float if it is a finite real number (numpy scalars included)."""
    if type(x) is float:  # the common case, without the abstract-class check
        return x if math.isfinite(x) else None
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        return None
    value = float(x)
    return value if math.isfinite(value) else None


def _text(x: object) -> str | None:
    return None if x is None else loggable(str(x))


def _bet(bet: object) -> BetIntent:
    if (
        type(bet) is BetIntent
        and type(bet.market) is str
        and type(bet.side) is str
        and bet.market.isascii()
        and bet.side.isascii()
        and type(bet.amount) is float
        and math.isfinite(bet.amount)
        and abs(bet.amount) <= MAX_AMOUNT
        and (bet.belief is None or (type(bet.belief) is float and 0.0 <= bet.belief <= 1.0))
    ):
        return bet  # already builtin and bounded; frozen, so the plugin cannot change it later
    if not isinstance(bet, BetIntent):
        raise TypeError(f"bets must be Bet, not {type(bet).__name__}")
    if not (isinstance(bet.market, str) and isinstance(bet.side, str)):
        raise TypeError(f"bet {bet!r} needs a market id and a side as strings")
    amount, belief = _number(bet.amount), _number(bet.belief)
    if amount is None or (bet.belief is not None and belief is None):
        raise TypeError(f"bet {bet!r} needs a finite amount (and belief, if given)")
    if abs(amount) > MAX_AMOUNT:
        raise ValueError(f"bet on {bet.market}: amount {amount:g} is beyond {MAX_AMOUNT:g}")
    if belief is not None and not 0.0 <= belief <= 1.0:
        raise ValueError(f"bet on {bet.market}: belief {belief:g} is not a probability in [0, 1]")
    market, side = loggable(str(bet.market)), loggable(str(bet.side))
    return BetIntent(market=market, side=side, amount=amount, belief=belief)


def _sell(sell: object) -> SellIntent:
    if not isinstance(sell, SellIntent):
        raise TypeError(f"sells must be Sell, not {type(sell).__name__}")
    percentage = _number(sell.percentage)
    if percentage is None:
        raise TypeError(f"sell {sell!r} needs a finite percentage")
    keys = (sell.position_id, sell.market, sell.side)
    if not all(k is None or isinstance(k, str) for k in keys):
        raise TypeError(f"sell {sell!r} needs its position id, market and side as strings")
    return SellIntent(
        percentage=percentage,
        position_id=_text(sell.position_id),
        market=_text(sell.market),
        side=_text(sell.side),
    )


def _trace(trace: object, notes: list[str]) -> Trace | None:
    """The trace with every field of its declared type, texts capped; else a TypeError."""
    if trace is None:
        return None
    if not isinstance(trace, Trace):
        raise TypeError("trace must be a strategies.api.Trace")
    fields: dict[str, Any] = {}
    for name in TRACE_TEXTS:
        value = getattr(trace, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"trace.{name} must be a string or None")
        if value is not None:
            value, cut = capped(str(value))
            if cut:
                notes.append(f"trace.{name} cut to {MAX_TEXT:,} characters")
        fields[name] = value
    for name in TRACE_COUNTS:
        value = getattr(trace, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral | type(None)):
            raise TypeError(f"trace.{name} must be a whole number")
        if value is not None and not -(2**62) < int(value) < 2**62:
            raise ValueError(f"trace.{name} is out of range")
        fields[name] = None if value is None else int(value)
    for name in TRACE_REALS:
        value = getattr(trace, name)
        if value is not None and _number(value) is None:
            raise TypeError(f"trace.{name} must be a finite number or None")
        fields[name] = None if value is None else _number(value)
    if fields["retries"] is None:
        raise TypeError("trace.retries must be a whole number")
    if not isinstance(trace.prompts, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in trace.prompts.items()
    ):
        raise TypeError("trace.prompts must map digests to texts")
    cut_texts: list[int] = []
    room, prompts = MAX_TRACE_TEXT, {}
    for digest, text in trace.prompts.items():
        kept_text = _cut(text, cut_texts)
        room -= len(digest) + len(kept_text)
        if room < 0:
            raise ValueError(f"trace.prompts: over {MAX_TRACE_TEXT:,} characters")
        prompts[digest] = kept_text
    calls = _limited(_sequence(trace.calls, "trace.calls"), MAX_CALLS, "trace.calls", notes,
                     "model calls")  # fmt: skip
    kept: list[ModelCall] = []
    for given in calls:
        call, size = _model_call(given, cut_texts)
        if size > room:
            notes.append(f"trace.calls: {len(calls) - len(kept):,} dropped past "
                         f"{MAX_TRACE_TEXT:,} characters of model text")  # fmt: skip
            break
        room -= size
        kept.append(call)
    if cut_texts:
        notes.append(f"trace.calls: {len(cut_texts):,} texts cut to {MAX_TEXT:,} characters")
    fields["calls"], fields["prompts"] = tuple(kept), prompts
    return Trace(**fields)


def _cut(text: str, cut: list[int]) -> str:
    """``text`` capped at ``MAX_TEXT``, adding its full length to ``cut`` when it was."""
    kept, was_cut = capped(text)
    if was_cut:
        cut.append(len(text))
    return kept


def _sequence(items: object, what: str) -> Iterable[Any]:
    if not isinstance(items, list | tuple):
        raise TypeError(f"{what} must be a list or tuple")
    return items


def _model_call(call: object, cut: list[int]) -> tuple[ModelCall, int]:
    """``call`` as a ModelCall whose every field has its declared type, as the log will read
    it back (msgspec does not check types when a struct is built, only when it is decoded),
    each text capped at ``MAX_TEXT``; and the characters of text it keeps."""
    if not isinstance(call, ModelCall):
        raise TypeError(f"trace.calls must be ModelCall, not {type(call).__name__}")
    try:
        fields = msgspec.to_builtins(call)
        for name in CALL_TEXTS:
            if isinstance(fields.get(name), str):
                fields[name] = _cut(fields[name], cut)
        if isinstance(fields.get("messages"), list):
            fields["messages"] = [
                {k: _cut(v, cut) if isinstance(v, str) else v for k, v in m.items()}
                if isinstance(m, dict) else m
                for m in fields["messages"]
            ]  # fmt: skip
        checked_call = msgspec.convert(fields, ModelCall)
    except (msgspec.ValidationError, TypeError) as exc:
        raise TypeError(f"trace.calls: {exc}") from None
    size = sum(len(getattr(checked_call, name) or "") for name in CALL_TEXTS)
    size += sum(len(k) + len(v) for m in checked_call.messages for k, v in m.items())
    return checked_call, size


def _plain_hold(d: Decision) -> bool:
    """HOLD with nothing attached, as most decisions are: nothing in it needs checking."""
    return (
        type(d.bets) is tuple
        and type(d.sells) is tuple
        and not d.bets
        and not d.sells
        and type(d.reasoning) is str
        and len(d.reasoning) <= MAX_TEXT
        and d.reasoning.isascii()
        and d.trace is None
    )


def checked(decision: object) -> tuple[Decision, str | None]:
    """The decision in builtin, bounded types, ready for the broker and the log, and a note of
    anything cut; else a TypeError or ValueError saying why it cannot be taken.

    Strategies naturally compute with numpy, but the log's encoder takes only builtins: a
    ``numpy.float64`` amount must be converted here, not crash the run at the next flush; a
    belief of 7.5 must be refused here, not make every later report of the log fail."""
    if not isinstance(decision, Decision):
        raise TypeError(f"decide() returned {type(decision).__name__}, not a Decision")
    if type(decision) is Decision and _plain_hold(decision):
        return decision, None
    notes: list[str] = []
    sells = _limited(decision.sells, MAX_ORDERS, "sells", notes)
    bets = _limited(decision.bets, MAX_ORDERS - len(sells), "bets", notes)
    if not isinstance(decision.reasoning, str):
        raise TypeError("reasoning must be a string")
    reasoning, cut = capped(str(decision.reasoning))
    if cut:
        notes.append(f"reasoning cut to {MAX_TEXT:,} of {len(decision.reasoning):,} characters")
    trace = _trace(decision.trace, notes)
    return (
        Decision(
            bets=[_bet(b) for b in bets],
            sells=[_sell(s) for s in sells],
            reasoning=reasoning,
            trace=trace,
        ),
        "; ".join(notes) or None,
    )


def _limited(
    orders: Iterable[Any], room: int, what: str, notes: list[str], why: str = "orders"
) -> list[Any]:
    """At most ``room`` items, noting that more were given (never reading more than one past
    the limit, so an endless generator cannot hang the run)."""
    if isinstance(orders, list | tuple):
        kept = list(orders[: room + 1])
    else:
        kept = list(itertools.islice(orders, room + 1))
    if len(kept) > room:
        given = f"{len(orders):,}" if isinstance(orders, Sized) else "more"
        limit = MAX_ORDERS if why == "orders" else room
        notes.append(f"{what}: {given} given, the first {room:,} kept (at most {limit:,} "
                     f"{why} per decision)")  # fmt: skip
    return kept[:room]


# -- the view --------------------------------------------------------------------------------


def priced_positions(
    records: tuple[PositionRecord, ...],
    yes: np.ndarray,
    binary: np.ndarray,
    yes_column: np.ndarray,
    prices: Callable[[int], tuple[float, ...] | None],
) -> tuple[PositionView, ...]:
    """``records`` as ``PositionView``s at the instant's prices (a side without a price keeps
    its last fill price). Called only when a plugin reads ``view.positions``: pricing every
    open position at every decision was most of a tick-cadence replay's time. Everything it
    is bound to is already the plugin's to see (its own positions, the shown prices), so a
    plugin that unwraps it finds nothing more."""
    views = []
    for pid, market, side, outcome, shares, cost, last, j in records:
        if binary[j]:
            now = float(yes[j])
            price = last if math.isnan(now) else (now if outcome == yes_column[j] else 1.0 - now)
        else:
            quote = prices(j)
            price = last if quote is None or math.isnan(quote[outcome]) else quote[outcome]
        views.append(
            PositionView(id=pid, market=market, side=side, shares=shares, cost=cost, price=price)
        )
    return tuple(views)


class Views:
    """Builds each agent's ``View`` at a decision instant.

    Shared by every agent at an instant, and writable by none: the prices, the open mask, the
    market facts' arrays and the history handle. Each agent's own: its index and market facts
    (copied once per cohort, so a plugin that rewrites them confuses only itself) and its
    shares (a frozen copy at each decision).
    """

    def __init__(
        self,
        ids: tuple[str, ...],
        meta: tuple[MarketMeta, ...],
        layout: Layout,
        history: ReadHistory,
        agents: Iterable[str],
        rules: RuleSet,
    ) -> None:
        self.ids = ids
        self.history = history
        self.rules = rules
        self.index = {name: {m: j for j, m in enumerate(ids)} for name in agents}
        self.meta = {name: tuple(dataclasses.replace(m) for m in meta) for name in self.index}
        self.binary = frozen(np.array([m.is_binary for m in meta], dtype=bool))
        self.ts = 0
        self.yes = self.open = self.volume = self.binary
        multi = itertools.count()
        self._row = tuple(next(multi) if side < 0 else -1 for side in layout.yes_column)
        self._layout = layout
        self.quotes = self._quotes(np.empty((0, 1)))

    def _quotes(self, rows: np.ndarray) -> Quotes:
        layout = self._layout
        return Quotes(self.yes, frozen(rows), self._row, layout.widths, layout.yes_column)

    def move_to(
        self, ts: int, yes: np.ndarray, open_mask: np.ndarray, volume: np.ndarray, rows: np.ndarray
    ) -> None:
        """Prices, open markets and volumes of the instant every agent now decides at;
        ``rows``: every outcome's price of the markets that are not binary (``AsOf.rows``)."""
        self.ts, self.yes, self.open = ts, frozen(yes), frozen(open_mask)
        self.volume = frozen(volume)
        self.quotes = self._quotes(rows)

    def view(
        self, name: str, week: int, cash: float, shares: np.ndarray,
        positions: Callable[[], tuple[PositionView, ...]],
    ) -> View:  # fmt: skip
        markets = MarketsView(
            ts=self.ts,
            ids=self.ids,
            index=self.index[name],
            meta=self.meta[name],
            yes=self.yes,
            open_mask=self.open,
            volume=self.volume,
            binary=self.binary,
            prices=self.quotes.at,
            history=self.history,
        )
        return View(
            ts=self.ts,
            week=week,
            cash=cash,
            rules=self.rules,
            markets=markets,
            shares=frozen(shares),
            _positions=positions,
        )


# -- an agent's code, in this process --------------------------------------------------------


class Agent(Protocol):
    """Where an agent's code runs: here (``InProcess``) or in a worker (``Isolated``)."""

    def setup(self, context: Context) -> str | None:
        """None, or why the agent cannot take part in the cohort."""

    def decide(self, view: View) -> tuple[Decision, str | None]:
        """The checked decision (HOLD if it failed) and the error or note to record."""

    def close(self) -> None:
        """Let go of whatever the agent's code ran in."""


def decide_checked(strategy: Strategy, view: View) -> tuple[Decision, str | None]:
    return checked(strategy.decide(view))


def recorded(
    outcome: tuple[Decision, str | None] | None, error: str | None
) -> tuple[Decision, str | None]:
    """What the log records of a decision: HOLD and the error if it failed; else the decision
    and its trace's error, with any truncation noted after it."""
    if outcome is None or error is not None:
        return Decision.hold(), error
    decision, note = outcome
    noted = decision.trace.error if decision.trace else None
    return decision, "; ".join(x for x in (noted, note) if x) or None


class InProcess:
    """An agent whose code runs in this process, inside the run's sandbox."""

    def __init__(self, strategy: Strategy, sandbox: Sandbox) -> None:
        self.strategy = strategy
        self.sandbox = sandbox

    def setup(self, context: Context) -> str | None:
        return self.sandbox.call(self.strategy.setup, context)[1]

    def decide(self, view: View) -> tuple[Decision, str | None]:
        return recorded(*self.sandbox.call(decide_checked, self.strategy, view))

    def close(self) -> None:
        pass
