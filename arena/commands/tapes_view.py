"""How ``arena tapes`` shows what it reads: sparklines, compact amounts, JSON on stdout, and the
order books (a summary, spread and depth over time per token, the coverage ledger)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
import numpy as np
from rich import box
from rich.markup import escape
from rich.table import Table

from arena.console import make_console
from replays.bookfile import load_books
from replays.books import Books
from replays.errors import TapeError
from replays.samples import books_file
from replays.untrusted import printable
from replays.validate_books import MarketLedger, ledger

SPARKS = "▁▂▃▄▅▆▇█"

console = make_console()


_JSON_ESCAPED = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0))}
"""What ``json.dumps`` leaves raw that a terminal may obey (DEL, and C1 codes such as the
one-character CSI); only a JSON string can hold them, where ``\\u`` is the same text."""


def emit_json(data: Any) -> None:
    """Machine output: raw JSON, never wrapped or highlighted, with no control character a
    terminal would obey (``json.dumps`` escapes those below 0x20 itself)."""
    console.out(json.dumps(data, ensure_ascii=False).translate(_JSON_ESCAPED), highlight=False)


def cell(text: str) -> str:
    """A tape's or book file's text as a table cell: control characters written out, Rich's
    markup escaped (a market id ``[link=...]`` is text)."""
    return escape(printable(text))


def minute_text(ts: int | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def sparkline(values: np.ndarray, width: int = 16) -> str:
    """Prices in [0, 1] as block characters, the last value of each of ``width`` buckets."""
    if values.size == 0:
        return ""
    picks = values[np.linspace(0, values.size - 1, min(width, values.size)).round().astype(int)]
    levels = np.clip((picks * len(SPARKS)).astype(int), 0, len(SPARKS) - 1)
    return "".join(SPARKS[i] for i in levels)


def compact(amount: float) -> str:
    """$13.0M rather than 12,960,412 so the volume column stays narrow."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if amount >= size:
            return f"{amount / size:.1f}{unit}"
    return f"{amount:.0f}"


# -- order books ------------------------------------------------------------------------------


def _iso_ms(ts: int | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def books_summary(books: Books) -> dict[str, Any]:
    """The facts every listing shows about a whole book file."""
    span = books.span()
    return {
        "markets": len(books.markets),
        "tokens": len(books.tokens),
        "l1_tokens": sum(t.depth == "l1" for t in books.tokens),
        "snapshots": books.n_snapshots,
        "levels": books.n_levels,
        "first": _iso_ms(span[0] if span else None),
        "last": _iso_ms(span[1] if span else None),
        "ticks": books.ticks,
        "attribution": books.attribution,
        "hash": books.hash,
    }


def _median(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else None


def _scaled_sparkline(values: list[float | None]) -> str:
    """A sparkline of non-negative values scaled to their largest (a gap for a bucket with none)."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0) or 1.0
    return "".join(" " if v is None else sparkline(np.array([v / top]), width=1) for v in values)


def book_row(books: Books, k: int, buckets: int) -> dict[str, Any]:
    """One token's line in ``show``: its span, and its spread and depth over time, as medians
    over ``buckets`` equal slices of its span (spread over two-sided snapshots only)."""
    token = books.tokens[k]
    rows = books.rows(k)
    index = np.arange(rows.start, rows.stop)
    ts = books.times(k)
    bid, _, ask, _ = books.quotes(index)
    spread = ask - bid
    bid_depth, ask_depth = books.depths(index)
    series: list[dict[str, Any]] = []
    if ts.size:
        edges = np.linspace(int(ts[0]), int(ts[-1]) + 1, buckets + 1)
        cuts = np.searchsorted(ts, edges)
        for b in range(buckets):
            part = slice(int(cuts[b]), int(cuts[b + 1]))
            series.append({
                "from": _iso_ms(int(edges[b])),
                "snapshots": part.stop - part.start,
                "spread": _median(spread[part]),
                "bid_depth": _median(bid_depth[part]),
                "ask_depth": _median(ask_depth[part]),
            })  # fmt: skip
    depth = [None if p["bid_depth"] is None else p["bid_depth"] + p["ask_depth"] for p in series]
    return {
        "market": token.market,
        "outcome": token.outcome,
        "token": token.token,
        "depth": token.depth,
        "snapshots": int(ts.size),
        "first": _iso_ms(int(ts[0]) if ts.size else None),
        "last": _iso_ms(int(ts[-1]) if ts.size else None),
        "spread": _median(spread),
        "bid_depth": _median(bid_depth),
        "ask_depth": _median(ask_depth),
        "spread_trend": _scaled_sparkline([p["spread"] for p in series]),
        "depth_trend": _scaled_sparkline(depth),
        "series": series,
    }


def _short(market: str) -> str:
    return market if len(market) <= 12 else f"{market[:6]}…{market[-4:]}"


def show_books(
    path: str, books: Books, market_id: str | None, limit: int, buckets: int, as_json: bool
) -> None:
    if market_id is not None:
        if market_id not in books.markets:
            raise click.ClickException(f"{path}: no market {market_id!r} in this book file")
        markets = [market_id]
    else:
        spans = {m: books.span(ks[0]) or (0, 0) for m, ks in books.markets.items()}
        markets = sorted(books.markets, key=lambda m: (spans[m][0], m))[:limit]
    rows = [book_row(books, k, buckets) for m in markets for k in books.markets[m]]
    summary = books_summary(books)
    if as_json:
        emit_json({"path": path, **summary, "token_rows": rows})
        return
    console.print(
        f"[bold]{cell(path)}[/bold]: {summary['markets']} markets, {summary['tokens']} tokens, "
        f"{summary['snapshots']:,} snapshots, {summary['levels']:,} levels, "
        f"{summary['first']} → {summary['last']}, ticks {summary['ticks']}, "
        f"hash {summary['hash'][:12]}",
        soft_wrap=True,
    )
    if summary["attribution"]:
        console.print(f"[dim]{cell(summary['attribution'])}[/dim]", soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    names = ("market", "outcome", "snaps", "span UTC", "spread¢", "trend", "depth$", "trend")
    for name in names:
        right = name in ("snaps", "spread¢", "depth$")
        table.add_column(name, justify="right" if right else "left", no_wrap=True)
    for r in rows:
        depth = None if r["bid_depth"] is None else r["bid_depth"] + r["ask_depth"]
        span = f"{r['first'][5:16]}–{r['last'][11:16]}" if r["first"] else "—"
        table.add_row(
            cell(_short(r["market"])), cell(r["outcome"]), f"{r['snapshots']:,}", span,
            "—" if r["spread"] is None else f"{100 * r['spread']:.2f}", r["spread_trend"],
            "—" if depth is None else compact(depth), r["depth_trend"],
        )  # fmt: skip
    console.print(table)
    notes = [
        f"medians over {buckets} equal slices of each token's span; spread over two-sided "
        "books, depth = dollars on both sides"
    ]
    if market_id is None:  # the file's order: a book file knows no volume
        notes.insert(0, limit_note(len(markets), summary["markets"], "by first snapshot"))
    console.print(f"[dim]{'; '.join(notes)}[/dim]")


def limit_note(shown: int, total: int, order: str) -> str:
    """What a ``--limit`` left out, in the words every ``tapes show`` listing uses, so a cut
    list never passes for the whole file."""
    if shown < total:
        return f"{shown:,} of {total:,} markets, {order} (--limit N for more)"
    return f"all {total:,} markets, {order}"


def ledger_table(entries: list[MarketLedger], gap_seconds: float) -> Table:
    """The coverage ledger, a market a line; pairs: snapshots of its two tokens at one instant,
    unmirrored: those where one book is not the other's mirror."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    names = ("market", "snaps", f"gaps>{gap_seconds:g}s", "crossed", "locked", "1-sided",
             "empty", "tick Δ", "pairs", "unmirrored")  # fmt: skip
    for name in names:
        table.add_column(name, justify="left" if name == "market" else "right", no_wrap=True)
    for e in entries:
        counts = [e.total(n) for n in ("snapshots", "gaps", "crossed", "locked", "one_sided",
                                       "empty", "tick_changes")]  # fmt: skip
        table.add_row(
            cell(_short(e.market)), *(f"{c:,}" for c in counts), f"{e.mirror_pairs:,}",
            f"{e.mirror_mismatches:,}",
        )  # fmt: skip
    return table


def validate_books(path: str, gap_seconds: float) -> dict[str, Any]:
    try:
        books = load_books(books_file(path), verify=True)
        entries = ledger(books, gap_seconds)
    except TapeError as exc:
        return {"path": path, "kind": "books", "ok": False, "hash": None, "error": str(exc)}
    return {
        "path": path, "kind": "books", "ok": True, "hash": books.hash, "error": None,
        "summary": books_summary(books), "gap_seconds": gap_seconds,
        "ledger": [e.as_dict() for e in entries], "_entries": entries,
    }  # fmt: skip


# -- the group --------------------------------------------------------------------------------
