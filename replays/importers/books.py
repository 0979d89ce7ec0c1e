"""Order books from archives into a book store, and for resolvedkit's layout a price tape too.

Two input forms (``replays/FORMAT.md``, "Importing books"):

* ``resolvedkit``: its documented two Parquet files, ``books.parquet`` (``market_id``, ``ts``
  unix ms, ``side`` UP/DOWN, ``bid_px``/``bid_sz``/``ask_px``/``ask_sz`` lists best first) and
  ``markets.parquet`` (question, window, payouts). The bundled ``books_btc15m`` is one. Besides
  the books this makes a price tape of the same markets, so a replay has markets to trade.
* ``columns``: the generic form, CSV or Parquet, one row per snapshot (``bid_px`` ... as lists,
  or as plain numbers for L1 quotes) or one row per level (``book`` bid/ask, ``price``,
  ``size``), with ``market``, ``outcome`` (or ``side``), optional ``token`` and ``tick``.

Both end in ``assemble``: rows grouped by token and sorted by instant, a snapshot repeated at
the same instant collapsed (identical: counted; different: the later row kept, counted), ticks
inferred where the source states none, and every token checked with faults named by the
input's row. Parquet needs pyarrow (the ``parquet`` extra); CSV needs nothing more.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from replays.books import Books
from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape, spans
from replays.untrusted import Budget, read_file
from replays.validate_books import TICKS, BookToken, Columns, snapshot_ticks

PARQUET_EXTRA = "reading Parquet needs pyarrow: pip install 'arena[parquet]'"
RESOLVEDKIT_ATTRIBUTION = "Order-book sample from resolvedkit (resolvedmarkets), CC BY 4.0."
"""The line the resolvedkit sample's licence asks to travel with anything made from it."""
TS_UNITS = {"s": 1000, "ms": 1, "us": -1_000, "ns": -1_000_000}
"""Milliseconds per unit (positive) or units per millisecond (negative)."""


@dataclass
class BooksImport:
    """The books (and, for resolvedkit, the tape) plus what the import decided, and why."""

    books: Books
    tape: Tape | None = None
    rows: int = 0  # input rows read
    collapsed: int = 0  # a snapshot repeated at the same instant, identical: dropped
    replaced: int = 0  # repeated at the same instant but different: the later row kept
    notes: list[str] = field(default_factory=list)


@dataclass
class SnapshotRows:
    """Input rows, one snapshot each, in input order: what every form is read into (the
    columns and resolvedkit files here, a recorder's journal in ``replays.book_recorder``)."""

    source: str
    market: list[str]
    outcome: list[str]
    token: list[str | None]
    ts: np.ndarray  # int64 ms
    tick: np.ndarray  # float64, NaN where not stated
    bid_n: np.ndarray
    bid_px: np.ndarray
    bid_sz: np.ndarray
    ask_n: np.ndarray
    ask_px: np.ndarray
    ask_sz: np.ndarray
    label: str = "row"  # what an input row is called: "row" (Parquet, from 1) or "line" (CSV)
    first: int = 1  # the number of the first row
    lines: np.ndarray | None = None  # each row's number where not ``first + index``

    def name(self, index: int) -> str:
        number = int(self.lines[index]) if self.lines is not None else self.first + index
        return f"{self.label} {number}"


def assemble(
    rows: SnapshotRows,
    *,
    depth: str = "l2",
    candidates: Sequence[float] = TICKS,
    attribution: str = "",
) -> BooksImport:
    """Rows into a checked store: tokens in (market, outcome) order, each token's snapshots by
    instant, a repeated instant collapsed, ticks stated or inferred, faults named by input row."""
    source, n = rows.source, len(rows.market)
    if n == 0:
        raise TapeError(f"{source}: no rows: nothing to import")
    ids: dict[tuple[str, str], str] = {}
    for i, (market, outcome) in enumerate(zip(rows.market, rows.outcome, strict=True)):
        if not market or not outcome:
            raise TapeError(f"{source}: {rows.name(i)}: market and outcome must be named")
        key = (market, outcome)
        named = rows.token[i] or f"{market}:{outcome}"
        if ids.setdefault(key, named) != named:
            raise TapeError(f"{source}: {rows.name(i)}: market {market} outcome {outcome!r} "
                            f"is token {ids[key]!r} above, {named!r} here")  # fmt: skip
    keys = sorted(ids)
    tokens = [BookToken(token=ids[k], market=k[0], outcome=k[1], depth=depth) for k in keys]
    seen: dict[str, tuple[str, str]] = {}
    for key, book in zip(keys, tokens, strict=True):
        if seen.setdefault(book.token, key) != key:
            raise TapeError(f"{source}: token {book.token} prices two books "
                            f"({seen[book.token]} and {key})")  # fmt: skip
    position = {k: j for j, k in enumerate(keys)}
    which = np.fromiter(
        (position[(m, o)] for m, o in zip(rows.market, rows.outcome, strict=True)), np.int64, n
    )
    order = np.lexsort((np.arange(n), rows.ts, which))  # by token, instant, then input order
    which, ts = which[order], rows.ts[order]
    bid = _reordered(rows.bid_n, rows.bid_px, rows.bid_sz, order)
    ask = _reordered(rows.ask_n, rows.ask_px, rows.ask_sz, order)
    tick = rows.tick[order]
    repeated = (which[1:] == which[:-1]) & (ts[1:] == ts[:-1])  # row j repeats at row j + 1
    collapsed = replaced = 0
    if repeated.any():
        same = _same_as_next(bid, repeated) & _same_as_next(ask, repeated)
        same &= (tick[1:] == tick[:-1]) | (np.isnan(tick[1:]) & np.isnan(tick[:-1]))
        collapsed = int(np.count_nonzero(same))
        replaced = int(np.count_nonzero(repeated)) - collapsed
        keep = np.ones(n, dtype=bool)
        keep[:-1] = ~repeated  # the last of each run of one instant is kept
        order, which, ts, tick = order[keep], which[keep], ts[keep], tick[keep]
        bid = _reordered(*bid, np.flatnonzero(keep))
        ask = _reordered(*ask, np.flatnonzero(keep))
    offsets = np.searchsorted(which, np.arange(len(tokens) + 1)).astype(np.int64)

    def name(row: int) -> str:
        return rows.name(int(order[row]))

    stated = not np.isnan(tick).any()
    if not stated:
        if not np.isnan(tick).all():
            row = int(np.flatnonzero(np.isnan(tick))[0])
            raise TapeError(f"{source}: {name(row)}: no tick, where other rows state one")
        tick = snapshot_ticks(source, bid[0], bid[1], ask[0], ask[1], offsets, candidates, name)
    columns = Columns(
        offsets, ts, tick,
        np.concatenate(([0], np.cumsum(bid[0]))), bid[1], bid[2],
        np.concatenate(([0], np.cumsum(ask[0]))), ask[1], ask[2],
    )  # fmt: skip
    books = Books(
        tokens, columns, ticks="stated" if stated else "inferred", attribution=attribution,
        source=source, lazy=True,
    )  # fmt: skip
    books.check(name=name)
    notes = []
    if collapsed:
        notes.append(f"{collapsed} snapshots repeated at the same instant, identical: collapsed")
    if replaced:
        notes.append(f"{replaced} snapshots repeated at the same instant with a different book: "
                     "the later row kept")  # fmt: skip
    return BooksImport(books, rows=n, collapsed=collapsed, replaced=replaced, notes=notes)


def _reordered(
    counts: np.ndarray, px: np.ndarray, sz: np.ndarray, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One side's levels with its rows taken in ``order``."""
    starts = np.concatenate(([0], np.cumsum(counts)))[:-1]
    flat = spans(starts[order], counts[order])
    return counts[order], px[flat], sz[flat]


def _same_as_next(side: tuple[np.ndarray, np.ndarray, np.ndarray], asked: np.ndarray) -> np.ndarray:
    """Whether each ``asked`` row's levels equal the next row's exactly (prices and sizes)."""
    counts, px, sz = side
    starts = np.concatenate(([0], np.cumsum(counts)))
    same = np.asarray(asked & (counts[1:] == counts[:-1]), dtype=bool)
    for j in np.flatnonzero(same).tolist():
        a, b = slice(starts[j], starts[j + 1]), slice(starts[j + 1], starts[j + 2])
        same[j] = bool(np.array_equal(px[a], px[b]) and np.array_equal(sz[a], sz[b]))
    return same


# -- Parquet ----------------------------------------------------------------------------------


def _pyarrow(source: str) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TapeError(f"{source}: {PARQUET_EXTRA}") from None
    return pq


def read_parquet(path: Path, columns: Sequence[str] | None, budget: Budget) -> Any:
    """A Parquet file's table, refused before reading if what its metadata declares would
    decode past the budget: each column chunk's encoded size plus eight bytes a value (a
    dictionary- or run-length-encoded column is small on disk and large in memory)."""
    pq = _pyarrow(str(path))
    import pyarrow as pa

    try:
        meta = pq.ParquetFile(path).metadata
        declared = 0
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                chunk = group.column(c)
                declared += chunk.total_uncompressed_size + 8 * chunk.num_values
        budget.spend(declared, "its data")
        return pq.read_table(path, columns=list(columns) if columns else None)
    except (pa.ArrowException, OSError) as exc:
        raise TapeError(f"{path}: unreadable Parquet: {exc}") from None


def _parquet_strings(table: Any, name: str, source: str, required: bool = True) -> list[Any]:
    if name not in table.column_names:
        if required:
            raise TapeError(f"{source}: no column {name!r}")
        return [None] * table.num_rows
    import pyarrow as pa

    column = table.column(name)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise TapeError(f"{source}: column {name!r} is {column.type}, not text")
    return list(column.to_pylist())


def _parquet_ts(table: Any, name: str, unit: str, source: str) -> np.ndarray:
    import pyarrow as pa

    column = table.column(name).combine_chunks()
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise TapeError(f"{source}: row {row + 1}: {name} is empty")
    if pa.types.is_timestamp(column.type):
        unit = {"s": "s", "ms": "ms", "us": "us", "ns": "ns"}[column.type.unit]
        column = column.cast(pa.int64())
    elif not pa.types.is_integer(column.type):
        raise TapeError(f"{source}: column {name!r} is {column.type}, not whole instants")
    return to_ms(np.asarray(column.to_numpy(), dtype=np.int64), unit, source)


def _parquet_floats(table: Any, name: str, source: str) -> np.ndarray:
    import pyarrow as pa

    column = table.column(name).combine_chunks()
    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise TapeError(f"{source}: column {name!r} is {column.type}, not numbers")
    return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _parquet_levels(table: Any, name: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    """A list column's per-row lengths (a null list is an empty side) and values, or a plain
    number column as at most one level a row (L1: a null or NaN is an empty side)."""
    import pyarrow as pa

    column = table.column(name).combine_chunks()
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        value = kind.value_type
        if not (pa.types.is_floating(value) or pa.types.is_integer(value)):
            raise TapeError(f"{source}: column {name!r} is {kind}, not lists of numbers")
        lengths = column.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
        values = column.flatten().cast(pa.float64()).to_numpy(zero_copy_only=False)
        return np.asarray(lengths, dtype=np.int64), np.asarray(values, dtype=np.float64)
    values = _parquet_floats(table, name, source)
    present = ~np.isnan(values)
    return present.astype(np.int64), values[present]


def _levels_pair(
    source: str, label: str, prices: tuple[np.ndarray, np.ndarray],
    sizes: tuple[np.ndarray, np.ndarray], side: str, numbers: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """A side's per-row counts, prices and sizes, where each row has as many of each."""
    (n_px, px), (n_sz, sz) = prices, sizes
    bad = np.flatnonzero(n_px != n_sz)
    if bad.size:
        i = int(bad[0])
        number = int(numbers[i]) if numbers is not None else i + 1
        raise TapeError(f"{source}: {label} {number}: {int(n_px[i])} {side} prices but "
                        f"{int(n_sz[i])} sizes")  # fmt: skip
    return n_px, px, sz


def to_ms(values: np.ndarray, unit: str, source: str) -> np.ndarray:
    """Instants in ``unit`` as unix milliseconds, rounded up: a snapshot is never placed before
    the instant it was taken (a book at 1.9999 ms is visible from 2 ms, not 1)."""
    if unit not in TS_UNITS:
        raise TapeError(f"{source}: instant unit {unit!r} is not one of {', '.join(TS_UNITS)}")
    factor = TS_UNITS[unit]
    if factor > 0:
        limit = np.iinfo(np.int64).max // factor
        if np.any(np.abs(values) > limit):
            raise TapeError(f"{source}: an instant is too large for unix {unit}")
        return np.asarray(values * factor, dtype=np.int64)
    return np.asarray(-(-values // -factor), dtype=np.int64)  # ceiling division


def _rows_from_parquet(
    path: Path, budget: Budget, unit: str, outcome_of: dict[tuple[str, str], str] | None = None
) -> tuple[SnapshotRows, str]:
    """A Parquet file's snapshots, and which layout it had: ``levels`` (a row per level),
    ``lists`` (a row per snapshot, levels as lists) or ``quotes`` (plain numbers: L1)."""
    import pyarrow as pa

    source = str(path)
    table = read_parquet(path, None, budget)
    names = set(table.column_names)
    market = _parquet_strings(table, "market" if "market" in names else "market_id", source)
    outcome_col = "outcome" if "outcome" in names else "side"
    outcome = _parquet_strings(table, outcome_col, source)
    if outcome_of is not None:  # resolvedkit: UP/DOWN named by the market's outcome labels
        outcome = _outcomes(source, market, outcome, outcome_of)
    token = _parquet_strings(table, "token", source, required=False)
    ts = _parquet_ts(table, "ts", unit, source)
    n = table.num_rows
    tick = _parquet_floats(table, "tick", source) if "tick" in names else np.full(n, np.nan)
    if {"book", "price", "size"} <= names:
        book = _parquet_strings(table, "book", source)
        rows = _long_rows(source, "row", market, outcome, token, ts, tick, book,
                          _parquet_floats(table, "price", source),
                          _parquet_floats(table, "size", source), first=1)  # fmt: skip
        return rows, "levels"
    missing = {"bid_px", "bid_sz", "ask_px", "ask_sz"} - names
    if missing:
        raise TapeError(f"{source}: no column {sorted(missing)[0]!r} (a row per snapshot "
                        "needs bid_px, bid_sz, ask_px, ask_sz; a row per level book, price, "
                        "size)")  # fmt: skip
    bid = _levels_pair(source, "row", _parquet_levels(table, "bid_px", source),
                       _parquet_levels(table, "bid_sz", source), "bid")  # fmt: skip
    ask = _levels_pair(source, "row", _parquet_levels(table, "ask_px", source),
                       _parquet_levels(table, "ask_sz", source), "ask")  # fmt: skip
    kind = table.column("bid_px").type
    lists = pa.types.is_list(kind) or pa.types.is_large_list(kind)
    rows = SnapshotRows(source, market, outcome, token, ts, tick, *bid, *ask)
    return rows, "lists" if lists else "quotes"


def _outcomes(
    source: str, market: list[str], side: list[str], outcome_of: dict[tuple[str, str], str]
) -> list[str]:
    out = []
    for i, key in enumerate(zip(market, side, strict=True)):
        label = outcome_of.get(key)
        if label is None:
            known = {m for m, _ in outcome_of}
            problem = (f"side {key[1]!r} is neither UP nor DOWN" if key[0] in known
                       else f"market {key[0]} is not in markets.parquet")  # fmt: skip
            raise TapeError(f"{source}: row {i + 1}: {problem}")
        out.append(label)
    return out


# -- CSV --------------------------------------------------------------------------------------

_FLOATS = msgspec.json.Decoder(list[float])


def _csv_levels(source: str, line: int, name: str, cell: str) -> tuple[list[float], bool]:
    """A cell's levels and whether it was a list: a JSON list of numbers, or one plain number
    (an L1 quote; empty or NaN is an empty side)."""
    cell = cell.strip()
    if cell.startswith("["):
        try:
            return _FLOATS.decode(cell), True
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TapeError(f"{source}: line {line}: {name} is not a list of numbers "
                            f"({exc})") from None  # fmt: skip
    if not cell:
        return [], False
    value = _csv_float(source, line, name, cell)
    return ([] if math.isnan(value) else [value]), False


def _csv_float(source: str, line: int, name: str, cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise TapeError(f"{source}: line {line}: {name} {cell[:40]!r} is not a number") from None


def _csv_int(source: str, line: int, name: str, cell: str) -> int:
    try:
        return int(cell.strip())
    except ValueError:
        raise TapeError(f"{source}: line {line}: {name} {cell[:40]!r} is not a whole "
                        "number") from None  # fmt: skip


def _rows_from_csv(path: Path, budget: Budget, unit: str) -> tuple[SnapshotRows, str]:
    """A CSV file's snapshots and its layout (as ``_rows_from_parquet``): lists are JSON
    arrays in their cells; a file whose price cells are all plain numbers holds quotes."""
    source = str(path)
    try:
        text = read_file(path, budget).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TapeError(f"{source}: not UTF-8 text: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    names = set(reader.fieldnames or ())
    outcome_col = "outcome" if "outcome" in names else "side"
    long = {"book", "price", "size"} <= names
    wide = ("bid_px", "bid_sz", "ask_px", "ask_sz")
    needed = {"market", outcome_col, "ts", *(("book", "price", "size") if long else wide)}
    missing = needed - names
    if missing:
        raise TapeError(f"{source}: no column {sorted(missing)[0]!r}")
    market: list[str] = []
    outcome: list[str] = []
    token: list[str | None] = []
    ts: list[int] = []
    tick: list[float] = []
    lines: list[int] = []
    book: list[str] = []
    values: dict[str, list[float]] = {k: [] for k in wide}
    counts: dict[str, list[int]] = {k: [] for k in wide}
    lists = False
    try:
        for row in reader:
            line = reader.line_num
            lines.append(line)
            market.append(row["market"] or "")
            outcome.append(row[outcome_col] or "")
            token.append(row.get("token") or None)
            ts.append(_csv_int(source, line, "ts", row["ts"] or ""))
            cell = (row.get("tick") or "").strip()
            tick.append(_csv_float(source, line, "tick", cell) if cell else math.nan)
            if long:
                book.append(row["book"] or "")
                values["bid_px"].append(_csv_float(source, line, "price", row["price"] or ""))
                values["bid_sz"].append(_csv_float(source, line, "size", row["size"] or ""))
                continue
            for name in wide:
                found, was_list = _csv_levels(source, line, name, row[name] or "")
                lists |= was_list
                values[name].extend(found)
                counts[name].append(len(found))
    except csv.Error as exc:
        raise TapeError(f"{source}: line {reader.line_num}: bad CSV: {exc}") from None
    stamps = to_ms(np.asarray(ts, dtype=np.int64), unit, source)
    ticks = np.asarray(tick, dtype=np.float64)
    numbers = np.asarray(lines, dtype=np.int64)
    if long:
        rows = _long_rows(source, "line", market, outcome, token, stamps, ticks, book,
                          np.asarray(values["bid_px"]), np.asarray(values["bid_sz"]),
                          lines=numbers)  # fmt: skip
        return rows, "levels"
    arrays = {k: (np.asarray(counts[k], dtype=np.int64), np.asarray(v, dtype=np.float64))
              for k, v in values.items()}  # fmt: skip
    bid = _levels_pair(source, "line", arrays["bid_px"], arrays["bid_sz"], "bid", numbers)
    ask = _levels_pair(source, "line", arrays["ask_px"], arrays["ask_sz"], "ask", numbers)
    rows = SnapshotRows(source, market, outcome, token, stamps, ticks, *bid, *ask, label="line",
                 lines=numbers)  # fmt: skip
    return rows, "lists" if lists else "quotes"


# -- one row per level ------------------------------------------------------------------------


def _long_rows(
    source: str, label: str, market: list[str], outcome: list[str], token: list[str | None],
    ts: np.ndarray, tick: np.ndarray, book: list[str], price: np.ndarray, size: np.ndarray,
    *, first: int = 1, lines: np.ndarray | None = None,
) -> SnapshotRows:  # fmt: skip
    """Level rows grouped into snapshots (one per token and instant), each side's levels put
    best first by price; a price given twice on one side of one snapshot is an error."""
    n = len(market)
    numbers = lines if lines is not None else np.arange(first, first + n)
    is_bid = np.empty(n, dtype=bool)
    for i, b in enumerate(book):
        kind = (b or "").strip().lower()
        if kind not in ("bid", "ask"):
            raise TapeError(f"{source}: {label} {int(numbers[i])}: book {b!r} is not bid or ask")
        is_bid[i] = kind == "bid"
    keys: dict[tuple[str, str, str | None], int] = {}
    who = np.fromiter(
        (keys.setdefault(k, len(keys)) for k in zip(market, outcome, token, strict=True)),
        np.int64, n,
    )  # fmt: skip
    best_first = np.where(is_bid, -price, price)
    order = np.lexsort((best_first, ~is_bid, ts, who))  # snapshot, bids then asks, best first
    who, ts_o, bids, key = who[order], ts[order], is_bid[order], best_first[order]
    twice = (who[1:] == who[:-1]) & (ts_o[1:] == ts_o[:-1]) & (bids[1:] == bids[:-1])
    twice &= key[1:] == key[:-1]
    if twice.any():
        j = int(np.flatnonzero(twice)[0]) + 1
        side = "bid" if bids[j] else "ask"
        raise TapeError(f"{source}: {label} {int(numbers[order[j]])}: a second {side} level at "
                        f"{float(price[order[j]])} in one snapshot")  # fmt: skip
    new = np.ones(n, dtype=bool)
    new[1:] = (who[1:] != who[:-1]) | (ts_o[1:] != ts_o[:-1])
    snap = np.cumsum(new) - 1
    heads = order[new]
    n_snap = int(heads.size)
    bid_n = np.bincount(snap[bids], minlength=n_snap).astype(np.int64)
    ask_n = np.bincount(snap[~bids], minlength=n_snap).astype(np.int64)
    px, sz = price[order], size[order]
    return SnapshotRows(
        source,
        [market[i] for i in heads.tolist()],
        [outcome[i] for i in heads.tolist()],
        [token[i] for i in heads.tolist()],
        ts[heads], tick[heads],
        bid_n, px[bids], sz[bids], ask_n, px[~bids], sz[~bids],
        label=label, lines=numbers[heads],
    )  # fmt: skip


# -- the two forms ----------------------------------------------------------------------------


def import_columns(
    path: str | Path,
    *,
    ts_unit: str = "ms",
    depth: str | None = None,
    candidates: Sequence[float] = TICKS,
    attribution: str = "",
    max_bytes: int | None = None,
) -> BooksImport:
    """The generic form (``FORMAT.md``): a CSV (``.csv``, ``.csv.gz``) or Parquet file, one row
    per snapshot or one per level. ``depth`` defaults to ``l1`` where the price columns hold
    plain numbers (quotes), else ``l2``; ``ts_unit`` is the unit of integer ``ts`` values."""
    path = Path(path)
    budget = Budget(str(path), max_bytes)
    if path.name.endswith(".parquet"):
        rows, layout = _rows_from_parquet(path, budget, ts_unit)
    elif path.name.endswith((".csv", ".csv.gz")):
        rows, layout = _rows_from_csv(path, budget, ts_unit)
    else:
        raise TapeError(f"{path}: not a .csv, .csv.gz or .parquet file")
    chosen = depth or ("l1" if layout == "quotes" else "l2")
    return assemble(rows, depth=chosen, candidates=candidates, attribution=attribution)


def import_resolvedkit(
    path: str | Path,
    markets: str | Path | None = None,
    *,
    max_bytes: int | None = None,
) -> BooksImport:
    """resolvedkit's two-file layout: ``path`` is its folder (``books.parquet`` and
    ``markets.parquet``) or its ``books.parquet``, with ``markets`` beside it unless given.
    Returns the books and a tape of the same markets (``books_tape``)."""
    path = Path(path)
    books_path = path / "books.parquet" if path.is_dir() else path
    markets_path = Path(markets) if markets else books_path.with_name("markets.parquet")
    budget = Budget(str(books_path), max_bytes)
    facts = _market_facts(markets_path, Budget(str(markets_path), max_bytes))
    outcome_of = {(m, s): label for m, f in facts.items() for s, label in f["sides"].items()}
    rows, layout = _rows_from_parquet(books_path, budget, "ms", outcome_of)
    if layout != "lists":
        raise TapeError(f"{books_path}: a resolvedkit books.parquet has a row per snapshot")
    result = assemble(rows, attribution=RESOLVEDKIT_ATTRIBUTION)
    result.tape, notes = books_tape(result.books, facts, source=str(books_path))
    result.notes.extend(notes)
    return result


def _market_facts(path: Path, budget: Budget) -> dict[str, dict[str, Any]]:
    """markets.parquet by market id: question, slug, category, window (ms), payouts, sides."""
    source = str(path)
    table = read_parquet(path, None, budget)
    needed = {"market_id", "question", "start_ts", "end_ts", "outcome_up", "outcome_down",
              "payout_up", "payout_down"}  # fmt: skip
    missing = needed - set(table.column_names)
    if missing:
        raise TapeError(f"{source}: no column {sorted(missing)[0]!r}")
    facts: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(table.to_pylist(), start=1):
        mid = row["market_id"]
        if not isinstance(mid, str) or not mid:
            raise TapeError(f"{source}: row {i}: no market_id")
        if mid in facts:
            raise TapeError(f"{source}: row {i}: market {mid} is listed twice")
        for name in ("start_ts", "end_ts"):
            if not isinstance(row[name], int) or isinstance(row[name], bool):
                raise TapeError(f"{source}: row {i}: {name} is not a whole number of ms")
        up, down = row["outcome_up"], row["outcome_down"]
        if not (isinstance(up, str) and isinstance(down, str) and up and down and up != down):
            raise TapeError(f"{source}: row {i}: outcome_up and outcome_down must be two labels")
        facts[mid] = {**row, "sides": {"UP": up, "DOWN": down}}
    return facts


def _winner(row: dict[str, Any]) -> tuple[bool, str | None]:
    """``(decided, winner)`` from the payouts: 1/0 a winner, 0.5/0.5 void, else undecided."""
    up, down = row["payout_up"], row["payout_down"]
    if (up, down) == (1.0, 0.0):
        return True, row["outcome_up"]
    if (up, down) == (0.0, 1.0):
        return True, row["outcome_down"]
    if (up, down) == (0.5, 0.5):
        return True, None
    return False, None


def books_tape(
    books: Books, facts: dict[str, dict[str, Any]], *, source: str
) -> tuple[Tape, list[str]]:
    """A price tape of the books' markets: each outcome's price is its book's mid, at each whole
    second at which a snapshot of the market has arrived (a snapshot at 12.3 s is first seen at
    13 s, never before it was taken), carried forward over snapshots with an empty side (no
    mid); a market's points start where both outcomes have one. Resolved at its window's end
    (``end_ts``: the rules fix the outcome then; the data has no settlement instant), from the
    payouts; ``covered_until`` its last point."""
    markets: list[MarketInfo] = []
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    resolutions: list[Resolution] = []
    notes: list[str] = []
    wide = 0
    ordered = sorted(books.markets, key=lambda m: (facts[m]["start_ts"], m))
    for market in ordered:
        fact = facts[market]
        labels = (fact["outcome_up"], fact["outcome_down"])
        ks = [books.token(market, label) for label in labels]
        stamps, mids = [], []
        for k in ks:
            rows = books.rows(k)
            bid, _, ask, _ = books.quotes(np.arange(rows.start, rows.stop))
            has = ~np.isnan(bid) & ~np.isnan(ask)
            wide += int(np.count_nonzero(has & (ask - bid > 0.10 + 1e-9)))
            stamps.append(-(-books.columns.ts[rows][has] // 1000))  # ms -> s, rounded up
            mids.append((bid[has] + ask[has]) / 2)
        instants = np.unique(np.concatenate(stamps))
        columns = []
        for at, mid in zip(stamps, mids, strict=True):
            i = np.searchsorted(at, instants, side="right") - 1  # the last mid of each second
            columns.append(np.where(i >= 0, mid[np.maximum(i, 0)], np.nan))
        prices = np.column_stack(columns)
        keep = ~np.isnan(prices).any(axis=1)
        times, prices = instants[keep], prices[keep]
        end = fact["end_ts"] // 1000
        slug = fact.get("slug") or market
        markets.append(MarketInfo(
            id=market, question=fact["question"], outcomes=labels,
            description=f"{slug}: prices are the outcome books' mids, a point per second "
                        f"(arena tapes import books). {RESOLVEDKIT_ATTRIBUTION}",
            category=fact.get("category"),
            tags=tuple(str(fact[k]) for k in ("category", "timeframe") if fact.get(k)),
            open_ts=int(times[0]) if times.size else None, close_ts=end, end_ts=end,
            covered_until=int(times[-1]) if times.size else None,
        ))  # fmt: skip
        series[market] = (times, prices)
        decided, winner = _winner(fact)
        if decided:
            resolutions.append(Resolution(market=market, ts=end, winner=winner))
        else:
            notes.append(f"market {market}: payouts {fact['payout_up']}/{fact['payout_down']} "
                         "name no winner: left unresolved")  # fmt: skip
    if wide:
        notes.append(f"{wide} two-sided snapshots spread over 10¢, where Polymarket shows "
                     "the last trade, not the mid (the data has no trades): mids used")  # fmt: skip
    return Tape.from_series(markets, series, resolutions, source=source), notes
