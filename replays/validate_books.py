"""What every order-book file must be before it is used, and the coverage ledger of one that is.

Two kinds of finding, kept apart on purpose:

* **Faults** make a book unusable and are a one-line ``TapeError`` naming the file, the token
  and the row: a price that is NaN, outside (0, 1) or off its snapshot's tick grid, a size that
  is not positive, levels out of order (bids must fall and asks rise, strictly, best first), a
  side with more than ``MAX_LEVELS`` levels, instants that repeat or go back, offsets that do
  not cut the columns. These are what a hostile or broken file looks like.
* **Flags** are what real books do and a fill model must know about, so they are counted, never
  dropped: a crossed book (best bid above best ask), a locked one (equal), a one-sided or empty
  one, a gap between snapshots, a change of tick size, a NO book that does not mirror its YES
  book. ``ledger`` counts them per token and per market.

The checks run on one token's slices of the columns with numpy (``check_token``), so a store
opened from a memory map checks a token when it is first used and never reads the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import numpy as np

from replays.errors import TapeError
from replays.tape import spans
from replays.validate import INSTANT_RANGE, MAX_INSTANT

if TYPE_CHECKING:
    from replays.books import Books

MAX_MS = MAX_INSTANT * 1000
"""Snapshot instants are unix milliseconds in the tapes' range, 1970-01-01..2100-01-01."""
MAX_LEVELS = 10_000
"""The most levels one side of one snapshot may have: a 0.0001-tick book from 0.0001 to 0.9999
has 9,999 prices, so a real Polymarket book never needs more, and a file claiming 10^9 is
refused by its row before anything is shaped from it."""
MAX_TICK = 0.1
"""The coarsest tick a snapshot may state (Polymarket's coarsest)."""
TICKS = (0.1, 0.01, 0.001, 0.0001)
"""Tick sizes an importer infers from, coarsest first: Polymarket's four decimal ticks. The
0.0025 World Cup tick is not among them because 0.005-spaced books on a 0.001 grid would read
as 0.0025; a source on it states its tick (a ``tick`` column)."""
GRID_TOLERANCE = 1e-6
"""How far ``price / tick`` may be from a whole number (float noise, in ticks)."""
PRICE_TOLERANCE = 1e-9
"""Prices closer than this are equal: a locked book, a mirrored level."""
DEPTHS = ("l2", "l1")
TICK_SOURCES = ("inferred", "stated")


class BookToken(msgspec.Struct, frozen=True, kw_only=True):
    """One outcome token's book series: which market and outcome it prices, and how deep.

    ``token`` is the CLOB asset id where the source gives it, else ``"<market>:<outcome>"``.
    ``depth`` is ``"l2"`` (every level the source saw) or ``"l1"`` (only the touch: best bid and
    ask with their sizes, as per-minute candles give; what lies behind it is unknown, which a
    fill model must not read as an empty book)."""

    token: str
    market: str
    outcome: str
    depth: str = "l2"


class Columns(NamedTuple):
    """The flat columns of a book store (``replays/FORMAT.md``, "Order books")."""

    offsets: np.ndarray  # int64, n_tokens + 1: token k's snapshots are rows offsets[k]:[k+1]
    ts: np.ndarray  # int64 unix ms, strictly increasing within a token
    tick: np.ndarray  # float64 per snapshot
    bid_offsets: np.ndarray  # int64, n_snapshots + 1: row i's bids are [i]:[i+1]
    bid_px: np.ndarray  # float64, best (highest) first
    bid_sz: np.ndarray  # float64 shares
    ask_offsets: np.ndarray
    ask_px: np.ndarray  # float64, best (lowest) first
    ask_sz: np.ndarray


COLUMN_DTYPES = (
    ("offsets", "<i8"), ("ts", "<i8"), ("tick", "<f8"),
    ("bid_offsets", "<i8"), ("bid_px", "<f8"), ("bid_sz", "<f8"),
    ("ask_offsets", "<i8"), ("ask_px", "<f8"), ("ask_sz", "<f8"),
)  # fmt: skip
"""Member names and dtypes, in the order the content hash reads them."""

RowNamer = Callable[[int], str]


def check_tokens(source: str, tokens: Sequence[BookToken], ticks: str) -> None:
    """The header a store's arrays are shaped from: distinct tokens, known depths."""
    if ticks not in TICK_SOURCES:
        raise TapeError(f"{source}: ticks {ticks!r} is not one of {', '.join(TICK_SOURCES)}")
    if not tokens:
        raise TapeError(f"{source}: no tokens: an empty book file")
    seen: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for t in tokens:
        where = f"{source}: token {t.token}"
        if not (t.token and t.market and t.outcome):
            raise TapeError(f"{where}: token, market and outcome must all be named")
        if t.token in seen:
            raise TapeError(f"{where}: listed twice")
        if (t.market, t.outcome) in pairs:
            raise TapeError(f"{where}: market {t.market} has two books for outcome {t.outcome!r}")
        if t.depth not in DEPTHS:
            raise TapeError(f"{where}: depth {t.depth!r} is not one of {', '.join(DEPTHS)}")
        seen.add(t.token)
        pairs.add((t.market, t.outcome))


def check_layout(source: str, n_tokens: int, cols: Columns) -> None:
    """The offsets cut the columns into slices, read from their ends only: what opening a
    store costs whatever its size (each token's inside is ``check_token``'s)."""

    def corrupt(problem: str) -> TapeError:
        return TapeError(f"{source}: corrupt book file: {problem}")

    n = cols.ts.shape[0]
    if cols.offsets.shape != (n_tokens + 1,):
        raise corrupt(f"offsets has {cols.offsets.shape[0]} entries for {n_tokens} tokens "
                      f"(needs {n_tokens + 1})")  # fmt: skip
    if cols.offsets[0] != 0 or cols.offsets[-1] != n:
        raise corrupt("snapshot offsets do not match the snapshots")
    if np.any(np.diff(cols.offsets) < 0):
        raise corrupt("snapshot offsets decrease")
    if n == 0:
        raise TapeError(f"{source}: no snapshots: an empty book file")
    if cols.tick.shape[0] != n:
        raise corrupt(f"{cols.tick.shape[0]} ticks for {n} snapshots")
    for side, offs, px, sz in (
        ("bid", cols.bid_offsets, cols.bid_px, cols.bid_sz),
        ("ask", cols.ask_offsets, cols.ask_px, cols.ask_sz),
    ):
        if offs.shape != (n + 1,):
            raise corrupt(f"{side}_offsets has {offs.shape[0]} entries for {n} snapshots")
        if px.shape != sz.shape:
            raise corrupt(f"{px.shape[0]} {side} prices but {sz.shape[0]} sizes")
        if offs[0] != 0 or offs[-1] != px.shape[0]:
            raise corrupt(f"{side} level offsets do not match the {side} levels")


def _at_row(ts: np.ndarray) -> RowNamer:
    return lambda row: f"row {row} (t={int(ts[row])} ms)"


def check_token(
    source: str, k: int, token: BookToken, cols: Columns, name: RowNamer | None = None
) -> None:
    """Every fault in token ``k``'s snapshots, the first one raised as a one-line TapeError
    naming the file, the token and the row (``name`` words a row: a store's row and instant, or
    an importer's input row). ``check_layout`` has passed."""
    lo, hi = int(cols.offsets[k]), int(cols.offsets[k + 1])
    name = name or _at_row(cols.ts)

    def fail(row: int, problem: str) -> TapeError:
        return TapeError(f"{source}: token {token.token}: {name(row)}: {problem}")

    ts = cols.ts[lo:hi]
    bad = np.flatnonzero((ts < 0) | (ts >= MAX_MS))
    if bad.size:
        raise fail(lo + int(bad[0]), f"instant is outside {INSTANT_RANGE}")
    bad = np.flatnonzero(ts[1:] <= ts[:-1])
    if bad.size:
        i = int(bad[0])
        kind = "a second snapshot at the same instant" if ts[i + 1] == ts[i] else "unsorted"
        raise fail(lo + i + 1, f"{kind} (the one before is at t={int(ts[i])} ms)")
    tick = cols.tick[lo:hi]
    bad = np.flatnonzero(~(np.isfinite(tick) & (tick > 0) & (tick <= MAX_TICK)))
    if bad.size:
        raise fail(lo + int(bad[0]), f"tick {float(tick[bad[0]])} is not in (0, {MAX_TICK}]")
    for side, offs, px, sz, sign in (
        ("bid", cols.bid_offsets, cols.bid_px, cols.bid_sz, -1.0),
        ("ask", cols.ask_offsets, cols.ask_px, cols.ask_sz, 1.0),
    ):
        _check_side(side, lo, hi, offs, px, sz, sign, tick, token, fail)


def _check_side(
    side: str,
    lo: int,
    hi: int,
    offs: np.ndarray,
    px: np.ndarray,
    sz: np.ndarray,
    sign: float,
    tick: np.ndarray,
    token: BookToken,
    fail: Callable[[int, str], TapeError],
) -> None:
    """One side's levels of rows ``lo:hi``: counts, prices, sizes, tick grid, order."""
    o = offs[lo : hi + 1]
    counts = np.diff(o)
    limit = 1 if token.depth == "l1" else MAX_LEVELS
    bad = np.flatnonzero((counts > limit) | (counts < 0))
    if bad.size:
        count = int(counts[bad[0]])
        if count < 0:
            raise fail(lo + int(bad[0]), f"{side} level offsets decrease (corrupt)")
        what = "an l1 (touch only) book" if token.depth == "l1" else "a book"
        raise fail(lo + int(bad[0]), f"{count} {side} levels, more than {what} may have "
                                     f"({limit})")  # fmt: skip
    first, last = int(o[0]), int(o[-1])
    if first < 0 or last > px.shape[0]:
        raise fail(lo, f"{side} level offsets run past the levels (corrupt)")
    if first == last:
        return
    p, s = px[first:last], sz[first:last]

    def row_of(j: int) -> int:
        return lo + int(np.searchsorted(o, first + j, side="right")) - 1

    bad = np.flatnonzero(~np.isfinite(p) | (p <= 0.0) | (p >= 1.0))
    if bad.size:
        j = int(bad[0])
        raise fail(row_of(j), f"{side} price {float(p[j])} is not a price in (0, 1)")
    bad = np.flatnonzero(~(np.isfinite(s) & (s > 0.0)))
    if bad.size:
        j = int(bad[0])
        raise fail(row_of(j), f"{side} size {float(s[j])} at {float(p[j])} is not positive")
    grid = p / np.repeat(tick, counts)
    bad = np.flatnonzero(np.abs(grid - np.rint(grid)) > GRID_TOLERANCE)
    if bad.size:
        j = int(bad[0])
        at = row_of(j)
        raise fail(at, f"{side} price {float(p[j])} is off the tick grid "
                       f"({float(tick[at - lo])})")  # fmt: skip
    worse = sign * (p[1:] - p[:-1]) > 0  # each next level strictly worse than the one before
    starts = o[1:-1] - first  # a snapshot's first level need not be worse than the last one's
    inner = starts[(starts > 0) & (starts < p.shape[0])]
    worse[inner - 1] = True
    bad = np.flatnonzero(~worse)
    if bad.size:
        j = int(bad[0]) + 1
        order = "falling" if sign < 0 else "rising"
        raise fail(row_of(j), f"{side} levels are not strictly {order} from the best "
                              f"({float(p[j - 1])} then {float(p[j])})")  # fmt: skip


def infer_ticks(
    px: np.ndarray, counts: np.ndarray, candidates: Sequence[float] = TICKS
) -> np.ndarray:
    """Each snapshot's tick: the coarsest of ``candidates`` every one of its prices lies on;
    NaN where none fits (a price no tick explains) and for a snapshot with no prices. ``px``
    holds each snapshot's ``counts`` prices, snapshot after snapshot."""
    n = counts.shape[0]
    found = np.full(n, np.nan)
    if not px.size:
        return found
    owner = np.repeat(np.arange(n), counts)
    for tick in sorted(candidates, reverse=True):
        grid = px / tick
        off = np.abs(grid - np.rint(grid)) > GRID_TOLERANCE
        misfit = np.zeros(n, dtype=bool)
        misfit[owner[off]] = True
        fits = ~misfit & np.isnan(found) & (counts > 0)
        found[fits] = tick
    return found


# -- the coverage ledger ----------------------------------------------------------------------


@dataclass
class TokenLedger:
    """One token's book series, counted: what it covers and what its books did."""

    token: str
    outcome: str
    depth: str
    snapshots: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    gaps: int = 0  # consecutive snapshots further apart than the ledger's gap
    longest_gap_ms: int = 0
    crossed: int = 0  # best bid above best ask
    locked: int = 0  # best bid equal to best ask
    one_sided: int = 0  # one side empty
    empty: int = 0  # both sides empty
    tick_changes: int = 0
    ticks: list[float] = field(default_factory=list)  # distinct ticks, smallest first


@dataclass
class MarketLedger:
    """A market's tokens, and its mirror: where two outcome tokens both have a book at the same
    instant, the second's bids must be 1 - the first's asks with the same sizes (and the other
    way round), since a NO buy crosses a YES sell through the exchange's minting."""

    market: str
    tokens: list[TokenLedger]
    mirror_pairs: int = 0
    mirror_mismatches: int = 0

    def total(self, name: str) -> int:
        """A count summed over the market's tokens."""
        return sum(int(getattr(t, name)) for t in self.tokens)

    def as_dict(self) -> dict[str, Any]:
        counts = ("snapshots", "gaps", "crossed", "locked", "one_sided", "empty", "tick_changes")
        out: dict[str, Any] = {"market": self.market}
        out.update({name: self.total(name) for name in counts})
        out.update(mirror_pairs=self.mirror_pairs, mirror_mismatches=self.mirror_mismatches)
        out["tokens"] = [asdict(t) for t in self.tokens]
        return out


def _token_ledger(books: Books, k: int, gap_ms: int) -> TokenLedger:
    token = books.tokens[k]
    rows = books.rows(k)
    ts = books.times(k)
    out = TokenLedger(token.token, token.outcome, token.depth, snapshots=int(ts.size))
    if not ts.size:
        return out
    out.first_ts, out.last_ts = int(ts[0]), int(ts[-1])
    gaps = np.diff(ts)
    out.gaps = int(np.count_nonzero(gaps > gap_ms))
    out.longest_gap_ms = int(gaps.max(initial=0))
    bid, _, ask, _ = books.quotes(np.arange(rows.start, rows.stop))
    has_bid, has_ask = ~np.isnan(bid), ~np.isnan(ask)
    both = has_bid & has_ask
    out.crossed = int(np.count_nonzero(both & (bid > ask + PRICE_TOLERANCE)))
    out.locked = int(np.count_nonzero(both & (np.abs(bid - ask) <= PRICE_TOLERANCE)))
    out.one_sided = int(np.count_nonzero(has_bid != has_ask))
    out.empty = int(np.count_nonzero(~has_bid & ~has_ask))
    tick = books.columns.tick[rows]
    out.tick_changes = int(np.count_nonzero(tick[1:] != tick[:-1]))
    out.ticks = sorted(float(t) for t in np.unique(tick))
    return out


def _levels(
    offs: np.ndarray, px: np.ndarray, sz: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The prices and sizes of every level of ``rows``, row after row."""
    flat = spans(offs[rows], offs[rows + 1] - offs[rows])
    return px[flat], sz[flat]


def mirror_counts(books: Books, first: int, second: int) -> tuple[int, int]:
    """``(pairs, mismatches)``: snapshots of two tokens of one market at the same instant, and
    how many of them are not each other's mirror (bids = 1 - the other's asks, equal sizes, both
    ways round)."""
    a_rows, b_rows = books.rows(first), books.rows(second)
    _, ia, ib = np.intersect1d(books.times(first), books.times(second), return_indices=True)
    if not ia.size:
        return 0, 0
    ra, rb = a_rows.start + ia, b_rows.start + ib
    c = books.columns
    mismatched = np.zeros(ia.size, dtype=bool)
    for mine, theirs in (
        ((c.bid_offsets, c.bid_px, c.bid_sz), (c.ask_offsets, c.ask_px, c.ask_sz)),
        ((c.ask_offsets, c.ask_px, c.ask_sz), (c.bid_offsets, c.bid_px, c.bid_sz)),
    ):
        n_a = mine[0][ra + 1] - mine[0][ra]
        n_b = theirs[0][rb + 1] - theirs[0][rb]
        mismatched |= n_a != n_b
        same = np.flatnonzero(n_a == n_b)  # compared level by level where the counts agree
        pa, sa = _levels(*mine, ra[same])
        pb, sb = _levels(*theirs, rb[same])
        differs = (np.abs(pa - (1.0 - pb)) > PRICE_TOLERANCE) | (
            np.abs(sa - sb) > PRICE_TOLERANCE * np.maximum(1.0, sa)
        )
        owner = np.repeat(same, n_a[same])
        mismatched[owner[differs]] = True
    return int(ia.size), int(np.count_nonzero(mismatched))


def ledger(
    books: Books, gap_seconds: float = 10.0, markets: Collection[str] | None = None
) -> list[MarketLedger]:
    """The coverage ledger: per market (of ``markets`` only, if given), in the order of their
    first snapshots, each token's snapshots, span, gaps longer than ``gap_seconds``, crossed /
    locked / one-sided / empty books and tick changes, and the mirror where the market has
    exactly two tokens. Checks each token first (``Books.check``), so a fault is an error, not
    a count."""
    gap_ms = round(gap_seconds * 1000)
    out: list[MarketLedger] = []
    for market, ks in books.markets.items():
        if markets is not None and market not in markets:
            continue
        books.check(ks)
        entry = MarketLedger(market, [_token_ledger(books, k, gap_ms) for k in ks])
        if len(ks) == 2:
            entry.mirror_pairs, entry.mirror_mismatches = mirror_counts(books, *ks)
        out.append(entry)
    return sorted(
        out, key=lambda e: (min((t.first_ts or 0 for t in e.tokens), default=0), e.market)
    )


def _owners(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(counts.size), counts)


def snapshot_ticks(
    source: str,
    bid_n: np.ndarray,
    bid_px: np.ndarray,
    ask_n: np.ndarray,
    ask_px: np.ndarray,
    offsets: np.ndarray,
    candidates: Sequence[float] = TICKS,
    name: RowNamer | None = None,
) -> np.ndarray:
    """The tick of each snapshot when the source states none: the coarsest of ``candidates``
    its prices all lie on (``infer_ticks``). A snapshot with no price at all takes its token's
    tick from the snapshot before it (or after it, at the start; the finest candidate for a
    token with no price anywhere). A price no candidate explains is a one-line error by row."""
    counts = bid_n + ask_n
    owners = np.concatenate((_owners(bid_n), _owners(ask_n)))
    order = np.argsort(owners, kind="stable")  # each snapshot's bids, then its asks
    found = infer_ticks(np.concatenate((bid_px, ask_px))[order], counts, candidates)
    bad = np.flatnonzero(np.isnan(found) & (counts > 0))
    if bad.size:
        row = int(bad[0])
        where = name(row) if name else f"row {row}"
        ticks = ", ".join(f"{t:g}" for t in candidates)
        raise TapeError(f"{source}: {where}: prices fit none of the tick sizes {ticks}")
    n = found.shape[0]
    token = _owners(np.diff(offsets))
    index = np.where(counts > 0, np.arange(n), -1)
    ahead = np.maximum.accumulate(index) if n else index  # the last priced row so far
    ahead = np.where((ahead >= 0) & (token[np.maximum(ahead, 0)] == token), ahead, -1)
    behind = np.where(counts > 0, np.arange(n), n)
    behind = np.minimum.accumulate(behind[::-1])[::-1] if n else behind  # the next priced row
    behind = np.where((behind < n) & (token[np.minimum(behind, n - 1)] == token), behind, -1)
    source_row = np.where(ahead >= 0, ahead, behind)
    finest = min(candidates)
    return np.where(source_row >= 0, found[np.maximum(source_row, 0)], finest)
