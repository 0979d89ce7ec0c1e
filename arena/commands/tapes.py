"""``arena tapes``: import, list, show and validate price tapes, and the order books beside them
(``.books`` files: ``show`` gives spread and depth over time, ``validate`` the coverage ledger).

Every failure is a ``TapeError`` from ``replays``, which the CLI's edge (``arena.cli``) prints
as one line, so a bad file never shows a traceback; ``validate`` reports each file's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.padding import Padding
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from arena.commands.tapes_columns import columns as price_columns
from arena.commands.tapes_record import record
from arena.commands.tapes_view import (
    books_summary,
    cell,
    compact,
    console,
    emit_json,
    ledger_table,
    limit_note,
    minute_text,
    show_books,
    sparkline,
    validate_books,
)
from arena.console import make_console
from arena.progress import on_a_terminal
from arena.reports.terminal import short_names
from replays.bookfile import SUFFIX as BOOKS_SUFFIX
from replays.bookfile import is_books_file, load_books, save_books
from replays.errors import TapeError
from replays.importers import import_election2024, import_polymarket
from replays.importers.books import TS_UNITS, BooksImport, import_columns, import_resolvedkit
from replays.importers.election2024 import DEFAULT_DIR
from replays.importers.polymarket import ImportResult
from replays.samples import SAMPLE_BOOKS, books_file, tape_file
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape, tape_kind
from replays.untrusted import printable

TAPE_SUFFIXES = (".tape", ".tape.jsonl", ".tape.jsonl.gz")


def _load(path: str, verify_hash: bool = False) -> Tape:
    return load_tape(tape_file(path), verify_hash=verify_hash)


def tape_summary(tape: Tape) -> dict[str, Any]:
    """The facts every listing shows about a whole tape."""
    first, last = tape.span()
    voided = sum(r.winner is None for r in tape.resolutions.values())
    return {
        "markets": len(tape.markets),
        "points": tape.n_points,
        "first": minute_text(first),
        "last": minute_text(last),
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
        "open": minute_text(market.open_ts),
        "close": minute_text(market.close_ts),
        "scheduled_end": minute_text(market.end_ts),
        "covered_until": minute_text(tape.coverage(m)),
        "coverage_recorded": market.covered_until is not None,
        "resolution": None if res is None else ("VOID" if res.winner is None else res.winner),
        "resolved_at": None if res is None else minute_text(res.ts),
        "sparkline": sparkline(column),
    }


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


@contextmanager
def working(as_json: bool) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr saying what an import is doing (reading what, writing where), on a
    terminal only: a large archive imported for minutes with nothing shown. Under ``--json``
    or piped, nothing (``arena.progress.on_a_terminal``)."""
    if not on_a_terminal(as_json=as_json):
        yield lambda _: None
        return
    spinner = Spinner("dots")
    with Live(spinner, console=make_console(stderr=True), transient=True) as live:

        def say(doing: str) -> None:
            spinner.update(text=f"{escape(doing)} …")
            live.refresh()  # each step drawn as it starts, however quick

        yield say


def _finish_import(run: Any, source: str, out: str, as_json: bool) -> None:
    """Run an import (``run`` reads ``source``), write its tape to ``out``, print the summary."""
    tape_kind(Path(out))
    with working(as_json) as say:
        say(f"reading {source}")
        result: ImportResult = run()
        say(f"writing {out}")
        save_tape(result.tape, out)
    summary = {
        "out": out,
        **tape_summary(result.tape),
        "skipped_no_prices": len(result.skipped_no_prices),
        "undecided": result.undecided,
        "notes": result.notes,
    }
    if as_json:
        emit_json(summary)
        return
    table = Table(title=f"imported → {out}", show_header=False)
    for key in ("markets", "points", "first", "last", "resolved", "voided", "unresolved", "hash"):
        table.add_row(key, str(summary[key]))
    table.add_row("skipped (no prices)", str(summary["skipped_no_prices"]))
    table.add_row("closed, no decisive price", str(len(result.undecided)))
    console.print(table)
    for note in result.notes:
        console.print(f"[dim]note: {cell(note)}[/dim]", soft_wrap=True)


import_.add_command(price_columns)


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
    _finish_import(lambda: import_polymarket(markets_path, prices_path),
                   f"{markets_path} and {prices_path}", out, as_json)  # fmt: skip


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
    _finish_import(lambda: import_election2024(directory), directory, out, as_json)


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
    with working(as_json) as say:
        say(f"reading {source}")
        if form == "resolvedkit":
            result = import_resolvedkit(source, markets_path)
        else:
            result = import_columns(source, ts_unit=ts_unit, depth=depth)
        say(f"writing {out}")
        save_books(result.books, out, compress=compress)
        if tape_out and result.tape is not None:
            say(f"writing {tape_out}")
            save_tape(result.tape, tape_out)
    summary: dict[str, Any] = {
        "out": out, **books_summary(result.books), "rows": result.rows,
        "collapsed": result.collapsed, "replaced": result.replaced, "notes": result.notes,
    }  # fmt: skip
    if tape_out and result.tape is not None:
        summary["tape"] = {"out": tape_out, **tape_summary(result.tape)}
    if as_json:
        emit_json(summary)
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
        console.print(f"[dim]{cell(result.books.attribution)}[/dim]", soft_wrap=True)
    for note in result.notes:
        console.print(f"[dim]note: {cell(note)}[/dim]", soft_wrap=True)


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
        emit_json(rows)
        return
    table = Table(title="tapes")
    columns = ("path", "markets", "points", "first", "last", "resolved", "voided", "unresolved")
    for name in (*columns, "hash"):
        right = name in columns[1:3]
        table.add_column(name, justify="right" if right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(cell(str(row[c])) for c in columns), row["hash"][:12])
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
        show_books(path, books, market_id, limit, buckets, as_json)
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
        emit_json({"path": path, **summary, "market_rows": rows})
        return
    console = make_console()  # this terminal's width, not the one at import (tapes_view's)
    console.print(
        f"[bold]{cell(path)}[/bold]: {summary['markets']:,} markets, {summary['points']:,} points, "
        f"{summary['first']} → {summary['last']}, resolved {summary['resolved']}, "
        f"voided {summary['voided']}, unresolved {summary['unresolved']}, "
        f"hash {summary['hash'][:12]}"
    )
    # a 66-character condition id is cut in the middle (whole, it hid the question, volume,
    # prices and winner at 80 columns)
    ids = short_names([r["id"] for r in rows], ID_WIDTH)
    figures = [_figures(r, ids[r["id"]]) for r in rows]
    widths = {n: max(cell_len(t) for t in (n, *(f[n] for f in figures))) for n in FIGURES}
    # a space of padding and the box's blank divider after each column but the question, and
    # the box's blank edges
    if console.width - sum(widths.values()) - 2 * len(FIGURES) - 2 >= QUESTION_MIN:
        _show_table(console, rows, figures)
    else:
        _show_stacked(console, rows, figures, widths)
    notes = []
    if market_id is None:
        notes.append(limit_note(len(rows), summary["markets"], "by volume"))
    if any(ids[r["id"]] != r["id"] for r in rows):
        notes.append("ids cut in the middle to fit; --json has each whole")
    if notes:
        console.print(Text("; ".join(notes), style="dim"))


ID_WIDTH = 10
"""The widest a market id is shown in ``tapes show``'s table (``--json`` has each whole)."""

FIGURES = ("id", "volume", "outcomes", "first", "last", "winner", "trend")
"""``tapes show``'s columns beside the question, which never wrap (the trend is the tape's
prices as 16 blocks)."""

RIGHT = ("volume", "first", "last")
"""The figures aligned on their last digit."""

QUESTION_MIN = 40
"""The fewest cells the table gives the question; in a narrower terminal each market's figures
take a line and its question the next (at 80 columns the table left it 13 cells, five lines a
market: "Will a" / "Democrat win" / "Pennsylvania" / …, and "Septemb…" cut)."""


def _figures(row: dict[str, Any], shown_id: str) -> dict[str, str]:
    """A market's ``FIGURES`` as text, control characters written out."""
    return {
        "id": printable(shown_id),
        "volume": compact(row["volume"]),
        "outcomes": printable("/".join(row["outcomes"])),
        "first": _price(row["first_price"]),
        "last": _price(row["last_price"]),
        "winner": printable(row["resolution"] or "—"),
        "trend": row["sparkline"],
    }


def _show_table(
    console: Console, rows: list[dict[str, Any]], figures: list[dict[str, str]]
) -> None:
    """A line per market, its question in a column of its own beside the figures."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    columns = (FIGURES[0], "question", *FIGURES[1:])
    for name in columns:
        table.add_column(
            name, justify="right" if name in RIGHT else "left", no_wrap=name != "question",
            max_width=48 if name == "question" else None,
        )  # fmt: skip
    for r, f in zip(rows, figures, strict=True):
        shown = {**f, "question": printable(r["question"])}
        table.add_row(*(Text(shown[name]) for name in columns))
    console.print(table)


STACKED = tuple(name for name in FIGURES if name != "outcomes")
"""The figures on a market's line in a narrow terminal; its outcomes follow its question, where
a long list of them (a many-candidate race) has room."""


def _show_stacked(
    console: Console,
    rows: list[dict[str, Any]],
    figures: list[dict[str, str]],
    widths: dict[str, int],
) -> None:
    """Each market's figures on a line, in columns of ``widths``, and its question and outcomes
    under them across the terminal, where they are read whole."""

    def line(cells: dict[str, str]) -> Text:
        texts = [Text(cells[n]) for n in STACKED]
        for name, text in zip(STACKED, texts, strict=True):
            text.align("right" if name in RIGHT else "left", widths[name])
        return Text("  ").join(texts)

    heading = line({n: n for n in STACKED})
    heading.stylize("bold")
    heading.rstrip()
    console.print(heading)
    console.print("─" * min(heading.cell_len, console.width), style="dim")
    for r, f in zip(rows, figures, strict=True):
        console.print(line(f), overflow="ellipsis", no_wrap=True)
        question = Text(f"{printable(r['question'])} ({f['outcomes']})")
        console.print(Padding(question, (0, 0, 0, 2), expand=False))


def _price(price: float | None) -> str:
    """A price to three places, or a dash for a market with no points."""
    return "—" if price is None else f"{price:.3f}"


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
            results.append(validate_books(path, gap_seconds))
            continue
        results.append(_validate_tape(path))
    if as_json:
        emit_json([{k: v for k, v in r.items() if not k.startswith("_")} for r in results])
    else:
        for r in results:
            if not r["ok"]:
                console.print(f"[red]FAIL[/red] {cell(r['error'])}", soft_wrap=True)
                continue
            console.print(f"[green]OK[/green]   {cell(r['path'])}  {r['hash'][:12]}")
            if r.get("kind") == "books":
                console.print(ledger_table(r["_entries"], gap_seconds))
    if not all(r["ok"] for r in results):
        raise SystemExit(1)


def _validate_tape(path: str) -> dict[str, Any]:
    try:
        tape = load_tape(tape_file(path), verify_hash=True)
    except TapeError as exc:
        return {"path": path, "ok": False, "hash": None, "error": str(exc)}
    return {"path": path, "ok": True, "hash": tape.hash, "error": None}
