"""``arena report DB``: the leaderboard and one line per cohort; each cohort's tables on
request; the same as JSON or as an HTML page."""

from __future__ import annotations

import json
from pathlib import Path

import click

from arena import blas  # noqa: F401  (before numpy loads: one BLAS thread)
from arena.console import make_console
from arena.reports.coverage import coverage
from arena.reports.model import IntervalSettings, report_data
from arena.reports.terminal import print_report
from ledger.errors import IntegrityError
from ledger.intervals import DRAWS, METHOD_CHOICES
from ledger.restore import check_log, checked_usage, load
from ledger.store import EventStore


@click.command()
@click.argument("db", type=click.Path(path_type=Path))
@click.option(
    "--cohort",
    "cohorts",
    multiple=True,
    help="Only these cohorts, with their own tables (repeatable).",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Every cohort's own tables, and the results per category.",
)
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
@click.option(
    "--html",
    "html_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write DIR/index.html (charts, settings) and DIR/report.json.",
)
@click.option(
    "--interval",
    type=click.Choice(METHOD_CHOICES),
    default="auto",
    show_default=True,
    help="95% intervals: bootstrap over markets, Student's t over cohorts, or auto "
    "(markets when cohorts share any).",
)
@click.option(
    "--draws",
    type=click.IntRange(100, 100_000),
    default=DRAWS,
    show_default=True,
    help="Bootstrap draws.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option(
    "--books",
    "books_path",
    type=str,
    default=None,
    help="The order books the cohorts met (a .books file, or 'sample-books'), for their "
    "coverage ledger over the markets traded; the sample's is found without it.",
)
def report(
    db: Path,
    cohorts: tuple[str, ...],
    show_all: bool,
    as_json: bool,
    html_dir: Path | None,
    interval: str,
    draws: int,
    seed: int,
    books_path: str | None,
) -> None:
    """The leaderboard across cohorts (mean return with a 95% interval that says how it was
    made, implied-confidence Brier and skill scores) and one line per cohort; for agents
    that ask a model, its calls, re-asks, failures, tokens, dollars and latency.

    \b
    Examples:
      arena report arena.db
      arena report arena.db --cohort 2024-09-01-3f2a9c1e
      arena report arena.db --all --interval cohorts
      arena report arena.db --html report/
      arena report arena.db --json
      arena report books.db --books btc.books
    """
    intervals = IntervalSettings(interval, draws, seed)  # type: ignore[arg-type]
    try:
        with EventStore.open(db, readonly=True) as store:
            check_log(store)  # a cohort missing from a damaged index is not "no such cohort"
            unknown = set(cohorts) - set(store.streams())
            if unknown:
                raise click.ClickException(f"{db} has no cohort {sorted(unknown)[0]}")
            loaded = load(store, cohorts or None)
            if not loaded.ledger.cohorts:  # a replay stopped before its first step
                raise click.ClickException(f"{db} holds no cohorts: nothing to report")
            usage = checked_usage(store, cohorts or None)
            states = [loaded.ledger.cohorts[name] for name in sorted(loaded.ledger.cohorts)]
            books = coverage(states, books_path)
            if html_dir is not None:
                from arena.reports.html import write_replay_report

                try:
                    write_replay_report(html_dir, store, loaded.ledger, intervals, usage, books)
                except OSError as exc:
                    raise click.ClickException(
                        f"{html_dir}: cannot write the report: {exc}"
                    ) from None
    except IntegrityError as exc:
        raise click.ClickException(f"{exc}; nothing reported (run 'arena verify {db}')") from None
    note = loaded.note()
    if note:
        click.echo(f"note: {note}", err=True)
    ledger = loaded.ledger
    if as_json:
        data = report_data(ledger, usage, intervals)
        if books:
            data["coverage"] = [c.as_dict() for c in books]
        click.echo(json.dumps(data, indent=2))
        return
    console = make_console()
    print_report(console, ledger, detail=True if cohorts or show_all else None,
                 intervals=intervals, usage=usage, books=books)  # fmt: skip
    if html_dir is not None:
        console.print(f"report [bold]{html_dir / 'index.html'}[/]")
