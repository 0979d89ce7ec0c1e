"""``arena tapes record books``: record order books from Polymarket's market WebSocket into a
resumable recording directory, then write a ``.books`` file from it.

The command wires things together (the HTTP client and its retry policy, the WebSocket URL, a
status line); what a recording is lives in ``replays.book_recorder``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import click
import httpx
from rich.live import Live
from rich.text import Text

from arena.console import make_console
from replays.book_recorder import (
    WS_URL,
    BookRecording,
    RecordBooksOptions,
    build_books,
    load_tokens,
    lookup_tokens,
    record_books,
)
from replays.bookfile import save_books
from replays.http import JsonFetcher, RetryPolicy
from replays.recorder import CLOB_URL


@click.command("books")
@click.option("--market", "markets", multiple=True, metavar="CONDITION_ID",
              help="A market to record (its condition id); repeat for several. Not needed to "
                   "resume a recording directory.")  # fmt: skip
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Book file to write (.books) when the recording stops.")  # fmt: skip
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Recording directory (default: OUT.recording); re-run to resume.")  # fmt: skip
@click.option("--duration", type=click.FloatRange(min=0.001), metavar="S",
              help="Seconds to record (default: until Ctrl-C).")  # fmt: skip
@click.option("--check-every", default=60.0, show_default=True,
              type=click.FloatRange(min=0.1), metavar="S",
              help="Seconds between REST /book checks of each token (hash, drift).")  # fmt: skip
@click.option("--ws-url", default=WS_URL, show_default=True, help="The market channel's URL.")
@click.option("--clob-url", default=CLOB_URL, show_default=True, help="CLOB API base URL.")
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(min=0.001),
              metavar="S", help="Seconds before a REST request counts as failed.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def record_books_cmd(
    markets: tuple[str, ...],
    out: Path,
    directory: Path | None,
    duration: float | None,
    check_every: float,
    ws_url: str,
    clob_url: str,
    timeout: float,
    as_json: bool,
) -> None:
    """Record order books from the CLOB market WebSocket, then write a .books file.

    Every change of every outcome token's book is appended to the recording directory's
    journal; REST /book answers are checked against their hash and repair a book the feed
    let drift. A dropped connection reconnects; re-running the command resumes the directory
    without a gap or a duplicate. Needs the `record` extra (websockets).

    \b
    Example:
      arena tapes record books --market 0x5f65…f8f1 --out btc.books --duration 3600
    """
    directory = directory or out.with_name(out.name + ".recording")
    policy = RetryPolicy(max_retries=5, jitter=random.Random().random)
    with httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=True) as client:
        fetcher = JsonFetcher(client, policy)
        tokens = load_tokens(directory) if not markets else []
        if not tokens:
            if not markets:
                raise click.UsageError("name a --market to record (or a --dir to resume)")
            tokens = lookup_tokens(fetcher, clob_url, markets)
        console = make_console(stderr=True)
        with Live(console=console, transient=True, auto_refresh=False) as live:

            def show(s: BookRecording) -> None:
                if not as_json and console.is_terminal:
                    live.update(Text(_status(s)), refresh=True)

            summary = record_books(
                directory, tokens, RecordBooksOptions(duration=duration, check_every=check_every),
                ws_url=ws_url, clob_url=clob_url, fetcher=fetcher, policy=policy, progress=show,
            )  # fmt: skip
    imported = build_books(directory)
    save_books(imported.books, out)
    facts = {
        "out": str(out),
        "directory": str(directory),
        "tokens": summary.tokens,
        "snapshots": imported.books.n_snapshots,
        "written": summary.written,
        "resumed": summary.resumed,
        "reconnects": summary.reconnects,
        "rest_checks": summary.rest_checks,
        "rest_hash_failures": summary.rest_hash_failures,
        "rest_resyncs": summary.rest_resyncs,
        "refused": summary.feed.refused,
        "refused_reasons": summary.feed.reasons,
        "stopped_by": summary.stopped_by,
        "hash": imported.books.hash,
    }
    if as_json:
        click.echo(json.dumps(facts, indent=2))
        return
    out_console = make_console()
    out_console.print(f"[bold]{out}[/]: {facts['snapshots']} snapshots of {summary.tokens} "
                      f"tokens, recorded in {directory} ({summary.stopped_by})")  # fmt: skip
    out_console.print(f"  {_status(summary)}")
    for note in imported.notes:
        out_console.print(f"[dim]note: {note}[/dim]", soft_wrap=True)


def _status(s: BookRecording) -> str:
    feed = s.feed
    line = (
        f"{s.written} snapshots written ({s.resumed} resumed) · {feed.books} books, "
        f"{feed.price_changes} price changes, {feed.tick_changes} tick changes, "
        f"{feed.trades} trades · {s.reconnects} reconnects · REST checks {s.rest_checks} "
        f"({s.rest_hash_failures} bad hash, {s.rest_resyncs} repaired)"
    )
    if feed.refused:
        line += f" · {feed.refused} refused"
    return line
