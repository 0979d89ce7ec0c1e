"""As-of prices walked forward: each market's latest point at or before an instant that only
moves forward, kept in per-market cursors.

A replay asks "what was every market's price at this instant?" once per decision or mark, in
time order. Answering with a binary search per market per instant needs either that work at
every instant or an instants x markets table of the answers (523 MB at 5,000 markets x 2,000
instants). A cursor per market needs memory per market only, and moving it forward costs one
vector comparison per instant plus one step for each market that has a new point -- each point
is passed once over the whole replay. A market that passes several points between two instants
(a daily decision over a minute tape) is caught up with one binary search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from replays.tape import spans

if TYPE_CHECKING:
    from replays.tape import Tape

NEVER = np.iinfo(np.int64).max


class AsOfWalk:
    """Cursors over series ``j`` = ``times[starts[j]:ends[j]]`` (each sorted, strictly rising).

    ``position[j]`` is the index within series ``j`` of its latest point at or before the last
    instant walked to, or -1 before its first point. ``advance`` returns which series moved.
    """

    def __init__(self, times: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self._times = np.asarray(times, dtype=np.int64)
        self._starts = np.asarray(starts, dtype=np.int64)
        self._ends = np.asarray(ends, dtype=np.int64)
        if self._starts.shape != self._ends.shape or np.any(self._ends < self._starts):
            raise ValueError("each series needs a start at or before its end")
        self._position = np.full(self._starts.shape, -1, dtype=np.int64)
        self._following = self._starts.copy()  # where each series' next point is in ``times``
        self._indices = np.arange(self._starts.size)
        self._indices.setflags(write=False)
        self._next = np.full(self._starts.shape, NEVER, dtype=np.int64)  # time of the next point
        self._refresh(slice(None))
        self._at: int | None = None
        self.position = self._position.view()
        self.position.setflags(write=False)

    def advance(self, ts: int) -> np.ndarray:
        """Move every cursor to instant ``ts`` (not earlier than the last); the series moved."""
        if self._at is not None and ts < self._at:
            raise ValueError(f"as-of walk went back from t={self._at} to t={ts}")
        self._at = ts
        due = self._next <= ts
        if due.all():  # every series has a new point (a shared grid): whole-array steps
            moved = self._indices
            self._position += 1
            self._following += 1
            self._refresh(slice(None))
            behind = np.flatnonzero(self._next <= ts)
        else:
            moved = np.flatnonzero(due)
            if not moved.size:
                return moved
            self._position[moved] += 1
            self._following[moved] += 1
            self._refresh(moved)
            behind = moved[self._next[moved] <= ts]
        for j in behind.tolist():  # passed more than one point: one binary search
            series = self._times[self._starts[j] : self._ends[j]]
            self._position[j] = int(np.searchsorted(series, ts, side="right")) - 1
            self._following[j] = self._starts[j] + self._position[j] + 1
        if behind.size:
            self._refresh(behind)
        return moved

    def _refresh(self, series: np.ndarray | slice) -> None:
        """The time of each ``series``' next point after its cursor (NEVER past its end)."""
        following = self._following[series]
        more = following < self._ends[series]
        if more.all():
            self._next[series] = self._times[following]
            return
        upcoming = np.full(following.shape, NEVER, dtype=np.int64)
        upcoming[more] = self._times[following[more]]
        self._next[series] = upcoming


class PriceWalk:
    """The as-of point and YES price (column 0 of a non-binary market) of chosen markets of a
    tape, walked forward instant by instant; ``yes[j]`` is NaN before market ``j``'s first
    point. Memory is a few numbers per market whatever the number of instants."""

    def __init__(self, tape: Tape, markets: Sequence[int]) -> None:
        chosen = np.asarray(markets, dtype=np.int64)
        self._prices = tape.price_column
        self._walk = AsOfWalk(*tape.time_layout(chosen))
        self._start, self._width = tape.first_column_layout(chosen)
        self._one_column = bool((self._width == 1).all())  # binary only: no multiply per step
        self.position = self._walk.position
        self.yes = np.full(chosen.shape, np.nan)

    def rows(self, markets: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Every stored price of point ``position[k]`` of chosen market ``markets[k]``, one row
        each, padded with NaN to the widest (a NaN row where the position is -1)."""
        if not markets.size:
            return np.empty((0, 1))
        widths = self._width[markets]
        out = np.full((markets.size, int(widths.max())), np.nan)
        known = np.flatnonzero(position >= 0)
        counts = widths[known]
        firsts = np.cumsum(counts) - counts
        column = np.arange(int(counts.sum())) - np.repeat(firsts, counts)
        flat = spans(self._start[markets[known]] + position[known] * counts, counts)
        out[np.repeat(known, counts), column] = self._prices[flat]
        return out

    def advance(self, ts: int) -> None:
        """Walk to instant ``ts`` (never back): ``position`` and ``yes`` are then as of it."""
        moved = self._walk.advance(ts)
        if moved.size == self.yes.size:  # all moved, so every market has a point
            at = self._start + (self.position if self._one_column else self.position * self._width)
            np.take(self._prices, at, out=self.yes)
        elif moved.size:
            at = self._start[moved] + self.position[moved] * self._width[moved]
            self.yes[moved] = self._prices[at]


@dataclass(frozen=True)
class AsOf:
    """A universe as of one instant, one entry per market: its point (-1 before its first
    point or past its coverage), YES price (NaN likewise) and volume (NaN where the tape has
    no volume point yet). Read-only copies: a view an agent keeps from an earlier decision goes
    on showing that decision's instant, as it did when these were rows of a precomputed table."""

    position: np.ndarray
    yes: np.ndarray
    volume: np.ndarray
    seen: np.ndarray
    """Points at or before the instant per market, coverage or not: what its history shows."""
    rows: np.ndarray
    """Every outcome's price of each market that stores more than YES (``UniverseWalk.multi``
    lists them), one row each, padded with NaN; a NaN row where ``position`` is -1."""


class UniverseWalk:
    """``AsOf`` for chosen markets of a tape at instants that only move forward: prices walked
    by ``PriceWalk`` and cut at each market's coverage (``Tape.coverage``), volumes walked the
    same way over each market's ``volume_history``."""

    def __init__(self, tape: Tape, markets: Sequence[int]) -> None:
        self._prices = PriceWalk(tape, markets)
        self._coverage = np.array([tape.coverage(m) for m in markets], dtype=np.int64)
        self._covered = int(self._coverage.min(initial=NEVER))  # every market covered till then
        histories = [tape.markets[m].volume_history for m in markets]
        ends = np.cumsum([len(h) for h in histories], dtype=np.int64)
        self._volume_start = ends - [len(h) for h in histories]
        points = [point for history in histories for point in history]
        self._volumes = np.array([v for _, v in points], dtype=np.float64)
        volume_times = np.array([t for t, _ in points], dtype=np.int64)
        self._volume_walk = AsOfWalk(volume_times, self._volume_start, ends)
        self._no_volume = _frozen(np.full(len(histories), np.nan))
        widths = np.array([tape.markets[m].stored_columns for m in markets], dtype=np.int64)
        self.multi = _frozen(np.flatnonzero(widths > 1))

    def at(self, ts: int) -> AsOf:
        """The universe as of ``ts`` (not earlier than the last instant asked for)."""
        self._prices.advance(ts)
        position = self._prices.position.copy()
        seen = position + 1
        yes = self._prices.yes.copy()
        if ts > self._covered:  # no price known past a market's coverage
            past = ts > self._coverage
            position[past] = -1
            yes[past] = np.nan
        rows = self._prices.rows(self.multi, position[self.multi])
        return AsOf(
            _frozen(position), _frozen(yes), self._volume_at(ts), _frozen(seen), _frozen(rows)
        )

    def _volume_at(self, ts: int) -> np.ndarray:
        if not self._volumes.size:
            return self._no_volume
        self._volume_walk.advance(ts)
        known = self._volume_walk.position
        at = self._volume_start + np.maximum(known, 0)
        return _frozen(
            np.where(known >= 0, self._volumes[np.minimum(at, self._volumes.size - 1)], np.nan)
        )


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array
