"""``arena tapes record``: record a tape from the live Polymarket APIs.

The command only wires things together: it owns the HTTP client (timeouts, a jittered retry
policy), shows progress, and hands the finished recording to the importer, so that a recorded
tape and an imported one are built by the same code.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import click
import httpx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from arena.commands.tapes_record_books import record_books_cmd
from arena.console import make_console
from replays import recorder
from replays.http import JsonFetcher, RetryPolicy
from replays.importers.polymarket import ImportResult
from replays.recorder import CLOB_URL, DEFAULT_FIDELITY, GAMMA_URL, INTERVALS, RecordingSummary
from replays.tapefile import tape_kind


@click.group("record", invoke_without_command=True)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Tape to write (.tape, .tape.jsonl.gz or .tape.jsonl).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Recording directory (default: OUT.recording); re-run to resume.",
)
@click.option(
    "--top",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="Keep the N markets with the most volume.",
)
@click.option("--start", help="Only markets starting at or after this ISO date/instant (UTC).")
@click.option("--end", help="Only markets ending at or before this ISO date/instant (UTC).")
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="LABEL",
    help="Gamma tag id or slug; repeat for any of several.",
)
@click.option(
    "--closed/--open",
    default=True,
    show_default=True,
    help="Resolved markets (for replays) or open ones.",
)
@click.option(
    "--interval",
    default="max",
    show_default=True,
    type=click.Choice(INTERVALS),
    help="CLOB prices-history interval.",
)
@click.option(
    "--fidelity",
    default=DEFAULT_FIDELITY,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="MINUTES",
    help="Minutes between price points (resolved markets need >= 720).",
)
@click.option("--gamma-url", default=GAMMA_URL, show_default=True, help="Gamma API base URL.")
@click.option("--clob-url", default=CLOB_URL, show_default=True, help="CLOB API base URL.")
@click.option(
    "--timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    metavar="S",
    help="Seconds before a request counts as failed (then retried).",
)
@click.option(
    "--max-retries",
    default=5,
    show_default=True,
    type=click.IntRange(min=0),
    help="Retries of a 429, 5xx, timeout or broken body before giving up.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def record(
    out: Path | None,
    directory: Path | None,
    top: int,
    start: str | None,
    end: str | None,
    tags: tuple[str, ...],
    closed: bool,
    interval: str,
    fidelity: int,
    gamma_url: str,
    clob_url: str,
    timeout: float,
    max_retries: int,
    as_json: bool,
) -> None:
    """Record the top markets by volume and their price histories, then build a tape.

    Raw API answers are kept in the recording directory; re-running the same command resumes
    an interrupted recording without asking again for what it already has.

    \b
    Example:
      arena tapes record --out politics.tape --tag politics --top 50 \\
          --start 2024-01-01 --end 2024-12-31
    """
    if click.get_current_context().invoked_subcommand:  # `record books ...`: its own options
        return
    if out is None:
        raise click.UsageError("Missing option '--out'.")
    directory = directory or out.with_name(out.name + ".recording")
    tape_kind(out)  # a bad extension should fail now, not after an hour of recording
    options = recorder.RecordOptions(
        top=top, start=start, end=end, tags=tags, closed=closed,
        interval=interval, fidelity=fidelity,
    )  # fmt: skip
    policy = RetryPolicy(max_retries=max_retries, jitter=random.Random().random)
    with httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=True) as client:
        fetcher = JsonFetcher(client, policy)
        with _progress(quiet=as_json) as bar:
            task = bar.add_task("prices", total=None)
            summary = recorder.record(
                fetcher, directory, options, recorder.Endpoints(gamma_url, clob_url),
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )  # fmt: skip
    imported = recorder.write_tape(directory, out)
    _report(summary, out, imported, as_json)


def _progress(quiet: bool) -> Progress:
    return Progress(
        TextColumn("recording {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=make_console(stderr=True),
        disable=quiet,
        transient=True,
    )


def _report(summary: RecordingSummary, out: Path, imported: ImportResult, as_json: bool) -> None:
    facts = {
        "tape": str(out),
        "tape_markets": len(imported.tape.markets),
        "skipped_no_prices": imported.skipped_no_prices,
        "undecided": imported.undecided,
        "directory": summary.directory,
        "markets": summary.markets,
        "markets_reused": summary.markets_reused,
        "tokens": summary.tokens,
        "tokens_recorded": summary.recorded,
        "tokens_resumed": summary.resumed,
        "points_recorded": summary.points,
        "requests": summary.requests,
    }
    if as_json:
        click.echo(json.dumps(facts, indent=2))
        return
    console = make_console()
    console.print(
        f"[bold]{out}[/]: {facts['tape_markets']} markets, recorded in {summary.directory}"
    )
    console.print(
        f"  {summary.markets} markets ({'reused' if summary.markets_reused else 'fetched'}), "
        f"{summary.tokens} tokens: {summary.recorded} recorded ({summary.points} points), "
        f"{summary.resumed} already there; {summary.requests} requests"
    )
    if imported.skipped_no_prices:
        console.print(
            f"  [yellow]left out {len(imported.skipped_no_prices)} markets with no prices[/] "
            f"(try a coarser --fidelity): {', '.join(imported.skipped_no_prices[:10])}"
        )
    if imported.undecided:
        console.print(f"  {len(imported.undecided)} closed markets have no decisive price yet")


record.add_command(record_books_cmd)
