"""``arena tapes``: import, list, show and validate price tapes.

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
from replays.errors import TapeError
from replays.importers import import_election2024, import_polymarket
from replays.importers.election2024 import DEFAULT_DIR
from replays.importers.polymarket import ImportResult
from replays.samples import tape_file
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape, tape_kind

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
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def show(path: str, market_id: str | None, limit: int, as_json: bool) -> None:
    """Markets of one tape (`sample` = the embedded election tape).

    \b
    Examples:
      arena tapes show sample
      arena tapes show sample --market 255060 --json
    """
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
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
def validate(paths: tuple[str, ...], as_json: bool) -> None:
    """Check tapes fully (including the recorded content hash); non-zero exit if any fails.

    \b
    Example:
      arena tapes validate election.tape btc.tape.jsonl.gz
    """
    results: list[dict[str, Any]] = []
    for path in paths:
        try:
            tape = load_tape(tape_file(path), verify_hash=True)
            results.append({"path": path, "ok": True, "hash": tape.hash, "error": None})
        except TapeError as exc:
            results.append({"path": path, "ok": False, "hash": None, "error": str(exc)})
    if as_json:
        _emit_json(results)
    else:
        for r in results:
            if r["ok"]:
                console.print(f"[green]OK[/green]   {r['path']}  {r['hash'][:12]}")
            else:
                console.print(f"[red]FAIL[/red] {r['error']}", soft_wrap=True)
    if not all(r["ok"] for r in results):
        raise SystemExit(1)
