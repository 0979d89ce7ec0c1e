"""The in-memory price tape: market metadata, price series and resolutions.

Series are kept in a flat columnar layout (one concatenated array of instants, one of prices,
and point offsets per market) so a 5M-point tape is a handful of arrays rather than millions of
Python objects, and every per-market accessor is an O(1) slice. Binary markets store only the
YES price; NO = 1 - YES is derived, which halves memory and makes the two sides consistent by
construction. When every market has the same instants (a synthetic grid, a resampled
recording) they are kept once rather than once per market: at 50,000 markets x 2,000 steps that
is 16 KB instead of 800 MB. Either way the tape is the same content, with the same hash.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any

import msgspec
import numpy as np

from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution
from replays.validate import check_columns, check_layout, check_markets, resolutions_by_market

FORMAT_NAME = "arena-tape"
FORMAT_VERSION = 1
_HASH_BLOCK = 1 << 20  # prices hashed per block (8 MB)
_UNION_BLOCK = 1 << 21  # points merged per block when listing a tape's instants (16 MB)
_GRID_BLOCK = 1 << 22  # points compared per block when looking for a shared grid (32 MB)


OPTIONAL_FIELDS = ("end_ts", "covered_until", "volume_history")
"""Fields added after tapes were first hashed: left out of the canonical metadata when unset,
so a tape without them keeps the content hash (and every cohort id) it always had."""


def _market_dict(market: MarketInfo) -> dict[str, Any]:
    fields: dict[str, Any] = msgspec.to_builtins(market)
    for name in OPTIONAL_FIELDS:
        value = fields[name]
        if value is None or (isinstance(value, list | tuple) and not value):
            del fields[name]
    return fields


def _meta_dict(
    markets: Sequence[MarketInfo], resolutions: Mapping[str, Resolution]
) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "markets": [_market_dict(m) for m in markets],
        "resolutions": [msgspec.to_builtins(resolutions[k]) for k in sorted(resolutions)],
    }


def canonical_meta(markets: Sequence[MarketInfo], resolutions: Mapping[str, Resolution]) -> bytes:
    """The metadata as canonical JSON, the part of the content hash that is not arrays."""
    return json.dumps(
        _meta_dict(markets, resolutions), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()


def spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[k] .. starts[k] + lengths[k] - 1`` of every ``k``, in order: the
    rows of many contiguous runs of a flat column, gathered with one fancy index."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and lengths.min() == lengths.max() == 1:  # one point each: a shared grid
        return starts
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if ends.size else 0
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(total, dtype=np.int64)


def _merged(runs: list[np.ndarray]) -> np.ndarray:
    """The distinct values of sorted ``runs``, sorted. A stable sort is timsort, which merges
    the runs it finds (a quarter of the time ``np.union1d``'s quicksort takes on 500 series)."""
    points = np.sort(np.concatenate(runs), kind="stable")
    keep = np.empty(points.size, dtype=bool)
    keep[:1] = True
    np.not_equal(points[1:], points[:-1], out=keep[1:])
    return points[keep]


def _shared_grid(offsets: np.ndarray, times: np.ndarray) -> np.ndarray | None:
    """The instants every market has, when all have the same ones; else None. Compared a block
    of markets at a time, so looking needs no second column's worth of memory."""
    lengths = np.diff(offsets)
    if not lengths.size or lengths[0] == 0 or lengths.min() != lengths.max():
        return None
    n = int(lengths[0])
    rows = times.reshape(-1, n)
    grid: np.ndarray = rows[0]
    step = max(1, _GRID_BLOCK // n)
    for first in range(1, rows.shape[0], step):
        if not (rows[first : first + step] == grid).all():
            return None
    return grid.copy()


def _frozen(arr: np.ndarray, dtype: type) -> np.ndarray:
    """A read-only contiguous view (the caller's own array stays writable)."""
    view: np.ndarray = np.ascontiguousarray(arr, dtype=dtype).view()
    view.setflags(write=False)
    return view


def _stored_block(source: str, market: MarketInfo, prices: np.ndarray) -> np.ndarray:
    """``(n, stored_columns)`` prices from what a caller passed, or a one-line error."""
    k = len(market.outcomes)
    if prices.ndim == 2 and prices.shape[1] == k:
        return prices[:, [market.yes_column]] if market.is_binary else prices
    if prices.ndim == 1 and market.is_binary:
        return prices[:, None]
    if prices.ndim == 1 and prices.size % k == 0:
        return prices.reshape(-1, k)
    raise TapeError(
        f"{source}: market {market.id}: prices of shape {prices.shape} do not fit "
        f"{k} outcomes {list(market.outcomes)}"
    )


class Tape:
    """An immutable, validated price tape. Build with ``from_series``, ``on_grid`` or
    ``load_tape``.

    Arrays are read-only so that views handed to strategies cannot rewrite history.
    """

    def __init__(
        self,
        markets: Sequence[MarketInfo],
        offsets: np.ndarray,
        times: np.ndarray,
        prices: np.ndarray,
        resolutions: Mapping[str, Resolution],
        *,
        source: str = "<memory>",
        grid: bool = False,
    ) -> None:
        """Wrap already-flat columns; validates them, naming ``source`` in any error. With
        ``grid``, ``times`` is the one series of instants every market has (``on_grid``);
        without, flat ``times`` whose markets all share one series are kept as that grid."""
        self.markets: tuple[MarketInfo, ...] = tuple(markets)
        self.index: dict[str, int] = {m.id: i for i, m in enumerate(self.markets)}
        self.resolutions: dict[str, Resolution] = dict(resolutions)
        self._offsets = _frozen(offsets, np.int64)
        times = np.asarray(times, dtype=np.int64)
        self._prices = _frozen(prices, np.float64)
        check_markets(source, self.markets)
        n_markets = len(self.markets)
        check_layout(source, n_markets, self._offsets, times.shape[0] * (n_markets if grid else 1))
        if grid and np.any(np.diff(self._offsets) != times.shape[0]):
            raise TapeError(f"{source}: corrupt tape: a market's points do not fit the grid")
        found = None if grid else _shared_grid(self._offsets, times)
        self._grid = grid or found is not None
        self._times = _frozen(times if found is None else found, np.int64)
        """The flat column of instants, or the grid every market shares."""
        starts = np.zeros(n_markets, np.int64) if self._grid else self._offsets[:-1]
        self._time_starts = _frozen(starts, np.int64)
        """Where each market's instants begin in ``_times``."""
        # per-market layout facts, worked out once: the accessors below run per decision
        self._binary = tuple(m.is_binary for m in self.markets)
        self._yes_first = tuple(m.yes_column == 0 for m in self.markets)
        self._columns = tuple(m.stored_columns for m in self.markets)
        cols = np.array(self._columns, dtype=np.int64)
        cols.setflags(write=False)
        self._widths = cols
        self._price_offsets = np.concatenate(([0], np.cumsum(np.diff(self._offsets) * cols)))
        check_columns(
            source, self.markets, self._offsets, self._times, self._prices,
            self._price_offsets, self.resolutions, grid=self._grid,
        )  # fmt: skip
        self._price_offsets.setflags(write=False)

    @classmethod
    def from_series(
        cls,
        markets: Iterable[MarketInfo],
        series: Mapping[str, tuple[np.ndarray, np.ndarray]],
        resolutions: Mapping[str, Resolution] | Iterable[Resolution],
        *,
        source: str = "<memory>",
    ) -> Tape:
        """Build from per-market ``(times, prices)``; prices are 1-D YES for binary markets or
        ``(n, n_outcomes)`` (binary markets may also pass both columns; NO is dropped)."""
        markets = tuple(markets)
        check_markets(source, markets)
        known = {m.id for m in markets}
        for mid in series:
            if mid not in known:
                raise TapeError(f"{source}: market {mid}: points for a market not in the tape")
        times_parts: list[np.ndarray] = []
        price_parts: list[np.ndarray] = []
        lengths = []
        for m in markets:
            t, p = series.get(m.id, (np.empty(0, np.int64), np.empty(0)))
            t = np.asarray(t, dtype=np.int64)
            p = _stored_block(source, m, np.asarray(p, dtype=np.float64))
            if t.ndim != 1 or p.shape[0] != t.shape[0]:
                raise TapeError(
                    f"{source}: market {m.id}: {t.shape[0]} instants but {p.shape[0]} prices"
                )
            times_parts.append(t)
            price_parts.append(p.reshape(-1))
            lengths.append(t.shape[0])
        offsets = np.concatenate(([0], np.cumsum(np.asarray(lengths, dtype=np.int64))))
        if not isinstance(resolutions, Mapping):
            resolutions = resolutions_by_market(source, resolutions)
        return cls(
            markets,
            offsets,
            np.concatenate(times_parts) if times_parts else np.empty(0, np.int64),
            np.concatenate(price_parts) if price_parts else np.empty(0),
            resolutions,
            source=source,
        )

    @classmethod
    def on_grid(
        cls,
        markets: Sequence[MarketInfo],
        grid: np.ndarray,
        prices: np.ndarray,
        resolutions: Mapping[str, Resolution],
        *,
        source: str = "<memory>",
    ) -> Tape:
        """Markets that all have a point at each instant of ``grid``: ``prices`` is the flat
        stored column, market after market. The grid is kept once, never repeated per market."""
        offsets = np.arange(len(markets) + 1, dtype=np.int64) * np.asarray(grid).shape[0]
        return cls(markets, offsets, grid, prices, resolutions, source=source, grid=True)

    # -- content identity --------------------------------------------------------------------

    @cached_property
    def hash(self) -> str:
        """sha256 over canonical metadata JSON and the little-endian arrays; file-format free."""
        h = hashlib.sha256(b"arena-tape/1\n")
        h.update(canonical_meta(self.markets, self.resolutions))
        h.update(b"\n")
        h.update(self._offsets.astype("<i8", copy=False).data)
        h.update(b"\n")
        times = self._times.astype("<i8", copy=False).data
        for _ in range(len(self.markets) if self._grid else 1):  # the flat column's bytes
            h.update(times)
        h.update(b"\n")
        # Adding 0.0 turns -0.0 into 0.0, so equal prices always hash equally; a block at a
        # time, so hashing a large tape needs no second copy of its prices.
        for first in range(0, self._prices.shape[0], _HASH_BLOCK):
            block = self._prices[first : first + _HASH_BLOCK] + 0.0
            h.update(block.astype("<f8", copy=False).data)
        return h.hexdigest()

    # -- raw columns (for the file writers) --------------------------------------------------

    @property
    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(offsets, times, prices)`` as flat columns: what a file writer needs, nothing
        more. A grid's instants are repeated per market here (a copy, made on each call)."""
        if not self._grid:
            return self._offsets, self._times, self._prices
        return self._offsets, np.tile(self._times, len(self.markets)), self._prices

    @property
    def price_column(self) -> np.ndarray:
        """The flat stored prices, read-only (``first_column_layout`` says where a market's
        are): what a walk over the tape reads its prices from."""
        return self._prices

    def time_layout(self, markets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(instants, starts, ends)``: market ``markets[k]``'s instants are
        ``instants[starts[k]:ends[k]]`` (``replays.asof`` walks them without a copy)."""
        starts = self._time_starts[markets]
        return self._times, starts, starts + np.diff(self._offsets)[markets]

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays the tape holds: what any replay of it holds at the least."""
        held = (self._offsets, self._times, self._time_starts, self._prices, self._price_offsets)
        return sum(a.nbytes for a in held)

    # -- per-market access -------------------------------------------------------------------

    def times(self, m: int) -> np.ndarray:
        """Instants (int64 unix seconds UTC, strictly increasing) of market ``m``; a view."""
        if self._grid:
            return self._times
        return self._times[self._offsets[m] : self._offsets[m + 1]]

    def _stored(self, m: int) -> np.ndarray:
        block = self._prices[self._price_offsets[m] : self._price_offsets[m + 1]]
        return block.reshape(-1, self._columns[m])

    def values(self, m: int, end: int | None = None) -> np.ndarray:
        """``(n_points, n_outcomes)`` prices in outcome order (the first ``end`` points only, if
        given); binary NO is derived as 1 - YES, so cutting first saves deriving what is cut."""
        stored = self._stored(m)[:end]
        if not self._binary[m]:
            return stored
        yes = stored[:, 0]
        return np.column_stack((yes, 1.0 - yes) if self._yes_first[m] else (1.0 - yes, yes))

    def yes(self, m: int) -> np.ndarray:
        """YES prices of a binary market (column 0 otherwise) as a view: the fast path."""
        return self._stored(m)[:, 0]

    def first_column_layout(self, markets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where YES (column 0 of a non-binary market) of ``markets`` lives in the flat price
        column: point ``i`` of ``markets[k]`` is at ``start[k] + i * width[k]``."""
        return self._price_offsets[markets], self._widths[markets]

    def points(
        self, markets: np.ndarray, since: np.ndarray, until: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Points ``since[k] <= i < until[k]`` of each ``markets[k]``, market after market:
        their instants and their stored prices (``stored_columns`` per point, flat). Read
        straight from the flat columns, so revealing an instant's new points to a replay's
        plugins needs no copy of the series made beforehand."""
        markets = np.asarray(markets, dtype=np.int64)
        counts = np.asarray(until, dtype=np.int64) - since
        times = self._times[spans(self._time_starts[markets] + since, counts)]
        widths = self._widths[markets]
        prices = self._prices[spans(self._price_offsets[markets] + since * widths, counts * widths)]
        return times, prices

    def asof_index(self, m: int, instants: np.ndarray) -> np.ndarray:
        """Index of the latest point at or before each instant, -1 where there is none."""
        idx = np.searchsorted(self.times(m), np.asarray(instants, dtype=np.int64), side="right")
        return idx.astype(np.int64) - 1

    def instants(self, markets: Sequence[int], first: int, last: int) -> np.ndarray:
        """Every distinct instant in ``[first, last]`` at which one of ``markets`` has a point,
        sorted. Merged a block of markets at a time, so the work space is a block's points
        plus the answer, never every point of the tape at once; on a shared grid, the grid's."""
        found = np.empty(0, dtype=np.int64)
        if self._grid:
            times = self._times if len(markets) else found
            return times[
                np.searchsorted(times, first) : np.searchsorted(times, last, "right")
            ].copy()
        block: list[np.ndarray] = [found]
        size = 0
        for m in markets:
            times = self.times(m)
            block.append(
                times[np.searchsorted(times, first) : np.searchsorted(times, last, "right")]
            )
            size += block[-1].size
            if size >= _UNION_BLOCK:
                found = _merged(block)
                block, size = [found], 0
        return _merged(block) if len(block) > 1 else found

    def price_at(self, market_id: str, t: int) -> tuple[float, ...] | None:
        """Outcome prices as of ``t`` (the last point at or before it); None before any point."""
        m = self.index[market_id]
        i = int(np.searchsorted(self.times(m), t, side="right")) - 1
        return None if i < 0 else self.point(m, i)

    def point(self, m: int, i: int) -> tuple[float, ...]:
        """Every outcome's price at point ``i`` (0 <= i < the market's points) of market ``m``, in
        outcome order."""
        if self._binary[m]:
            yes = float(self._prices[self._price_offsets[m] + i])
            return (yes, 1.0 - yes) if self._yes_first[m] else (1.0 - yes, yes)
        return tuple(float(x) for x in self._stored(m)[i])

    def history(self, m: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """``(times, values)`` up to and including ``t``: nothing later can leak out."""
        end = int(np.searchsorted(self.times(m), t, side="right"))
        return self.times(m)[:end], self.values(m, end)

    # -- whole-tape facts --------------------------------------------------------------------

    @property
    def n_points(self) -> int:
        """Total points over all markets (a multi-outcome point counts once)."""
        return int(self._offsets[-1])

    @cached_property
    def _span(self) -> tuple[int, int]:
        return int(self._times.min()), int(self._times.max())

    def span(self) -> tuple[int, int]:
        """``(first, last)`` instant over all markets."""
        return self._span

    def coverage(self, m: int) -> int:
        """The last instant (inclusive) at which the tape knows market ``m``'s price.

        A tape that records no coverage is taken to reach its last point, the latest instant
        of any market, and no further: nothing says its recording went on after that. (Taking
        a resolved market as covered until it closed would carry three of the 2024 election
        markets' prices a week or two past where their source stopped recording them.)"""
        recorded = self.markets[m].covered_until
        return self.span()[1] if recorded is None else recorded

    def volume_as_of(self, m: int, t: int) -> float:
        """Market ``m``'s volume as known at ``t``: its latest volume point at or before it;
        NaN where the tape has none (its ``volume`` is then final, and known only later)."""
        known = [v for ts, v in self.markets[m].volume_history if ts <= t]
        return known[-1] if known else math.nan

    def __repr__(self) -> str:
        return f"Tape(markets={len(self.markets)}, points={self.n_points}, hash={self.hash[:12]})"
