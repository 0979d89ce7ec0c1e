"""What a plugin sees of the past: ``Past`` holds the universe's price points *up to the instant
being decided*, copied in as time passes (``PastWriter``, moved on by ``PastFeed``): memory that
has no future in it, so a view cannot hand one out however it is asked. Every array a view hands
out is a copy the plugin owns or a read-only buffer whose ultimate owner is read-only
(``frozen``): bytes, or a read-only memory map. No plugin can re-flag such an array writable and
rewrite the prices another agent trades on.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from replays.tape import spans
from strategies.api import History as ReadHistory

if TYPE_CHECKING:
    from replays.asof import AsOf
    from replays.tape import Tape


def frozen(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` over an immutable bytes object: nobody can make it writable."""
    flat = np.frombuffer(array.tobytes(), dtype=array.dtype)
    return flat if array.ndim == 1 else flat.reshape(array.shape)


class Layout(NamedTuple):
    """The universe's series as the tape stores them: market ``j`` has ``lengths[j]`` points
    (in an ``ArrivedPast``, room for them) of ``widths[j]`` prices each (YES alone for a binary
    market, whose NO is 1 − YES) and, if binary, YES in outcome column ``yes_column[j]`` (-1
    for any other market)."""

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
            raise ValueError(MOVES_ON)
        _write(self._times, self._prices, self._starts, self._price_starts, self._widths, delta)
        self._visible[:] = delta.until


MOVES_ON = "a Past moves on only from the points it already shows"


def _write(
    times: np.ndarray,
    prices: np.ndarray,
    starts: np.ndarray,
    price_starts: np.ndarray,
    widths: np.ndarray,
    delta: Delta,
) -> None:
    """``delta``'s points written after the ones each market shows, market ``j``'s times from
    ``starts[j]`` on and its prices ``widths[j]`` a point from ``price_starts[j]`` on."""
    counts = delta.until - delta.since
    times[spans(starts + delta.since, counts)] = delta.times
    first = price_starts + delta.since * widths
    prices[spans(first, counts * widths)] = delta.prices


ROOM = 32
"""The fewest points an ``ArrivedPast`` makes room for in a market."""


def room(arrived: int) -> int:
    """Room for the points that have arrived, to the next power of two above them (``ROOM``
    at least): a function of the past alone. A market is given this room again each time its
    points outgrow the room it has, so they are copied a few times in all, not at every
    decision."""
    return max(ROOM, 1 << arrived.bit_length())


class ArrivedPast:
    """An isolated worker's ``Past``: laid out for the markets listed and the points that have
    arrived, never for the tape's totals.

    A ``Past`` laid out by ``Layout.of`` has a market's total number of points in its offsets
    (``starts``) and sizes: in the run's process that is nothing a plugin could not read from
    the tape it can reach anyway, but a worker holds only what it is sent, and a plugin
    searching it must find no count of points still to come (nor any market not yet listed).

    Its markets share two buffers (times, prices), each market a run of them with room to
    grow (``room``). A market listed, or whose points outgrow its room, is given its room past
    every other market's, alone (its old run is left empty); when the buffers have no room
    left past the others, every market is laid out again end to end (a re-layout), in buffers
    half as large again as their rooms. A market's points are copied each time it doubles,
    and a re-layout comes only once the rooms have grown by a quarter since the last, so the
    points copied are in proportion to those arrived, however unevenly markets tick (laying
    every market out again whenever any one outgrew its room copied the whole once a market's
    doubling). Every offset and size is a sum of rooms: a function of what has arrived alone.
    The arrays are plain: a worker holds one agent, whose own copy they are.
    ``history`` answers from whichever layout is current."""

    def __init__(self) -> None:
        self.layout = Layout((), (), ())
        self._rooms = np.zeros(0, dtype=np.int64)
        self._widths = np.zeros(0, dtype=np.int64)
        self._starts = np.zeros(0, dtype=np.int64)
        self._price_starts = np.zeros(0, dtype=np.int64)
        self._visible = np.zeros(0, dtype=np.int64)
        self._times = np.zeros(0, dtype=np.int64)
        self._prices = np.zeros(0, dtype=np.float64)
        self._top = self._price_top = 0  # where the free room past every market's begins
        self.relayouts = 0
        """How many times every market was laid out again (for measuring, and tests)."""
        self.copied = 0
        """Points copied from one place to another so far, re-layouts and moves alike."""
        self._past = self._shown((), ())

    def apply(self, delta: Delta, widths: tuple[int, ...], yes_column: tuple[int, ...]) -> None:
        """Move on by ``delta``, over the markets listed so far, whose stored columns and YES
        column are ``widths`` and ``yes_column``."""
        had = self._visible.size
        if not np.array_equal(delta.since[:had], self._visible) or delta.since[had:].any():
            raise ValueError(MOVES_ON)
        rooms = np.zeros(len(widths), dtype=np.int64)
        rooms[:had] = self._rooms
        outgrown = delta.until > rooms
        outgrown[had:] = True  # listed since: no room yet
        if outgrown.any():
            rooms[outgrown] = [room(int(n)) for n in delta.until[outgrown]]
            self._grow(rooms, np.asarray(widths, dtype=np.int64), outgrown)
            self.layout = Layout(tuple(rooms.tolist()), widths, yes_column)
            self._past = self._shown(widths, yes_column)
        _write(self._times, self._prices, self._starts, self._price_starts, self._widths, delta)
        self._visible[:] = delta.until

    def _grow(self, rooms: np.ndarray, widths: np.ndarray, outgrown: np.ndarray) -> None:
        """Give the ``outgrown`` markets their new ``rooms`` past every other's, or lay every
        market out again if the buffers have no room left there."""
        had = self._visible.size
        sizes = rooms * widths
        visible = np.zeros(rooms.size, dtype=np.int64)
        visible[:had] = self._visible
        need, price_need = int(rooms[outgrown].sum()), int(sizes[outgrown].sum())
        if self._top + need > self._times.size or self._price_top + price_need > self._prices.size:
            starts, price_starts = np.cumsum(rooms) - rooms, np.cumsum(sizes) - sizes
            self._top, self._price_top = int(rooms.sum()), int(sizes.sum())
            times = np.empty(self._top + self._top // 2, dtype=np.int64)
            prices = np.empty(self._price_top + self._price_top // 2, dtype=np.float64)
            moved = np.arange(had)
            self.relayouts += 1
        else:
            starts = np.zeros(rooms.size, dtype=np.int64)
            price_starts = starts.copy()
            starts[:had], price_starts[:had] = self._starts, self._price_starts
            starts[outgrown] = self._top + np.cumsum(rooms[outgrown]) - rooms[outgrown]
            price_starts[outgrown] = self._price_top + np.cumsum(sizes[outgrown]) - sizes[outgrown]
            self._top, self._price_top = self._top + need, self._price_top + price_need
            times, prices = self._times, self._prices
            moved = np.flatnonzero(outgrown[:had])
        counts, wide = visible[moved], widths[moved]
        times[spans(starts[moved], counts)] = self._times[spans(self._starts[moved], counts)]
        old = spans(self._price_starts[moved], counts * wide)
        prices[spans(price_starts[moved], counts * wide)] = self._prices[old]
        self.copied += int(counts.sum())
        self._times, self._prices, self._visible = times, prices, visible
        self._rooms, self._widths = rooms, widths
        self._starts, self._price_starts = starts, price_starts

    def _shown(self, widths: tuple[int, ...], yes_column: tuple[int, ...]) -> Past:
        starts, price_starts = tuple(self._starts.tolist()), tuple(self._price_starts.tolist())
        return Past(self._times, self._prices, self._visible, starts, price_starts, widths,
                    yes_column)  # fmt: skip

    def history(self, j: int, t: int, since: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``Past.history`` of the current layout."""
        return self._past.history(j, t, since)


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
        """The points of the universe's first ``len(since)`` markets (all of them, but to an
        isolated worker: those listed) that arrived after ``since`` (counts per market) up to
        ``until`` (by default every point that has arrived)."""
        k = since.size
        until = self.seen[:k] if until is None else until
        times, prices = self._tape.points(self._markets[:k], since, until)
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
