"""``arena tapes``: import, list, show and validate price tapes, and the order books beside them
(``.books`` files: ``show`` gives spread and depth over time, ``validate`` the coverage ledger).

Every failure is a ``TapeError`` from ``replays``, which the CLI's edge (``arena.cli``) prints
as one line, so a bad file never shows a traceback; ``validate`` reports each file's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich import box
from rich.table import Table

from arena.commands.tapes_record import record
from arena.console import make_console
from replays.bookfile import SUFFIX as BOOKS_SUFFIX
from replays.bookfile import is_books_file, load_books, save_books
from replays.books import Books
from replays.errors import TapeError
from replays.importers import import_election2024, import_polymarket
from replays.importers.books import TS_UNITS, BooksImport, import_columns, import_resolvedkit
from replays.importers.election2024 import DEFAULT_DIR
from replays.importers.polymarket import ImportResult
from replays.samples import SAMPLE_BOOKS, books_file, tape_file
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape, tape_kind
from replays.validate_books import MarketLedger, ledger

SPARKS = "▁▂▃▄▅▆▇█"
TAPE_SUFFIXES = (".tape", ".tape.jsonl", ".tape.jsonl.gz")

console = make_console()


def _emit_json(data: Any) -> None:
    """Machine output: raw JSON, never wrapped or highlighted."""
    console.out(json.dumps(data, ensure_ascii=False), highlight=False)


def _iso(ts: int | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def sparkline(values: np.ndarray, width: int = 16) -> str:
    """Prices in [0, 1] as block characters, the last value of each of ``width`` buckets."""
    if values.size == 0:
        return ""
    picks = values[np.linspace(0, values.size - 1, min(width, values.size)).round().astype(int)]
    levels = np.clip((picks * len(SPARKS)).astype(int), 0, len(SPARKS) - 1)
    return "".join(SPARKS[i] for i in levels)


def _compact(amount: float) -> str:
    """$13.0M rather than 12,960,412 so the volume column stays narrow."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if amount >= size:
            return f"{amount / size:.1f}{unit}"
    return f"{amount:.0f}"


def _load(path: str, verify_hash: bool = False) -> Tape:
    return load_tape(tape_file(path), verify_hash=verify_hash)


def tape_summary(tape: Tape) -> dict[str, Any]:
    """The facts every listing shows about a whole tape."""
    first, last = tape.span()
    voided = sum(r.winner is None for r in tape.resolutions.values())
    return {
        "markets": len(tape.markets),
        "points": tape.n_points,
        "first": _iso(first),
        "last": _iso(last),
        "resolved": len(tape.resolutions) - voided,
        "voided": voided,
        "unresolved": len(tape.markets) - len(tape.resolutions),
        "hash": tape.hash,
    }


def market_row(tape: Tape, m: int) -> dict[str, Any]:
    """One market's line in ``show``: metadata, first and last price, winner, sparkline."""
    market = tape.markets[m]
    column = tape.yes(m)
    res = tape.resolutions.get(market.id)
    return {
        "id": market.id,
        "question": market.question,
        "category": market.category,
        "volume": market.volume,
        "outcomes": list(market.outcomes),
        "points": int(column.size),
        "first_price": float(column[0]) if column.size else None,
        "last_price": float(column[-1]) if column.size else None,
        "price_of": "Yes" if market.is_binary else market.outcomes[0],
        "open": _iso(market.open_ts),
        "close": _iso(market.close_ts),
        "scheduled_end": _iso(market.end_ts),
        "covered_until": _iso(tape.coverage(m)),
        "coverage_recorded": market.covered_until is not None,
        "resolution": None if res is None else ("VOID" if res.winner is None else res.winner),
        "resolved_at": None if res is None else _iso(res.ts),
        "sparkline": sparkline(column),
    }


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


def _show_books(
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
        _emit_json({"path": path, **summary, "token_rows": rows})
        return
    console.print(
        f"[bold]{path}[/bold]: {summary['markets']} markets, {summary['tokens']} tokens, "
        f"{summary['snapshots']:,} snapshots, {summary['levels']:,} levels, "
        f"{summary['first']} → {summary['last']}, ticks {summary['ticks']}, "
        f"hash {summary['hash'][:12]}",
        soft_wrap=True,
    )
    if summary["attribution"]:
        console.print(f"[dim]{summary['attribution']}[/dim]", soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    names = ("market", "outcome", "snaps", "span UTC", "spread¢", "trend", "depth$", "trend")
    for name in names:
        right = name in ("snaps", "spread¢", "depth$")
        table.add_column(name, justify="right" if right else "left", no_wrap=True)
    for r in rows:
        depth = None if r["bid_depth"] is None else r["bid_depth"] + r["ask_depth"]
        span = f"{r['first'][5:16]}–{r['last'][11:16]}" if r["first"] else "—"
        table.add_row(
            _short(r["market"]), r["outcome"], f"{r['snapshots']:,}", span,
            "—" if r["spread"] is None else f"{100 * r['spread']:.2f}", r["spread_trend"],
            "—" if depth is None else _compact(depth), r["depth_trend"],
        )  # fmt: skip
    console.print(table)
    console.print(
        f"[dim]medians over {buckets} equal slices of each token's span; spread over "
        "two-sided books, depth = dollars on both sides[/dim]"
    )


def _ledger_table(entries: list[MarketLedger], gap_seconds: float) -> Table:
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
            _short(e.market), *(f"{c:,}" for c in counts), f"{e.mirror_pairs:,}",
            f"{e.mirror_mismatches:,}",
        )  # fmt: skip
    return table


def _validate_books(path: str, gap_seconds: float) -> dict[str, Any]:
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


@click.group()
def tapes() -> None:
    """Import, inspect and validate price tapes.

    \b
    Examples:
      arena tapes import election2024 --out election.tape
      arena tapes list sample
      arena tapes show election.tape --market 255060
      arena tapes validate election.tape other.tape.jsonl.gz
    """


tapes.add_command(record)


@tapes.group("import")
def import_() -> None:
    """Build a tape from Polymarket data.

    \b
    Example:
      arena tapes import polymarket --markets markets.json --prices prices.jsonl.gz --out btc.tape
    """


def _finish_import(run: Any, out: str, as_json: bool) -> None:
    tape_kind(Path(out))
    result: ImportResult = run()
    save_tape(result.tape, out)
    summary = {
        "out": out,
        **tape_summary(result.tape),
        "skipped_no_prices": len(result.skipped_no_prices),
        "undecided": result.undecided,
        "notes": result.notes,
    }
    if as_json:
        _emit_json(summary)
        return
    table = Table(title=f"imported → {out}", show_header=False)
    for key in ("markets", "points", "first", "last", "resolved", "voided", "unresolved", "hash"):
        table.add_row(key, str(summary[key]))
    table.add_row("skipped (no prices)", str(summary["skipped_no_prices"]))
    table.add_row("closed, no decisive price", str(len(result.undecided)))
    console.print(table)
    for note in result.notes:
        console.print(f"[dim]note: {note}[/dim]", soft_wrap=True)


@import_.command("polymarket")
@click.option(
    "--markets", "markets_path", required=True, help="JSON array of Gamma market objects."
)
@click.option("--prices", "prices_path", required=True, help="JSON lines of {token_id, history}.")
@click.option("--out", required=True, help="Tape to write (.tape, .tape.jsonl.gz, .tape.jsonl).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def import_polymarket_cmd(markets_path: str, prices_path: str, out: str, as_json: bool) -> None:
    """Gamma market objects + CLOB price histories → a tape.

    \b
    Example:
      arena tapes import polymarket --markets markets.json \\
          --prices prices_history.jsonl.gz --out btc.tape
    """
    _finish_import(lambda: import_polymarket(markets_path, prices_path), out, as_json)


@import_.command("election2024")
@click.option("--dir", "directory", default=str(DEFAULT_DIR), show_default=True,
              help="The election2024 data directory.")  # fmt: skip
@click.option("--out", required=True, help="Tape to write (.tape, .tape.jsonl.gz, .tape.jsonl).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def import_election2024_cmd(directory: str, out: str, as_json: bool) -> None:
    """The 2024 US election set (101 binary markets) → a tape.

    \b
    Example:
      arena tapes import election2024 --out election.tape
    """
    _finish_import(lambda: import_election2024(directory), out, as_json)


@import_.command("books")
@click.argument("source")
@click.option("--format", "form", type=click.Choice(["resolvedkit", "columns"]),
              default="resolvedkit", show_default=True,
              help="resolvedkit: its books.parquet + markets.parquet (a folder or the books "
                   "file); columns: one CSV or Parquet file (replays/FORMAT.md).")  # fmt: skip
@click.option("--out", required=True, help="Book file to write (.books).")
@click.option("--tape", "tape_out", default=None,
              help="resolvedkit: also write the markets' price tape (book mids) here.")  # fmt: skip
@click.option("--markets", "markets_path", default=None,
              help="resolvedkit: the markets.parquet (default: beside the books).")  # fmt: skip
@click.option("--ts-unit", type=click.Choice(list(TS_UNITS)), default="ms", show_default=True,
              help="columns: the unit of whole-number ts values.")  # fmt: skip
@click.option("--depth", type=click.Choice(["l2", "l1"]), default=None,
              help="columns: l1 for quotes (touch only); default l1 when the price columns "
                   "hold plain numbers, else l2.")  # fmt: skip
@click.option("--compress", is_flag=True,
              help="Deflate the columns: smaller, but read into memory, not mapped.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def import_books_cmd(
    source: str, form: str, out: str, tape_out: str | None, markets_path: str | None,
    ts_unit: str, depth: str | None, compress: bool, as_json: bool,
) -> None:  # fmt: skip
    """Order-book snapshots → a content-hashed book file (.books).

    \b
    Examples:
      arena tapes import books ../shared/data/polymarket/books_btc15m \\
          --out btc.books --tape btc.tape
      arena tapes import books --format columns quotes.csv --out quotes.books
    """
    if not out.endswith(BOOKS_SUFFIX):
        raise click.ClickException(f"{out}: a book file's name ends in {BOOKS_SUFFIX}")
    if form == "columns" and (tape_out or markets_path):
        raise click.ClickException("--tape and --markets are for --format resolvedkit")
    if tape_out:
        tape_kind(Path(tape_out))
    result: BooksImport
    if form == "resolvedkit":
        result = import_resolvedkit(source, markets_path)
    else:
        result = import_columns(source, ts_unit=ts_unit, depth=depth)
    save_books(result.books, out, compress=compress)
    if tape_out and result.tape is not None:
        save_tape(result.tape, tape_out)
    summary: dict[str, Any] = {
        "out": out, **books_summary(result.books), "rows": result.rows,
        "collapsed": result.collapsed, "replaced": result.replaced, "notes": result.notes,
    }  # fmt: skip
    if tape_out and result.tape is not None:
        summary["tape"] = {"out": tape_out, **tape_summary(result.tape)}
    if as_json:
        _emit_json(summary)
        return
    table = Table(title=f"imported → {out}", show_header=False)
    for key in ("markets", "tokens", "snapshots", "levels", "first", "last", "ticks", "hash"):
        table.add_row(
            key, f"{summary[key]:,}" if isinstance(summary[key], int) else str(summary[key])
        )
    table.add_row("input rows", f"{result.rows:,}")
    table.add_row("repeats collapsed / replaced", f"{result.collapsed} / {result.replaced}")
    if "tape" in summary:
        table.add_row("tape", f"{tape_out} ({summary['tape']['points']:,} points, "
                              f"hash {summary['tape']['hash'][:12]})")  # fmt: skip
    console.print(table)
    if result.books.attribution:
        console.print(f"[dim]{result.books.attribution}[/dim]", soft_wrap=True)
    for note in result.notes:
        console.print(f"[dim]note: {note}[/dim]", soft_wrap=True)


def _tape_files(paths: tuple[str, ...]) -> Iterator[Path]:
    for raw in paths or ("sample",):
        path = tape_file(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.name.endswith(TAPE_SUFFIXES))
            if not found:  # an empty table, exit 0, looked like a folder of nothing wrong
                raise click.ClickException(f"{path}: no tape in it ({', '.join(TAPE_SUFFIXES)})")
            yield from found
        else:
            yield path


@tapes.command("list")
@click.argument("paths", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def list_(paths: tuple[str, ...], as_json: bool) -> None:
    """Summarise tape files (files or directories; default: the embedded sample).

    \b
    Example:
      arena tapes list ./tapes sample
    """
    rows = [{"path": str(p), **tape_summary(_load(str(p)))} for p in _tape_files(paths)]
    if as_json:
        _emit_json(rows)
        return
    table = Table(title="tapes")
    columns = ("path", "markets", "points", "first", "last", "resolved", "voided", "unresolved")
    for name in (*columns, "hash"):
        right = name in columns[1:3]
        table.add_column(name, justify="right" if right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns), row["hash"][:12])
    console.print(table)


@tapes.command("show")
@click.argument("path")
@click.option("--market", "market_id", default=None, help="Show one market in full.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Markets to list, by volume.",
)
@click.option("--books", "as_books", is_flag=True,
              help="Show the order books of PATH (`sample-books`: the embedded ones); a .books "
                   "file is shown as books without it.")  # fmt: skip
@click.option("--buckets", type=click.IntRange(1, 200), default=12, show_default=True,
              help="Books: time slices of each token's span the spread and depth are shown "
                   "over.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def show(
    path: str, market_id: str | None, limit: int, as_books: bool, buckets: int, as_json: bool
) -> None:
    """Markets of one tape (`sample` = the embedded election tape, `sample-books` the BTC
    15-minute one), or of a book file: spread and depth over time per market.

    \b
    Examples:
      arena tapes show sample
      arena tapes show sample --market 255060 --json
      arena tapes show sample-books --books
      arena tapes show btc.books --buckets 30 --json
    """
    if as_books or (path not in (SAMPLE_BOOKS, "sample") and is_books_file(path)):
        books = load_books(books_file(path))
        _show_books(path, books, market_id, limit, buckets, as_json)
        return
    tape = _load(path)
    if market_id is not None:
        if market_id not in tape.index:
            raise click.ClickException(f"{path}: no market {market_id!r} in this tape")
        picked = [tape.index[market_id]]
    else:
        picked = sorted(range(len(tape.markets)), key=lambda m: -tape.markets[m].volume)[:limit]
    rows = [market_row(tape, m) for m in picked]
    summary = tape_summary(tape)
    if as_json:
        _emit_json({"path": path, **summary, "market_rows": rows})
        return
    console.print(
        f"[bold]{path}[/bold]: {summary['markets']} markets, {summary['points']} points, "
        f"{summary['first']} → {summary['last']}, resolved {summary['resolved']}, "
        f"voided {summary['voided']}, unresolved {summary['unresolved']}, "
        f"hash {summary['hash'][:12]}"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("id", "question", "volume", "outcomes", "first", "last", "winner", "trend"):
        table.add_column(
            name,
            justify="right" if name in ("volume", "first", "last") else "left",
            no_wrap=name != "question",
            max_width=48 if name == "question" else None,
            min_width=20 if name == "question" else len(name),
        )
    for r in rows:
        table.add_row(
            r["id"], r["question"], _compact(r["volume"]), "/".join(r["outcomes"]),
            f"{r['first_price']:.3f}", f"{r['last_price']:.3f}", r["resolution"] or "—",
            r["sparkline"],
        )  # fmt: skip
    console.print(table)


@tapes.command("validate")
@click.argument("paths", nargs=-1, required=True)
@click.option("--gap", "gap_seconds", type=click.FloatRange(min=0, min_open=True), default=10.0,
              show_default=True,
              help="Books: a pause between snapshots longer than this (s) is a gap.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
def validate(paths: tuple[str, ...], gap_seconds: float, as_json: bool) -> None:
    """Check tapes and book files fully (including the recorded content hash); non-zero exit if
    any fails. A book file's coverage ledger follows its line: per market its snapshots, gaps,
    crossed, locked, one-sided and empty books, tick changes and YES/NO mirror (`sample-books`
    checks the sample's tape and books).

    \b
    Examples:
      arena tapes validate election.tape btc.tape.jsonl.gz
      arena tapes validate btc.books --gap 5 --json
    """
    results: list[dict[str, Any]] = []
    for path in paths:
        if path == SAMPLE_BOOKS or (path != "sample" and is_books_file(path)):
            if path == SAMPLE_BOOKS:
                results.append(_validate_tape(path))
            results.append(_validate_books(path, gap_seconds))
            continue
        results.append(_validate_tape(path))
    if as_json:
        _emit_json([{k: v for k, v in r.items() if not k.startswith("_")} for r in results])
    else:
        for r in results:
            if not r["ok"]:
                console.print(f"[red]FAIL[/red] {r['error']}", soft_wrap=True)
                continue
            console.print(f"[green]OK[/green]   {r['path']}  {r['hash'][:12]}")
            if r.get("kind") == "books":
                console.print(_ledger_table(r["_entries"], gap_seconds))
    if not all(r["ok"] for r in results):
        raise SystemExit(1)


def _validate_tape(path: str) -> dict[str, Any]:
    try:
        tape = load_tape(tape_file(path), verify_hash=True)
    except TapeError as exc:
        return {"path": path, "ok": False, "hash": None, "error": str(exc)}
    return {"path": path, "ok": True, "hash": tape.hash, "error": None}
