"""Order books as data: every snapshot of every outcome token's book, in flat columns, with the
book of a token as of any instant found by binary search.

A store is nine flat arrays (``validate_books.Columns``): per token, a run of snapshot rows
(instant in unix **milliseconds**, tick size); per row, a run of bid levels and a run of ask
levels (price and size, best first). Nothing is a Python object per snapshot, so a store opened
from a ``.books`` file (``replays.bookfile``) is a memory map: opening it reads the header and
the token offsets, a token's slices are checked the first time it is used, and a replay holds
the pages of the tokens it touches, not the file.

L2 and L1 live in the same store: an ``"l1"`` token (per-minute candles with best bid and ask)
has at most one level a side, and says so in its ``depth``, because for a fill model one level
with nothing behind it and one level of which nothing behind is known are different books.

The runner asks for a token's book at an instant::

    k = books.token(market_id, "Yes")          # or books.index[asset_id]
    snap = books.book_at(k, t_ms)              # latest snapshot with ts <= t_ms, or None
    snap.asks_px[:3], snap.best_bid, snap.spread

and for many tokens at instants that only move forward, with cursors (``BookWalk``) rather
than a search per token per instant::

    walk = books.walk([k1, k2]); rows = walk.advance(t_ms); snap = books.snapshot(rows[0])
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import msgspec
import numpy as np

from replays.asof import AsOfWalk
from replays.errors import TapeError
from replays.validate_books import (
    COLUMN_DTYPES,
    BookToken,
    Columns,
    RowNamer,
    check_layout,
    check_token,
    check_tokens,
    snapshot_ticks,
)

FORMAT_NAME = "arena-books"
FORMAT_VERSION = 1
_HASH_BLOCK = 1 << 20  # values hashed per block (8 MB)

Level = tuple[float, float]
"""A price level: ``(price, size)``."""


class Quote(NamedTuple):
    """L1: the touch of one snapshot; a missing side is NaN with size 0."""

    ts: int
    bid: float
    bid_size: float
    ask: float
    ask_size: float


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot:
    """One token's book at one instant. The arrays are read-only views into the store, best
    level first (bids falling, asks rising); two snapshots are the same if their ``row`` is."""

    token: BookToken
    row: int
    ts: int  # unix milliseconds
    tick: float
    bid_px: np.ndarray
    bid_sz: np.ndarray
    ask_px: np.ndarray
    ask_sz: np.ndarray

    @property
    def best_bid(self) -> float:
        return float(self.bid_px[0]) if self.bid_px.size else float("nan")

    @property
    def best_ask(self) -> float:
        return float(self.ask_px[0]) if self.ask_px.size else float("nan")

    @property
    def spread(self) -> float:
        """Best ask - best bid (NaN when a side is empty, negative when crossed)."""
        return self.best_ask - self.best_bid

    @property
    def mid(self) -> float:
        return (self.best_ask + self.best_bid) / 2

    @property
    def crossed(self) -> bool:
        return self.spread < 0 and not self.locked

    @property
    def locked(self) -> bool:
        return abs(self.spread) <= 1e-9

    @property
    def one_sided(self) -> bool:
        return (self.bid_px.size == 0) != (self.ask_px.size == 0)

    @property
    def quote(self) -> Quote:
        return Quote(
            self.ts,
            self.best_bid,
            float(self.bid_sz[0]) if self.bid_sz.size else 0.0,
            self.best_ask,
            float(self.ask_sz[0]) if self.ask_sz.size else 0.0,
        )


def _ints(column: np.ndarray) -> memoryview:
    """An int64 column as a memoryview whose items are Python ints (no numpy scalar per read)."""
    return memoryview(column.view(np.uint8).data).cast("q")


def _frozen(arr: np.ndarray, dtype: str) -> np.ndarray:
    view: np.ndarray = np.ascontiguousarray(arr, dtype=np.dtype(dtype)).view()
    view.setflags(write=False)
    return view


class Books:
    """An immutable store of order-book snapshots; build with ``from_snapshots``, an importer
    (``replays.importers.books``) or ``replays.bookfile.load_books``.

    ``lazy`` (a store read from a file) checks each token's snapshots the first time it is used
    (every lookup does), so opening costs O(tokens) whatever the file holds; ``check()`` checks
    them all now. A store built in memory is checked whole when built."""

    def __init__(
        self,
        tokens: Sequence[BookToken],
        columns: Columns,
        *,
        ticks: str = "inferred",
        attribution: str = "",
        source: str = "<memory>",
        lazy: bool = False,
        keep: object = None,
    ) -> None:
        """Wrap already-flat ``columns`` (``validate_books.Columns``); ``ticks`` says whether
        the source stated each snapshot's tick or the importer inferred it; ``attribution`` is
        the licence line the data must ship with (content: it is hashed). ``keep`` is what the
        arrays are views of (a memory map), held as long as the store."""
        self.tokens: tuple[BookToken, ...] = tuple(tokens)
        self.source = source
        self.ticks = ticks
        self.attribution = attribution
        check_tokens(source, self.tokens, ticks)
        self.columns = Columns(
            *(_frozen(arr, dtype) for arr, (_, dtype) in zip(columns, COLUMN_DTYPES, strict=True))
        )
        check_layout(source, len(self.tokens), self.columns)
        self._keep = keep
        self.index: dict[str, int] = {t.token: k for k, t in enumerate(self.tokens)}
        self._by_outcome = {(t.market, t.outcome): k for k, t in enumerate(self.tokens)}
        markets: dict[str, list[int]] = {}
        for k, t in enumerate(self.tokens):
            markets.setdefault(t.market, []).append(k)
        self.markets: dict[str, list[int]] = markets
        """Token indices per market, markets in the order their first token is listed."""
        offsets = self.columns.offsets.tolist()
        self._lo: list[int] = offsets[:-1]
        self._hi: list[int] = offsets[1:]
        # bisect over a memoryview reads Python ints straight from the buffer: a lookup is a
        # few hundred nanoseconds, where np.searchsorted on a slice costs a microsecond or more
        self._ts_view = _ints(self.columns.ts)
        self._bid_view = _ints(self.columns.bid_offsets)
        self._ask_view = _ints(self.columns.ask_offsets)
        self._checked = bytearray(len(self.tokens))
        if not lazy:
            self.check()

    @classmethod
    def from_snapshots(
        cls,
        tokens: Sequence[BookToken],
        series: Mapping[str, Iterable[tuple[int, Sequence[Level], Sequence[Level]]]],
        *,
        tick: float | None = None,
        attribution: str = "",
        source: str = "<memory>",
    ) -> Books:
        """A store from ``{token: [(ts_ms, bids, asks), ...]}`` with levels as ``(price, size)``
        best first, exactly as given (no sorting, no collapsing: faults are errors). ``tick``
        states every snapshot's tick; without it each is inferred (``infer_ticks``)."""
        ts: list[int] = []
        lengths: list[int] = []
        sides: dict[str, tuple[list[int], list[float], list[float]]] = {
            "bid": ([], [], []),
            "ask": ([], [], []),
        }
        for t in tokens:
            rows = list(series.get(t.token, ()))
            lengths.append(len(rows))
            for at, bids, asks in rows:
                ts.append(at)
                for side, levels in (("bid", bids), ("ask", asks)):
                    counts, px, sz = sides[side]
                    counts.append(len(levels))
                    px.extend(float(p) for p, _ in levels)
                    sz.extend(float(s) for _, s in levels)
        bid_n, ask_n = (np.asarray(sides[s][0], dtype=np.int64) for s in ("bid", "ask"))
        bid_px, ask_px = (np.asarray(sides[s][1], dtype=np.float64) for s in ("bid", "ask"))
        offsets = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
        if tick is None:
            ticks = snapshot_ticks(source, bid_n, bid_px, ask_n, ask_px, offsets)
        else:
            ticks = np.full(len(ts), tick)
        columns = Columns(
            offsets,
            np.asarray(ts, dtype=np.int64),
            ticks,
            np.concatenate(([0], np.cumsum(bid_n))),
            bid_px,
            np.asarray(sides["bid"][2], dtype=np.float64),
            np.concatenate(([0], np.cumsum(ask_n))),
            ask_px,
            np.asarray(sides["ask"][2], dtype=np.float64),
        )
        return cls(
            tokens,
            columns,
            ticks="inferred" if tick is None else "stated",
            attribution=attribution,
            source=source,
        )

    # -- content identity --------------------------------------------------------------------

    def canonical_meta(self) -> bytes:
        """The header as canonical JSON: the part of the content hash that is not arrays."""
        meta = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "tokens": [msgspec.to_builtins(t) for t in self.tokens],
            "ticks": self.ticks,
            "attribution": self.attribution,
        }
        return json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    @cached_property
    def hash(self) -> str:
        """sha256 over the canonical header and the little-endian columns (``FORMAT.md``):
        the same whether the file's members are stored or deflated."""
        h = hashlib.sha256(b"arena-books/1\n")
        h.update(self.canonical_meta())
        for column in self.columns:
            h.update(b"\n")
            for first in range(0, column.shape[0], _HASH_BLOCK):
                block = column[first : first + _HASH_BLOCK]
                if block.dtype.kind == "f":
                    block = block + 0.0  # -0.0 hashes as 0.0
                h.update(np.ascontiguousarray(block).data)
        return h.hexdigest()

    # -- checks ------------------------------------------------------------------------------

    def check(
        self, tokens: Iterable[int] | np.ndarray | None = None, *, name: RowNamer | None = None
    ) -> None:
        """Check ``tokens`` (default: every one) now, if not yet; the first fault is a
        one-line TapeError naming the file, the token and the row (``name`` words a row; an
        importer names its input's)."""
        ks = range(len(self.tokens)) if tokens is None else tokens
        for k in np.asarray(ks if isinstance(ks, np.ndarray) else list(ks), dtype=np.int64):
            if not self._checked[k]:
                check_token(self.source, int(k), self.tokens[k], self.columns, name)
                self._checked[k] = 1

    @property
    def checked(self) -> int:
        """How many tokens have been checked so far."""
        return sum(self._checked)

    # -- per-token access --------------------------------------------------------------------

    def token(self, market: str, outcome: str) -> int:
        """The index of ``market``'s book for ``outcome``; a one-line error if there is none."""
        k = self._by_outcome.get((market, outcome))
        if k is None:
            raise TapeError(f"{self.source}: no book for market {market} outcome {outcome!r}")
        return k

    def _k(self, token: int | str) -> int:
        if isinstance(token, str):
            k = self.index.get(token)
            if k is None:
                raise TapeError(f"{self.source}: no token {token!r}")
            return k
        return token

    def rows(self, k: int) -> slice:
        """Token ``k``'s rows of the snapshot columns."""
        self.check((k,))
        return slice(self._lo[k], self._hi[k])

    def times(self, k: int) -> np.ndarray:
        """Token ``k``'s snapshot instants (unix ms, strictly increasing); a view."""
        return self.columns.ts[self.rows(k)]

    def asof(self, k: int, ts_ms: int) -> int:
        """The row of token ``k``'s latest snapshot at or before ``ts_ms``, -1 if none: a
        binary search, never a row after the instant."""
        if not self._checked[k]:
            self.check((k,))
        lo = self._lo[k]
        found = bisect.bisect_right(self._ts_view, ts_ms, lo, self._hi[k])
        return found - 1 if found > lo else -1

    def asof_many(self, tokens: np.ndarray, ts_ms: np.ndarray) -> np.ndarray:
        """``asof`` for each pair ``(tokens[j], ts_ms[j])`` at once: a vectorised binary search
        (one numpy pass per halving, about 20 for a million snapshots a token)."""
        ks = np.asarray(tokens, dtype=np.int64)
        t = np.asarray(ts_ms, dtype=np.int64)
        self.check(np.unique(ks))
        offsets, ts = self.columns.offsets, self.columns.ts
        lo = offsets[ks]
        first = lo.copy()
        hi = offsets[ks + 1]
        last = max(ts.shape[0] - 1, 0)
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) >> 1
            later = ts[np.minimum(mid, last)] > t
            lo = np.where(active & ~later, mid + 1, lo)
            hi = np.where(active & later, mid, hi)
        return np.where(lo > first, lo - 1, -1)

    def snapshot(self, row: int) -> Snapshot:
        """The book at snapshot ``row`` (a row ``asof`` or ``BookWalk`` returned)."""
        if not 0 <= row < self.n_snapshots:
            raise IndexError(f"no snapshot row {row}")
        k = bisect.bisect_right(self._lo, row) - 1  # the last token starting at or before it
        if not self._checked[k]:
            self.check((k,))
        return self._snapshot(k, row)

    def _snapshot(self, k: int, row: int) -> Snapshot:
        c = self.columns
        b0, b1 = self._bid_view[row], self._bid_view[row + 1]
        a0, a1 = self._ask_view[row], self._ask_view[row + 1]
        return Snapshot(
            self.tokens[k], row, self._ts_view[row], float(c.tick[row]),
            c.bid_px[b0:b1], c.bid_sz[b0:b1], c.ask_px[a0:a1], c.ask_sz[a0:a1],
        )  # fmt: skip

    def book_at(
        self, token: int | str, ts_ms: int, *, max_age_ms: int | None = None
    ) -> Snapshot | None:
        """The token's book as of ``ts_ms`` (index or token id): its latest snapshot at or
        before the instant, or None if there is none (or, with ``max_age_ms``, none that
        recent: past the end of a recording the last book is not evidence of the next)."""
        k = self._k(token)
        row = self.asof(k, ts_ms)
        if row < 0 or (max_age_ms is not None and ts_ms - self._ts_view[row] > max_age_ms):
            return None
        return self._snapshot(k, row)

    def _checked_rows(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` as int64, each a snapshot row, their tokens checked."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size:
            if rows.min() < 0 or rows.max() >= self.n_snapshots:
                raise IndexError(f"snapshot rows run outside 0..{self.n_snapshots - 1}")
            owners = np.searchsorted(self.columns.offsets, rows, side="right") - 1
            self.check(np.unique(owners))
        return rows

    def quote(self, row: int) -> Quote:
        """L1 of snapshot ``row``: best bid and ask with their sizes."""
        bid, bid_sz, ask, ask_sz = self.quotes(np.array([row]))
        return Quote(
            int(self.columns.ts[row]), float(bid[0]), float(bid_sz[0]), float(ask[0]),
            float(ask_sz[0]),
        )  # fmt: skip

    def quotes(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(bid, bid_size, ask, ask_size)`` of each of ``rows`` (NaN and 0 where a side is
        empty): the touch of many snapshots with no Python per row."""
        rows = self._checked_rows(rows)
        c = self.columns
        out: list[np.ndarray] = []
        sides = ((c.bid_offsets, c.bid_px, c.bid_sz), (c.ask_offsets, c.ask_px, c.ask_sz))
        for offs, px, sz in sides:
            at = offs[rows]
            has = offs[rows + 1] > at
            safe = np.minimum(at, max(px.shape[0] - 1, 0))
            out.append(np.where(has, px[safe] if px.size else np.nan, np.nan))
            out.append(np.where(has, sz[safe] if sz.size else 0.0, 0.0))
        return out[0], out[1], out[2], out[3]

    def depths(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(bid, ask)`` dollars resting on each side of each of ``rows`` (price x size summed
        over its levels): a book's depth with no Python per row."""
        rows = self._checked_rows(rows)
        if not rows.size:
            return np.empty(0), np.empty(0)
        c = self.columns
        out = []
        sides = ((c.bid_offsets, c.bid_px, c.bid_sz), (c.ask_offsets, c.ask_px, c.ask_sz))
        for offs, px, sz in sides:  # summed over the levels between the rows' first and last
            lo, hi = int(offs[rows.min()]), int(offs[rows.max() + 1])
            notional = np.concatenate(([0.0], np.cumsum(px[lo:hi] * sz[lo:hi])))
            out.append(notional[offs[rows + 1] - lo] - notional[offs[rows] - lo])
        return out[0], out[1]

    def walk(self, tokens: Sequence[int] | np.ndarray) -> BookWalk:
        """Cursors over ``tokens`` for instants that only move forward (``BookWalk``)."""
        return BookWalk(self, tokens)

    # -- whole-store facts -------------------------------------------------------------------

    @property
    def n_snapshots(self) -> int:
        return int(self.columns.ts.shape[0])

    @property
    def n_levels(self) -> int:
        return int(self.columns.bid_px.shape[0] + self.columns.ask_px.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the columns (mapped, for a store read from a stored-member file)."""
        return sum(int(c.nbytes) for c in self.columns)

    def span(self, k: int | None = None) -> tuple[int, int] | None:
        """``(first, last)`` instant (ms) of token ``k``, or of the whole store; None if none."""
        ks = range(len(self.tokens)) if k is None else (k,)
        self.check(ks)
        ends = [(self._lo[j], self._hi[j]) for j in ks if self._hi[j] > self._lo[j]]
        if not ends:
            return None
        ts = self.columns.ts
        return min(int(ts[lo]) for lo, _ in ends), max(int(ts[hi - 1]) for _, hi in ends)

    def __repr__(self) -> str:
        return (
            f"Books(tokens={len(self.tokens)}, snapshots={self.n_snapshots}, "
            f"levels={self.n_levels}, source={self.source!r})"
        )


class BookWalk:
    """The latest snapshot row of each chosen token at instants that only move forward, kept
    in cursors (``replays.asof.AsOfWalk``): each snapshot is passed once over a whole replay,
    and the memory is a few numbers per token, never instants x tokens."""

    def __init__(self, books: Books, tokens: Sequence[int] | np.ndarray) -> None:
        ks = np.asarray(tokens, dtype=np.int64)
        books.check(ks)
        offsets = books.columns.offsets
        self._starts = offsets[ks]
        self._walk = AsOfWalk(books.columns.ts, self._starts, offsets[ks + 1])

    def advance(self, ts_ms: int) -> np.ndarray:
        """Walk to ``ts_ms`` (never back); each token's row as of it, -1 before its first."""
        self._walk.advance(ts_ms)
        position = self._walk.position
        return np.where(position >= 0, self._starts + position, -1)
